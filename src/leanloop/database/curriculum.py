"""Curriculum difficulty (LeanAgent's rule): a theorem's difficulty grows exponentially with the
number of steps of its proof, so it is kept as a logarithm; theorems with ``sorry`` are the hardest
and theorems without tactics are not rated. Theorems are Easy/Medium/Hard by the 33rd and 67th
percentiles, and repositories are ordered by their share of easy theorems."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import NamedTuple, overload

from leanloop.data.records import TheoremStatus


class Difficulty(StrEnum):
    EASY = "Easy"
    MEDIUM = "Medium"
    HARD = "Hard"


def log_difficulty(
    num_steps: int, status: TheoremStatus | str, *, rate: float = 1.0
) -> float | None:
    """``log(exp(rate * steps)) = rate * steps`` for a proof with steps; ``inf`` for a theorem that
    has (or had) a ``sorry``; None for a proof without tactics."""
    if TheoremStatus(status) is not TheoremStatus.PROVEN:
        return math.inf
    if num_steps <= 0:
        return None
    return rate * num_steps


def weighted_percentile(counts: Sequence[tuple[float, int]], q: float) -> float | None:
    """The ``q``-th percentile (linear interpolation between closest ranks, as numpy's default) of
    the multiset where each value occurs ``count`` times; ``counts`` sorted by value."""
    total = sum(c for _, c in counts)
    if total == 0:
        return None
    rank = q / 100 * (total - 1)
    lower, fraction = math.floor(rank), rank - math.floor(rank)

    def value_at(index: int) -> float:
        seen = 0
        for value, count in counts:
            seen += count
            if index < seen:
                return value
        return counts[-1][0]

    low = value_at(lower)
    if fraction == 0:
        return low
    return low + fraction * (value_at(lower + 1) - low)


@dataclass(frozen=True)
class Thresholds:
    easy_max: float
    medium_max: float

    @overload
    def categorize(self, difficulty: float) -> Difficulty: ...
    @overload
    def categorize(self, difficulty: None) -> None: ...
    def categorize(self, difficulty: float | None) -> Difficulty | None:
        if difficulty is None:
            return None
        if difficulty <= self.easy_max:
            return Difficulty.EASY
        if difficulty <= self.medium_max:
            return Difficulty.MEDIUM
        return Difficulty.HARD


def thresholds(difficulties: Iterable[tuple[float | None, int]]) -> Thresholds | None:
    """33rd/67th percentiles of the finite difficulties (given as value, count pairs)."""
    finite: dict[float, int] = {}
    for value, count in difficulties:
        if value is not None and math.isfinite(value):
            finite[value] = finite.get(value, 0) + count
    counts = sorted(finite.items())
    if not counts:
        return None
    low, high = weighted_percentile(counts, 33), weighted_percentile(counts, 67)
    if low is None or high is None:  # every count is 0
        return None
    return Thresholds(low, high)


class CurriculumRow(NamedTuple):
    """How many theorems of a repository have a number of proof steps and a status."""

    repository_id: int
    name: str
    num_steps: int
    status: str
    count: int  # type: ignore[assignment]  # the field hides tuple.count, as meant


@dataclass
class RepositoryDifficulty:
    """How a repository's theorems fall into the difficulty categories."""

    repository_id: int
    name: str
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def easy_share(self) -> float:
        return self.counts.get(Difficulty.EASY, 0) / self.total if self.total else 0.0


def rank_repositories(
    rows: Iterable[CurriculumRow | tuple[int, str, int, str, int]], *, rate: float = 1.0
) -> tuple[list[RepositoryDifficulty], Thresholds | None]:
    """Order repositories, easiest first, from rows of theorems grouped by repository, number
    of steps and status."""
    table = [CurriculumRow(*row) for row in rows]
    rated = [(log_difficulty(r.num_steps, r.status, rate=rate), r.count) for r in table]
    limits = thresholds(rated)
    repos: dict[int, RepositoryDifficulty] = {}
    for row, (difficulty, _) in zip(table, rated, strict=True):
        entry = repos.get(row.repository_id)
        if entry is None:
            entry = repos[row.repository_id] = RepositoryDifficulty(row.repository_id, row.name)
        if difficulty is not None and math.isinf(difficulty):
            category: str = Difficulty.HARD
        elif limits is None or difficulty is None:
            category = "Unrated"
        else:
            category = limits.categorize(difficulty)
        entry.counts[category] = entry.counts.get(category, 0) + row.count
    ordered = sorted(repos.values(), key=lambda r: (-r.easy_share, r.name, r.repository_id))
    return ordered, limits
