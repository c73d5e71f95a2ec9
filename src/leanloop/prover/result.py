"""``SearchResult``: how one attempt at a theorem ended (proved, replayed, failed, timeout, budget
or error), with its proof, its counts and times, and its record for the database."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from leanloop.data.records import AttemptStatus, ProofAttempt, Theorem


class SearchResult(BaseModel):
    """The outcome of a search (or of whole-proof mode) on one theorem or goal.

    ``proof`` is set exactly when ``status`` is ``proved`` (Lean accepted it) or ``replayed``
    (found again in recorded data, which no Lean checked): the tactics from the first state to
    the finished proof, or one whole proof in whole-proof mode. ``error`` says why for
    ``error`` (and what was found otherwise, e.g. the step a re-check stopped at).

    Attributes:
        status: How the attempt ended.
        proof: The proof found (see above).
        error: Why it ended so, or what was found.
    """

    model_config = ConfigDict(frozen=True)

    target: str = Field(description="The theorem's full name, or the goal.")
    status: AttemptStatus
    proof: tuple[str, ...] | None = None
    error: str | None = None
    expansions: int = Field(
        default=0, ge=0, description="Nodes expanded (generator calls per node)."
    )
    tree_size: int = Field(default=0, ge=0, description="Distinct proof states in the search tree.")
    seconds: float = Field(default=0.0, ge=0, description="Wall-clock time of the whole attempt.")
    lean_seconds: float = Field(default=0.0, ge=0, description="Time spent waiting for the server.")
    model_seconds: float = Field(default=0.0, ge=0, description="Time spent in the generator.")
    axioms: tuple[str, ...] | None = Field(
        default=None,
        description="The axioms Lean's audit reported the proof depends on (None: no audit "
        "ran, as in a replay).",
    )

    @property
    def found_proof(self) -> bool:
        """Whether a proof was found (proved, replayed or recorded)."""
        return self.status.found_proof

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
            run=run,
            url=theorem.url,
            commit=theorem.commit,
            file_path=theorem.file_path,
            full_name=theorem.full_name,
            attempt=attempt,
            status=self.status,
            proof=self.proof,
            prover=prover,
            expansions=self.expansions,
            tree_size=self.tree_size,
            seconds=self.seconds,
            lean_seconds=self.lean_seconds,
            model_seconds=self.model_seconds,
            error=self.error,
            axioms=self.axioms,
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
