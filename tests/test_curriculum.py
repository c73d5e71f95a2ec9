from __future__ import annotations

import math
import random

import pytest

from leanloop.database.curriculum import (
    CurriculumRow,
    Difficulty,
    log_difficulty,
    rank_repositories,
    thresholds,
    weighted_percentile,
)


def numpy_like_percentile(values, q):
    values = sorted(values)
    rank = q / 100 * (len(values) - 1)
    low = math.floor(rank)
    high = min(low + 1, len(values) - 1)
    return values[low] + (rank - low) * (values[high] - values[low])


def test_log_difficulty_rules():
    assert log_difficulty(3, "proven") == 3.0
    assert log_difficulty(0, "proven") is None
    assert log_difficulty(5, "sorry") == math.inf
    assert log_difficulty(0, "sorry_proved") == math.inf
    # exp(10_000) overflows a float; its logarithm does not
    assert log_difficulty(10_000, "proven") == 10_000.0


@pytest.mark.parametrize("seed", range(10))
def test_weighted_percentile_matches_linear_interpolation(seed):
    rng = random.Random(seed)
    values = [rng.randint(1, 20) for _ in range(rng.randint(1, 300))]
    counts = sorted({v: values.count(v) for v in values}.items())
    for q in (0, 33, 50, 67, 100):
        assert weighted_percentile(counts, q) == pytest.approx(numpy_like_percentile(values, q))


def test_thresholds_ignore_unrated_and_sorry():
    limits = thresholds([(1.0, 10), (2.0, 10), (9.0, 10), (None, 50), (math.inf, 40)])
    assert limits.easy_max == pytest.approx(
        numpy_like_percentile([1] * 10 + [2] * 10 + [9] * 10, 33)
    )
    assert limits.categorize(None) is None
    assert limits.categorize(1.0) is Difficulty.EASY
    assert limits.categorize(100.0) is Difficulty.HARD
    assert thresholds([]) is None and thresholds([(None, 3), (math.inf, 2)]) is None


def test_rank_repositories_by_easy_share():
    rows = [
        (1, "hard/repo", 9, "proven", 10),
        (1, "hard/repo", 1, "proven", 1),
        (2, "easy/repo", 1, "proven", 8),
        (2, "easy/repo", 5, "sorry", 2),
        (3, "empty/repo", 0, "proven", 0),
        (4, "termmode/repo", 0, "proven", 5),
    ]
    ranked, limits = rank_repositories(rows)
    easy = ranked[0]
    assert easy.counts[Difficulty.EASY] == 8 and easy.counts[Difficulty.HARD] == 2
    assert easy.easy_share == pytest.approx(0.8)
    term = next(r for r in ranked if r.name == "termmode/repo")
    assert term.counts == {"Unrated": 5}
    # the rated proofs are nine of one step and ten of nine steps (sorries are not rated)
    assert (limits.easy_max, limits.medium_max) == (1.0, 9.0)
    hard = ranked[1]
    assert hard.counts == {Difficulty.EASY: 1, Difficulty.MEDIUM: 10}
    # no easy theorems: ordered by name
    assert [r.name for r in ranked] == ["easy/repo", "hard/repo", "empty/repo", "termmode/repo"]


def test_rank_with_no_data():
    assert rank_repositories([]) == ([], None)
    ranked, limits = rank_repositories([(1, "only/sorry", 3, "sorry", 4)])
    assert limits is None and ranked[0].counts == {Difficulty.HARD: 4}


def test_rows_may_be_typed_or_plain_tuples():
    typed = [CurriculumRow(7, "a/b", 2, "proven", 3), CurriculumRow(7, "a/b", 5, "proven", 1)]
    plain = [tuple(row) for row in typed]
    assert rank_repositories(typed) == rank_repositories(plain)
