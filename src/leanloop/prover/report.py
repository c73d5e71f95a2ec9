"""``EvaluationReport``: the attempts of an evaluation run summed up — pass@1 and pass@k over the
attempts per theorem, how the attempts ended, the time per theorem — written as JSON and a plot."""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, model_serializer

from leanloop.atomic import write_figure_atomic, write_text_atomic
from leanloop.data.records import AttemptStatus, ProofAttempt, TheoremKey
from leanloop.words import percent, plural


def pass_at_k(attempts: int, found: int, k: int) -> float:
    """The chance that ``k`` attempts drawn from ``attempts`` (of which ``found`` found a
    proof) include one that did (the unbiased estimator of Chen et al., 2021)."""
    if attempts - found < k:
        return 1.0
    return 1.0 - math.comb(attempts - found, k) / math.comb(attempts, k)


class EvaluationReport(BaseModel):
    """What an evaluation run found.

    ``environment`` says where the attempts ran: ``lean`` (Lean servers; a proof counts only
    when Lean accepted it and its axioms passed the audit) or ``replay`` (recorded steps, no
    Lean). The rate of theorems with a proof is called ``pass_at_1`` / ``pass_at_k`` in ``lean``
    only; in a replay it is ``replayed_at_1`` / ``replayed_at_k`` (how often the recorded proof
    was found again: no proving). Every theorem attempted counts, errors and timeouts included.
    """

    run: str
    environment: Literal["lean", "replay", "recorded", "mixed", "unknown"] = Field(
        description="lean, replay, recorded (Lean's verdicts recorded earlier: axioms not "
        "audited, the rate is not a pass rate), mixed (several: the rate is not a pass rate), "
        "or unknown (attempts stored before leanloop recorded it)."
    )
    theorems: int = Field(description="Theorems attempted.")
    k: int = Field(description="Attempts per theorem.")
    pass_at_1: float | None = Field(default=None, description="Lean only: proofs Lean accepted.")
    pass_at_k: float | None = None
    replayed_at_1: float | None = Field(
        default=None,
        description="Not on Lean now (a replay, recorded verdicts): recorded proofs found again "
        "or accepted by a recorded verdict (not proving).",
    )
    replayed_at_k: float | None = None
    status_counts: dict[str, int] = Field(description="Attempts by how they ended.")
    axioms_used: dict[str, int] = Field(
        default_factory=dict,
        description="How many proved attempts depend on each axiom (Lean's audit).",
    )
    seconds_mean: float = Field(description="Mean wall-clock seconds of an attempt.")
    seconds_median: float
    seconds_max: float
    attempts: list[ProofAttempt]

    @classmethod
    def from_attempts(cls, run: str, attempts: Iterable[ProofAttempt]) -> EvaluationReport:
        """The report of a run's attempts.

        Args:
            run: The run's name.
            attempts: Its attempts (``DynamicDatabase.get_attempts(run)``).

        Returns:
            The rates, counts and times of the attempts.
        """
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

        environment = environment_of(attempts)
        rates = {"pass_at_1": mean_pass(1), "pass_at_k": mean_pass(k)}
        if environment != "lean":
            rates = {"replayed_at_1": rates["pass_at_1"], "replayed_at_k": rates["pass_at_k"]}
        seconds = [a.seconds for a in attempts] or [0.0]
        counts = Counter(a.status.value for a in attempts)
        return cls(
            run=run,
            environment=environment,
            theorems=len(by_theorem),
            k=k,
            **rates,
            status_counts={s.value: counts[s.value] for s in AttemptStatus if counts[s.value]},
            axioms_used=dict(
                sorted(
                    Counter(
                        axiom
                        for a in attempts
                        if a.status is AttemptStatus.PROVED
                        for axiom in a.axioms or ()
                    ).items()
                )
            ),
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
        value = self.pass_at_k if self.proving else self.replayed_at_k
        return value or 0.0

    @property
    def rate_name(self) -> str:
        """What the rate is called: ``pass`` on Lean, ``replayed`` otherwise."""
        return "pass" if self.proving else "replayed"

    @property
    def replayed_only(self) -> bool:
        """True when proofs were only found again in recorded data (no Lean checked them)."""
        return not self.proving

    def to_json(self, path: str | Path) -> Path:
        """Write the report as JSON (written aside and renamed into place).

        Args:
            path: The file.

        Returns:
            The file's path.
        """
        path = Path(path)
        write_text_atomic(path, self.model_dump_json(indent=1, exclude_none=True) + "\n")
        return path

    def plot(self, path: str | Path) -> Path:
        """Draw the time of each attempt by how it ended, and how many theorems a time budget
        would have solved (the PNG of :meth:`figure`).

        Args:
            path: The PNG file.

        Returns:
            The file's path.
        """
        return write_figure_atomic(path, self.figure())

    def figure(self):
        """The time of each attempt by how it ended, and how many theorems a time budget
        would have solved, as a matplotlib ``Figure``."""
        from matplotlib.figure import Figure

        figure = Figure(figsize=(10, 4.2))
        left, right = figure.subplots(1, 2)
        groups = {
            status.value: [a.seconds for a in self.attempts if a.status is status]
            for status in AttemptStatus
        }
        groups = {label: values for label, values in groups.items() if values}
        if groups:
            left.hist(list(groups.values()), bins=20, stacked=True, label=list(groups))
            left.legend(title="outcome")
        left.set_xlabel("seconds per attempt")
        left.set_ylabel("attempts")
        left.set_title(f"{plural(len(self.attempts), 'attempt')} by time and outcome")
        solved = sorted(a.seconds for a in self.attempts if a.status.found_proof)
        found = "theorems proved" if self.proving else "recorded proofs found"
        right.step(solved, range(1, len(solved) + 1), where="post")
        right.set_ylim(0, max(1, self.theorems))
        right.set_xlabel("time budget per attempt (s)")
        right.set_ylabel(found)
        right.set_title(f"{found} within a time budget (of {plural(self.theorems, 'theorem')})")
        figure.suptitle(
            f"{self.run}: {self.rate_name}@1 {percent(self.rate_at_1)} on "
            f"{plural(self.theorems, 'theorem')}"
            + (" (recorded proofs found, no Lean)" if self.replayed_only else "")
        )
        figure.tight_layout()
        return figure


def environment_of(attempts: Iterable[ProofAttempt]) -> str:
    """Where ``attempts`` ran: ``lean``, ``replay``, ``recorded``, ``mixed`` or ``unknown`` (an
    attempt stored without it counts as a replay when it replayed, as Lean when Lean proved
    it)."""
    seen = set()
    for attempt in attempts:
        environment = attempt.environment
        if environment is None and attempt.status is AttemptStatus.REPLAYED:
            environment = "replay"
        elif environment is None and attempt.status is AttemptStatus.PROVED:
            environment = "lean"
        seen.add(environment)
    # attempts that failed before reaching a server say nothing
    known = {environment for environment in seen if environment is not None}
    if len(known) > 1:
        return "mixed"
    return known.pop() if known else "unknown"
