"""The offline replay environment: ``ReplayServer``, a ``LeanServer`` built from traced data (a
LeanDojo-format dataset or the database) that answers a recorded state and its recorded tactic
with the recorded next state and rejects everything else, so that search, provers and agents run
end to end without Lean. No Lean checks anything here: what it finds is "replayed", never
"proved".

A recorded step is applied to a state whose goals begin with the step's goals before. LeanDojo
records a step inside a focusing block (``·``, ``case``, ``next``, a ``have ... := by`` proof)
with only the goals of that block; in the traced proof the other goals waited, untouched, while
the block ran, and they are there again after it. So a step recorded from goals ``A`` applied to
a state ``A + B`` gives its recorded goals after, followed by ``B``. Nothing else is inferred:
a goal whose text changed while it waited (a metavariable assigned by a sibling goal) matches
no recorded step, and a step LeanDojo did not record cannot be replayed.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from leanloop.data.prompt import collapse_whitespace
from leanloop.data.records import NO_GOALS, Repository, Theorem
from leanloop.lean.errors import LeanRequestError
from leanloop.lean.server import (
    CheckResult,
    LeanServer,
    ProofFinished,
    ProofState,
    TacticFailed,
    TacticResult,
    TheoremSource,
)

if TYPE_CHECKING:
    from leanloop.database import DynamicDatabase


class RecordedStep(NamedTuple):
    """One traced tactic: the goals it started from, the goals it left, its text."""

    before: tuple[str, ...]
    after: tuple[str, ...]
    tactic: str
    key: str  # the tactic, whitespace collapsed (how tactics are compared)


def goals_of(state: str) -> tuple[str, ...]:
    """The goals of a state as LeanDojo writes it (separated by blank lines; 'no goals')."""
    state = state.strip()
    return () if state == NO_GOALS or not state else tuple(state.split("\n\n"))


def recorded_steps(theorem: Theorem) -> Iterator[RecordedStep]:
    """The theorem's traced steps that can be replayed (a ``sorry`` step is not a proof)."""
    for step in theorem.traced_tactics:
        if not step.is_sorry and step.tactic.strip():
            yield RecordedStep(
                goals_of(step.state_before),
                goals_of(step.state_after),
                step.tactic,
                collapse_whitespace(step.tactic),
            )


class StepIndex:
    """Recorded steps looked up by the goals they apply to."""

    def __init__(self, steps: Iterable[RecordedStep] = ()) -> None:
        self._by_first_goal: dict[str, list[RecordedStep]] = {}
        for step in steps:
            self.add(step)

    def add(self, step: RecordedStep) -> None:
        if step.before:
            self._by_first_goal.setdefault(step.before[0], []).append(step)

    def applicable(self, goals: tuple[str, ...], at: int = 0) -> list[RecordedStep]:
        """Steps whose goals before are the goals from position ``at`` on (all of them, or the
        first ones), those covering more goals first."""
        if at >= len(goals):
            return []
        steps = [
            step
            for step in self._by_first_goal.get(goals[at], ())
            if goals[at : at + len(step.before)] == step.before
        ]
        steps.sort(key=lambda step: -len(step.before))
        return steps

    def apply(self, goals: tuple[str, ...], tactic: str, at: int = 0) -> tuple[str, ...] | None:
        """The goals after ``tactic`` on ``goals`` (on the goal at ``at`` and those after it)
        by a recorded step, or None when no recorded step matches."""
        key = collapse_whitespace(tactic)
        for step in self.applicable(goals, at):
            if step.key == key:
                return goals[:at] + step.after + goals[at + len(step.before) :]
        return None


