"""Premise-retrieval metrics as ReProver defines them: per tactic step with at least one positive
premise, R@k = |positives ∩ top-k| / |positives| and MRR = 1 / rank of the first positive (0 when
none is retrieved), each averaged over the steps. Values are fractions in [0, 1]."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field, replace

from leanloop.words import plural


def recall_at_k(positives: Collection[str], ranked: Sequence[str], k: int) -> float:
    """Share of the positives found among the first ``k`` retrieved premises."""
    if not positives:
        raise ValueError("recall needs at least one positive premise")
    wanted = set(positives)
    return len(wanted.intersection(ranked[:k])) / len(wanted)


def reciprocal_rank(positives: Collection[str], ranked: Sequence[str]) -> float:
    """1 / (1-based rank of the first positive in ``ranked``), 0 when there is none."""
    wanted = set(positives)
    for rank, name in enumerate(ranked, start=1):
        if name in wanted:
            return 1.0 / rank
    return 0.0


@dataclass(frozen=True)
class RetrievalMetrics:
    """R@1, R@10 and MRR averaged over ``steps`` tactic steps; ``pool`` and ``pool_size`` say
    which premises were ranked, when known (see ``leanloop.retrieval.corpus.CandidatePool``)."""

    recall_at_1: float
    recall_at_10: float
    mrr: float
    steps: int
    pool: str | None = None
    pool_size: int | None = None

    def among(self, pool: str, pool_size: int) -> RetrievalMetrics:
        """The same figures, stating the candidate pool they were measured among."""
        return replace(self, pool=pool, pool_size=pool_size)

    def as_dict(self) -> dict[str, float]:
        return {
            "R@1": self.recall_at_1,
            "R@10": self.recall_at_10,
            "MRR": self.mrr,
            "steps": self.steps,
        }

    def __str__(self) -> str:
        among = (
            ""
            if self.pool is None or self.pool_size is None
            else f", among {plural(self.pool_size, 'premise')} ({self.pool})"
        )
        return (
            f"R@1={100 * self.recall_at_1:.2f}% R@10={100 * self.recall_at_10:.2f}% "
            f"MRR={self.mrr:.4f} ({plural(self.steps, 'step')}{among})"
        )


@dataclass
class MetricsAccumulator:
    """Adds up the metrics step by step; steps without positives are skipped."""

    r1: list[float] = field(default_factory=list)
    r10: list[float] = field(default_factory=list)
    rr: list[float] = field(default_factory=list)

    def add(self, positives: Collection[str], ranked: Sequence[str]) -> None:
        if not positives:
            return
        self.r1.append(recall_at_k(positives, ranked, 1))
        self.r10.append(recall_at_k(positives, ranked, 10))
        self.rr.append(reciprocal_rank(positives, ranked))

    def result(self) -> RetrievalMetrics:
        n = len(self.rr)
        if n == 0:
            return RetrievalMetrics(0.0, 0.0, 0.0, 0)
        return RetrievalMetrics(sum(self.r1) / n, sum(self.r10) / n, sum(self.rr) / n, n)


def evaluate_rankings(
    pairs: Iterable[tuple[Collection[str], Sequence[str]]],
) -> RetrievalMetrics:
    """Metrics of ``(positives, ranked premise names)`` pairs, one per tactic step."""
    accumulator = MetricsAccumulator()
    for positives, ranked in pairs:
        accumulator.add(positives, ranked)
    return accumulator.result()
