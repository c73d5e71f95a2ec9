"""``EvaluationReport``: the run report (:class:`~leanloop.prover.run_report.RunReport`) of the
attempts of an evaluation run, kept for one release with the names it had — pass@1 and pass@k
over the attempts per theorem (``pass_at_1`` on Lean, ``replayed_at_1`` otherwise), how the
attempts ended (``status_counts``), the time per attempt — written as JSON, Markdown and a
plot."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable

from pydantic import Field, model_serializer

from leanloop.data.records import AttemptStatus, ProofAttempt
from leanloop.prover.passk import pass_at_k
from leanloop.prover.run_report import RunReport, environment_of, rows_of_attempts

__all__ = ["EvaluationReport", "environment_of", "pass_at_k"]


class EvaluationReport(RunReport):
    """What an evaluation run found: a :class:`RunReport` with the figures it was read by.

    ``environment`` says where the attempts ran: ``lean`` (Lean servers; a proof counts only
    when Lean accepted it and its axioms passed the audit), ``replay`` (recorded steps, no
    Lean) or ``recorded`` (Lean's verdicts recorded earlier). The rate of theorems with a proof
    is called ``pass_at_1`` / ``pass_at_k`` on Lean only; otherwise it is ``replayed_at_1`` /
    ``replayed_at_k`` (not proving). Every theorem attempted counts, errors and timeouts
    included.
    """

    theorems: int = Field(default=0, description="Theorems attempted.")
    k: int = Field(default=1, description="Attempts per theorem (the most any theorem had).")
    pass_at_1: float | None = Field(default=None, description="Lean only: proofs Lean accepted.")
    pass_at_k: float | None = None
    replayed_at_1: float | None = Field(
        default=None,
        description="Not on Lean now (a replay, recorded verdicts): recorded proofs found again "
        "or accepted by a recorded verdict (not proving).",
    )
    replayed_at_k: float | None = None
    status_counts: dict[str, int] = Field(
        default_factory=dict, description="Attempts by how they ended (the report's statuses)."
    )
    seconds_mean: float = Field(default=0.0, description="Mean wall-clock seconds of an attempt.")
    seconds_median: float = 0.0
    seconds_max: float = 0.0
    attempts: list[ProofAttempt] = Field(default_factory=list)

    @classmethod
    def from_attempts(cls, run: str, attempts: Iterable[ProofAttempt]) -> EvaluationReport:
        """The report of a run's attempts.

        Args:
            run: The run's name.
            attempts: Its attempts (``DynamicDatabase.get_attempts(run)``).

        Returns:
            The rates, counts and times of the attempts, theorem by theorem.
        """
        attempts = list(attempts)
        rows = rows_of_attempts(attempts)
        k = max((row.samples for row in rows), default=1)

        def mean_pass(at: int) -> float:
            if not rows:
                return 0.0
            return statistics.fmean(
                pass_at_k(row.samples, row.found, min(at, row.samples)) for row in rows
            )

        environment = environment_of(attempts)
        rates = {"pass_at_1": mean_pass(1), "pass_at_k": mean_pass(k)}
        if environment != "lean":
            rates = {"replayed_at_1": rates["pass_at_1"], "replayed_at_k": rates["pass_at_k"]}
        seconds = [a.seconds for a in attempts] or [0.0]
        counts = Counter(a.status.value for a in attempts)
        provers = Counter(a.prover for a in attempts if a.prover)
        return cls(
            run=run,
            generator=provers.most_common(1)[0][0] if provers else "",
            checker={"lean": "Lean servers", "replay": "replay"}.get(environment, environment),
            environment=environment,
            axioms_audited=environment == "lean",
            samples=k,
            rows=rows,
            theorems=len(rows),
            k=k,
            **rates,
            status_counts={s.value: counts[s.value] for s in AttemptStatus if counts[s.value]},
            seconds_mean=statistics.fmean(seconds),
            seconds_median=statistics.median(seconds),
            seconds_max=max(seconds),
            attempts=attempts,
        )

    @model_serializer(mode="wrap")
    def _named_rates(self, handler):
        """The rates under their own names only: no ``pass_at_1`` key in a replay's JSON."""
        data = handler(self)
        for name in ("pass_at_1", "pass_at_k", "replayed_at_1", "replayed_at_k"):
            if data.get(name) is None:
                data.pop(name, None)
        return data

    @property
    def proving(self) -> bool:
        """Whether the rate is a pass rate (every attempt ran on Lean)."""
        return self.environment == "lean"

    @property
    def rate_at_1(self) -> float:
        """The share of theorems with a proof found by one attempt: ``pass_at_1`` on Lean,
        ``replayed_at_1`` otherwise."""
        value = self.pass_at_1 if self.proving else self.replayed_at_1
        return value or 0.0

    @property
    def rate_at_k(self) -> float:
        """The share of theorems with a proof found by ``k`` attempts."""
        value = self.pass_at_k if self.proving else self.replayed_at_k
        return value or 0.0

    @property
    def replayed_only(self) -> bool:
        """True when proofs were only found again in recorded data (no Lean checked them)."""
        return not self.proving