class ReplayServer(LeanServer):
    """A ``LeanServer`` that replays the traced proofs of ``theorems`` (see the module doc).

    A proof starts from a theorem's first recorded state (``start_recorded``, or
    ``start_theorem`` with its file and name, or ``start_proof`` with that state's text). Each
    theorem replays only its own recorded steps. Nothing is checked by Lean: a proof found is
    ``replayed``, never ``proved``, and ``check`` and ``open_sorries`` raise
    ``LeanRequestError``.

    Args:
        theorems: The theorems whose traced proofs are replayed.
    """

    backend = "replay"
    checks_with_lean = False

    def __init__(self, theorems: Iterable[Theorem]) -> None:
        super().__init__()
        self._theorems: dict[tuple[str, str], list[Theorem]] = {}
        for theorem in theorems:
            self._theorems.setdefault((theorem.file_path, theorem.full_name), []).append(theorem)
        self._indexes: dict[int, StepIndex] = {}  # by id() of the theorem record
        self._by_first_state: dict[str, Theorem] | None = None
        self._states: dict[int, tuple[Theorem, StepIndex]] = {}  # live state id -> its proof
        self._ids = itertools.count()

    @classmethod
    def from_dataset(cls, path: str | os.PathLike) -> ReplayServer:
        """A replay of the theorems of a dataset.

        Args:
            path: A LeanDojo-format dataset (a directory or a split file).

        Returns:
            The server.

        Raises:
            DataFormatError: The dataset is malformed (read as the theorems are needed).
        """
        from leanloop.data.formats import open_dataset

        return cls(open_dataset(Path(path)).iter_theorems())

    @classmethod
    def from_database(
        cls, database: DynamicDatabase, repository: Repository | tuple[str, str] | None = None
    ) -> ReplayServer:
        """A replay of the theorems in a database.

        Args:
            database: The database.
            repository: Only this repository (a ``Repository`` or ``(url, commit)``).

        Returns:
            The server.
        """
        return cls(database.iter_theorems(repository))

    def __len__(self) -> int:
        return sum(len(found) for found in self._theorems.values())

    @property
    def generation(self) -> int:
        return 1

    def close(self) -> None:
        self._states.clear()

    # -- starting ----------------------------------------------------------------------------

    def start_recorded(self, theorem: Theorem) -> ProofState:
        """Start the recorded proof of a theorem.

        Args:
            theorem: A theorem record of the replayed data.

        Returns:
            The first recorded state of its proof.

        Raises:
            LeanRequestError: The theorem is not in the data, or has no traced tactics.
        """
        candidates = self._theorems.get((theorem.file_path, theorem.full_name), [])
        known = next((t for t in candidates if t.key == theorem.key), None)
        if known is None:
            raise LeanRequestError(
                f"{theorem.full_name} ({theorem.file_path}) is not in the replayed data"
            )
        return self._start(known)

    def start_theorem(self, theorem: TheoremSource) -> ProofState:
        candidates = self._theorems.get((theorem.file_path, theorem.full_name), [])
        if len(candidates) != 1:
            problem = "is not in" if not candidates else "is more than once in"
            raise LeanRequestError(
                f"{theorem.full_name} ({theorem.file_path}) {problem} the replayed data",
                hint="start it with start_recorded(theorem record)" if candidates else None,
            )
        return self._start(candidates[0])

    def start_proof(self, goal: str) -> ProofState:
        """Start the recorded proof whose first state is ``goal``.

        Args:
            goal: The first state as recorded (hypotheses and ``⊢``), or only the goal of a
                state without hypotheses.

        Returns:
            The proof's first state.

        Raises:
            LeanRequestError: No recorded proof starts from this state.
        """
        if self._by_first_state is None:
            self._by_first_state = {}
            for found in self._theorems.values():
                for recorded in found:
                    if recorded.traced_tactics:
                        first = recorded.traced_tactics[0].state_before.strip()
                        self._by_first_state.setdefault(first, recorded)
        text = goal.strip()
        theorem = self._by_first_state.get(text) or self._by_first_state.get(f"⊢ {text}")
        if theorem is None:
            raise LeanRequestError(
                "the replayed data has no recorded proof starting from this goal",
                hint="give a first state exactly as recorded, or start a theorem record",
            )
        return self._start(theorem)

    def _start(self, theorem: Theorem) -> ProofState:
        if not theorem.traced_tactics:
            raise LeanRequestError(
                f"{theorem.full_name} has no traced tactics to replay (a term-mode proof)"
            )
        index = self._indexes.get(id(theorem))
        if index is None:
            index = self._indexes[id(theorem)] = StepIndex(recorded_steps(theorem))
        goals = goals_of(theorem.traced_tactics[0].state_before)
        return self._state(goals, theorem, index)

    def _state(self, goals: tuple[str, ...], theorem: Theorem, index: StepIndex) -> ProofState:
        state = ProofState(next(self._ids), goals, self.generation, id(self))
        self._states[state.id] = (theorem, index)
        return state

    # -- replaying ---------------------------------------------------------------------------

    def run_tactic(
        self, state: ProofState, tactic: str, *, goal: int | None = None
    ) -> TacticResult:
        self._own(state)
        bound = self._states.get(state.id)
        if bound is None:
            raise LeanRequestError(f"proof state {state.id} was released")
        theorem, index = bound
        self.stats.requests += 1
        after = index.apply(state.goals, tactic, goal or 0)
        if after is None:
            self.stats.failures += 1
            return TacticFailed(
                f"not a recorded step: the traced proof of {theorem.full_name} has no step "
                f"{collapse_whitespace(tactic)!r} from this state (the replay only knows the "
                "recorded steps)"
            )
        if not after:
            return ProofFinished(next(self._ids))
        return self._state(after, theorem, index)

    def release(self, *states: ProofState) -> None:
        for state in states:
            if state.owner == id(self):
                self._states.pop(state.id, None)

    # -- no Lean here ------------------------------------------------------------------------

    def check(self, code: str) -> CheckResult:
        raise LeanRequestError(
            "the replay environment cannot check Lean code: it only replays recorded steps",
            hint="use a Lean server (REPL or Pantograph) to check whole proofs",
        )

    def open_sorries(self, code: str) -> list[ProofState]:
        raise LeanRequestError(
            "the replay environment cannot elaborate Lean code: it only replays recorded steps",
            hint="start a recorded theorem instead (start_recorded)",
        )
