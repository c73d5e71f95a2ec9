"""``SearchResult``: how one attempt at a theorem ended (proved, replayed, failed, timeout, budget
or error), with its proof, its counts and times, and its record for the database."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from leanloop.data.records import AttemptOutcome, AttemptStatus, ProofAttempt, Theorem


class SearchResult(AttemptOutcome):
    """The outcome of a search (or of whole-proof mode) on one theorem or goal: how the attempt
    ended (``AttemptOutcome``'s fields, which the stored ``ProofAttempt`` shares) and what it
    was on.

    ``proof`` is set exactly when ``status`` is ``proved`` (Lean accepted it) or ``replayed``
    (found again in recorded data, which no Lean checked): the tactics from the first state to
    the finished proof, or one whole proof in whole-proof mode. ``error`` says why for
    ``error`` (and what was found otherwise, e.g. the step a re-check stopped at).

    Attributes:
        target: The theorem's full name, or the goal.
    """

    target: str = Field(description="The theorem's full name, or the goal.")

    @property
    def proof_text(self) -> str | None:
        """The proof as the body of a ``by`` block (one tactic a line)."""
        return None if self.proof is None else "\n".join(self.proof)

    def to_attempt(
        self,
        theorem: Theorem,
        *,
        run: str,
        attempt: int = 0,
        prover: str = "",
        environment: Literal["lean", "replay"] | None = None,
    ) -> ProofAttempt:
        """The database record of this result.

        Args:
            theorem: The theorem the attempt was on.
            run: The run's name.
            attempt: Which attempt on the theorem it was (for pass@k).
            prover: The prover's name.
            environment: ``lean`` when a Lean server checked it, ``replay`` for recorded
                steps; None when unknown.

        Returns:
            The ``ProofAttempt`` to store with ``DynamicDatabase.record_attempt``.
        """
        return ProofAttempt(
            **self.model_dump(exclude={"target"}),
            run=run,
            url=theorem.url,
            commit=theorem.commit,
            file_path=theorem.file_path,
            full_name=theorem.full_name,
            attempt=attempt,
            prover=prover,
            environment=environment,
        )

    def __str__(self) -> str:
        outcome = describe_status(self.status)
        detail = f": {self.error}" if self.error else ""
        return (
            f"{self.target}: {outcome}{detail} ({self.expansions} expansions, {self.seconds:.2f} s)"
        )


def describe_status(status: AttemptStatus) -> str:
    """How an outcome is shown to a user: a replay says what it found, never 'proved'."""
    if status is AttemptStatus.REPLAYED:
        return "replayed (recorded proof found)"
    if status is AttemptStatus.RECORDED:
        return "accepted by a recorded verdict (axioms not audited)"
    return status.value
