"""Assign theorems to train/val/test by LeanDojo's two schemes, keeping earlier assignments.

``random``: a seeded shuffle; the first theorems go to val, the next to test, the rest to train.

``novel_premises`` (LeanDojo's rule): premises are taken in order of how few theorems use them,
and every theorem using a taken premise goes to val/test, until val/test are large enough. Every
val/test theorem therefore uses a premise that no train theorem uses.

Both work incrementally: a theorem that already has a split keeps it (so a test theorem never
moves to train when repositories are added), and only new theorems are placed. For
``novel_premises`` a new theorem that uses a premise so far used only by val/test theorems goes to
val/test too, so that the guarantee above keeps holding for the old theorems.

The order of theorems and premises comes from a keyed hash of the seed, so the result depends only
on the seed and the data, never on the order theorems were added in.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter, defaultdict
from collections.abc import Collection, Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

Split = Literal["train", "val", "test"]


class SplitConfig(BaseModel):
    """Sizes of val and test: a fraction of the theorems (a float below 1) or a count (an int).

    Attributes:
        val: The validation split's size (default a tenth).
        test: The test split's size (default a tenth).
        seed: The seed of the rules that place new theorems in splits.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    val: float | int = 0.1
    test: float | int = 0.1
    seed: int = 3407

    @field_validator("val", "test")
    @classmethod
    def _check_size(cls, value: float | int) -> float | int:
        if isinstance(value, bool) or not math.isfinite(value) or value < 0:
            raise ValueError("must be a fraction in [0, 1) or a non-negative count")
        if isinstance(value, float) and value >= 1:
            if value.is_integer():
                return int(value)
            raise ValueError("a fraction must be below 1; give a count as an integer")
        return value

    @model_validator(mode="after")
    def _check_total(self) -> SplitConfig:
        if (
            isinstance(self.val, float)
            and isinstance(self.test, float)
            and self.val + self.test > 1
        ):
            raise ValueError("val and test fractions add up to more than 1")
        return self

    def sizes(self, total: int) -> tuple[int, int]:
        """How many theorems val and test should have.

        Args:
            total: The number of theorems split.

        Returns:
            The sizes of val and of test (together never more than ``total``).
        """
        val = _size(self.val, total)
        test = min(_size(self.test, total), total - val)
        return val, test


def _size(spec: float | int, total: int) -> int:
    if isinstance(spec, int):
        return min(spec, total)
    return min(int(spec * total + 0.5), total)


def _order(seed: int):
    prefix = f"{seed}\0".encode()

    def key(name: str) -> bytes:
        return hashlib.blake2b(prefix + name.encode("utf-8"), digest_size=16).digest()

    return key


def assign_random(
    keys: Sequence[str], existing: Mapping[str, str], config: SplitConfig
) -> dict[str, str]:
    """Splits for the keys that have none in ``existing``."""
    val_target, test_target = config.sizes(len(keys))
    have = Counter(existing[k] for k in keys if k in existing)
    new = sorted((k for k in keys if k not in existing), key=_order(config.seed))
    need_val = max(0, val_target - have["val"])
    need_test = max(0, test_target - have["test"])
    result: dict[str, str] = {}
    for i, key in enumerate(new):
        result[key] = "val" if i < need_val else "test" if i < need_val + need_test else "train"
    return result


def assign_novel_premises(
    premises_of: Mapping[str, Collection[str]],
    existing: Mapping[str, str],
    config: SplitConfig,
) -> dict[str, str]:
    """Splits for the keys of ``premises_of`` (key -> premises its proof uses) that have none."""
    order = _order(config.seed)
    val_target, test_target = config.sizes(len(premises_of))
    have = Counter(existing[k] for k in premises_of if k in existing)

    train_premises: set[str] = set()
    held_out_premises: set[str] = set()
    for key, split in existing.items():
        if key in premises_of:
            (train_premises if split == "train" else held_out_premises).update(premises_of[key])
    protected = held_out_premises - train_premises

    new = [k for k in premises_of if k not in existing]
    held_out = {k for k in new if protected.intersection(premises_of[k])}

    filled = have["val"] + have["test"] + len(held_out)
    if filled < val_target + test_target:
        usage: Counter[str] = Counter()
        users: defaultdict[str, list[str]] = defaultdict(list)
        for key, used in premises_of.items():
            fresh = key not in existing and key not in held_out
            for premise in used:
                usage[premise] += 1
                if fresh:
                    users[premise].append(key)
        candidates = sorted(
            (p for p in users if p not in train_premises), key=lambda p: (usage[p], order(p))
        )
        for premise in candidates:
            if filled >= val_target + test_target:
                break
            for key in users[premise]:
                if key not in held_out:
                    held_out.add(key)
                    filled += 1

    need_val = max(0, val_target - have["val"])
    result = {k: "train" for k in new if k not in held_out}
    for i, key in enumerate(sorted(held_out, key=order)):
        result[key] = "val" if i < need_val else "test"
    return result
