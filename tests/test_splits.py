from __future__ import annotations

import random

import pytest
from pydantic import ValidationError

from leanloop.database.splits import SplitConfig, assign_novel_premises, assign_random


def synthetic(n: int, n_premises: int, seed: int) -> dict[str, set[str]]:
    """Theorem key -> premises, with a long-tailed premise popularity like real proofs."""
    rng = random.Random(seed)
    weights = [1 / (i + 1) for i in range(n_premises)]
    return {
        f"thm{i}": set(
            rng.choices([f"p{j}" for j in range(n_premises)], weights, k=rng.randint(0, 6))
        )
        for i in range(n)
    }


def check_novel(premises_of, assignment):
    train_used = set().union(*(premises_of[k] for k, s in assignment.items() if s == "train"))
    for key, split in assignment.items():
        if split != "train":
            assert premises_of[key] - train_used, f"{key} in {split} uses no novel premise"


def test_config_sizes():
    assert SplitConfig(val=0.1, test=0.1).sizes(177) == (18, 18)
    assert SplitConfig(val=5, test=500).sizes(100) == (5, 95)
    assert SplitConfig(val=2.0, test=0).sizes(10) == (2, 0)
    assert SplitConfig().sizes(0) == (0, 0)
    for bad in ({"val": -1}, {"val": 1.5}, {"val": 0.6, "test": 0.6}):
        with pytest.raises(ValidationError):
            SplitConfig(**bad)


def test_random_sizes_exact_and_deterministic():
    keys = [f"k{i}" for i in range(1000)]
    config = SplitConfig(val=0.05, test=30, seed=7)
    first = assign_random(keys, {}, config)
    again = assign_random(list(reversed(keys)), {}, config)
    assert first == again
    counts = {s: sum(1 for v in first.values() if v == s) for s in ("train", "val", "test")}
    assert counts == {"train": 920, "val": 50, "test": 30}
    other_seed = assign_random(keys, {}, SplitConfig(val=0.05, test=30, seed=8))
    assert other_seed != first


def test_random_keeps_old_assignments_when_growing():
    config = SplitConfig(val=0.1, test=0.1)
    old_keys = [f"a{i}" for i in range(300)]
    old = assign_random(old_keys, {}, config)
    keys = old_keys + [f"b{i}" for i in range(700)]
    new = assign_random(keys, old, config)
    assert set(new) == {f"b{i}" for i in range(700)}
    merged = {**old, **new}
    counts = {s: sum(1 for v in merged.values() if v == s) for s in ("val", "test")}
    assert counts == {"val": 100, "test": 100}


@pytest.mark.parametrize("seed", range(5))
def test_novel_premises_invariant_and_sizes(seed):
    premises_of = synthetic(2000, 400, seed)
    config = SplitConfig(val=0.1, test=0.1, seed=seed)
    assignment = assign_novel_premises(premises_of, {}, config)
    assert set(assignment) == set(premises_of)
    check_novel(premises_of, assignment)
    val = sum(1 for s in assignment.values() if s == "val")
    test = sum(1 for s in assignment.values() if s == "test")
    assert val == 200 and test >= 200 and val + test < 600
    # theorems without premises can never be novel
    assert all(assignment[k] == "train" for k, p in premises_of.items() if not p)


@pytest.mark.parametrize("seed", range(5))
def test_novel_premises_incremental_keeps_guarantee(seed):
    everything = synthetic(3000, 500, seed + 100)
    keys = list(everything)
    config = SplitConfig(val=0.1, test=0.1, seed=seed)
    first = {k: everything[k] for k in keys[:1000]}
    old = assign_novel_premises(first, {}, config)
    new = assign_novel_premises(everything, old, config)
    assert not set(new) & set(old)
    merged = {**old, **new}
    assert set(merged) == set(everything)
    check_novel(everything, merged)


def test_novel_premises_deterministic_under_reordering():
    premises_of = synthetic(500, 100, 3)
    shuffled = dict(reversed(list(premises_of.items())))
    config = SplitConfig(seed=11)
    assert assign_novel_premises(premises_of, {}, config) == assign_novel_premises(
        shuffled, {}, config
    )


def test_empty_inputs():
    assert assign_random([], {}, SplitConfig()) == {}
    assert assign_novel_premises({}, {}, SplitConfig()) == {}
