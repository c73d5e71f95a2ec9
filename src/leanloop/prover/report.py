"""``EvaluationReport``: the attempts of an evaluation run summed up — pass@1 and pass@k over the
attempts per theorem, how the attempts ended, the time per theorem — written as JSON and a plot."""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, Field

from leanloop.atomic import write_figure_atomic, write_text_atomic
from leanloop.data.records import AttemptStatus, ProofAttempt, TheoremKey


def pass_at_k(attempts: int, found: int, k: int) -> float:
    """The chance that ``k`` attempts drawn from ``attempts`` (of which ``found`` found a
    proof) include one that did (the unbiased estimator of Chen et al., 2021)."""
    if attempts - found < k:
        return 1.0
    return 1.0 - math.comb(attempts - found, k) / math.comb(attempts, k)


class EvaluationReport(BaseModel):
    """What an evaluation run found. ``pass_at_1`` and ``pass_at_k`` count a theorem as solved
    by an attempt that found a proof (``proved``, or ``replayed`` in a replay: then it measures
    how often the recorded proof was found, not proving); every theorem attempted counts,
    errors and timeouts included."""

    run: str
    theorems: int = Field(description="Theorems attempted.")
    k: int = Field(description="Attempts per theorem.")
    pass_at_1: float
    pass_at_k: float
    status_counts: dict[str, int] = Field(description="Attempts by how they ended.")
    seconds_mean: float = Field(description="Mean wall-clock seconds of an attempt.")
    seconds_median: float
    seconds_max: float
    attempts: list[ProofAttempt]

    @classmethod
    def from_attempts(cls, run: str, attempts: Iterable[ProofAttempt]) -> EvaluationReport:
        attempts = list(attempts)
        by_theorem: dict[tuple[TheoremKey, str], list[ProofAttempt]] = defaultdict(list)
        for attempt in attempts:
            by_theorem[(attempt.key, attempt.commit)].append(attempt)
        k = max((len(found) for found in by_theorem.values()), default=1)

        def mean_pass(at: int) -> float:
            if not by_theorem:
                return 0.0
            return statistics.fmean(
                pass_at_k(len(a), sum(x.status.found_proof for x in a), min(at, len(a)))
                for a in by_theorem.values()
            )

        seconds = [a.seconds for a in attempts] or [0.0]
        counts = Counter(a.status.value for a in attempts)
        return cls(
            run=run,
            theorems=len(by_theorem),
            k=k,
            pass_at_1=mean_pass(1),
            pass_at_k=mean_pass(k),
            status_counts={s.value: counts[s.value] for s in AttemptStatus if counts[s.value]},
            seconds_mean=statistics.fmean(seconds),
            seconds_median=statistics.median(seconds),
            seconds_max=max(seconds),
            attempts=attempts,
        )

    @property
    def replayed_only(self) -> bool:
        """True when proofs were only found again in recorded data (no Lean checked them)."""
        return bool(self.status_counts.get("replayed")) and not self.status_counts.get("proved")

    def to_json(self, path: str | Path) -> Path:
        path = Path(path)
        write_text_atomic(path, self.model_dump_json(indent=1) + "\n")
        return path

    def plot(self, path: str | Path) -> Path:
        """A PNG: the time of each attempt by how it ended, and how many theorems a time
        budget would have solved."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        path = Path(path)
        figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
        groups = {
            status.value: [a.seconds for a in self.attempts if a.status is status]
            for status in AttemptStatus
        }
        groups = {label: values for label, values in groups.items() if values}
        if groups:
            left.hist(list(groups.values()), bins=20, stacked=True, label=list(groups))
            left.legend()
        left.set_xlabel("seconds per attempt")
        left.set_ylabel("attempts")
        solved = sorted(a.seconds for a in self.attempts if a.status.found_proof)
        right.step(solved, range(1, len(solved) + 1), where="post")
        right.set_xlabel("time budget (s)")
        right.set_ylabel("replayed" if self.replayed_only else "proved")
        figure.suptitle(
            f"{self.run}: pass@1 {self.pass_at_1:.3f} on {self.theorems} theorems"
            + (" (recorded proofs found, no Lean)" if self.replayed_only else "")
        )
        figure.tight_layout()
        write_figure_atomic(path, figure)
        plt.close(figure)
        return path
