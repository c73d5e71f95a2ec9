"""A GRPO reward checked by Lean: each completion is run as a tactic on its prompt's proof state
through a Lean server; closing the goal (a proof under leanloop's one soundness policy: Lean
accepts the goal proved by it as a declaration, and its axioms pass the audit) beats changing
it, which beats leaving it as it was or an error. A tactic the screen refuses (``run_tac``, a
declared axiom, ...) never reaches Lean."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from leanloop.data.prompt import PromptFormat
from leanloop.errors import LeanloopError
from leanloop.lean.audit import AuditedCode, Judgement, check_declaration
from leanloop.lean.axioms import AxiomPolicy
from leanloop.lean.errors import LeanError, RequestTimeout, ServerError, StaleStateError
from leanloop.lean.goals import goal_to_source
from leanloop.lean.screen import forbidden_in_proof
from leanloop.lean.server import LeanServer, ProofFinished, ProofState, TacticFailed
from leanloop.trainer.rewards import completion_text
from leanloop.words import plural


@dataclass
class LeanRewardStats:
    checked: int = 0
    closed: int = 0
    progressed: int = 0
    unchanged: int = 0
    failed: int = 0
    unparsable: int = 0
    unavailable: int = 0  # the state could not be recreated, or the server failed
    refused: int = 0  # screened out, or closing the goal only with axioms the audit refuses


#: The name a closed goal is stated under when the reward has Lean judge it.
REWARD_NAME = "leanloop_reward"


class LeanCheckedReward:
    """``reward(completions, state=[...], **columns)`` for TRL's GRPO trainer.

    The state before (the ``state`` column) is recreated in Lean as a statement proved by
    ``sorry`` (``declaration`` and the ``header`` of imports set how), each completion's tactic is
    run on it, and the reward is ``closed`` if the goal is closed and the goal proved by the
    tactic passes the soundness policy (Lean accepts it as a theorem of its own, and its axioms
    pass ``policy``, by default the standard allow-list: no ``sorryAx``, no native code),
    ``progress`` if Lean accepted the tactic and the goals changed, ``unchanged`` if Lean
    accepted it but the goals are the ones it started from (``skip``, ``trace ...``), ``failed``
    if Lean rejected it (or it timed out), the screen refused it, or the audit refused its
    proof, ``unparsable`` if the completion holds no tactic. A state Lean cannot recreate, or a
    server failure, gives ``None`` (TRL leaves such entries out) rather than blaming the
    completion.

    Args:
        server: A Lean server, or a function that makes one on first use (in the process
            that uses it).
        header: The imports (and ``open``s) the states are recreated under.
        declaration: The declaration's head the state is stated with (``example``, or
            e.g. ``theorem t``).
        implicit_binders: Bind the state's hypotheses implicitly (``{x : T}``).
        closed: The reward of a tactic that closes the goal soundly.
        progress: The reward of a tactic Lean accepts that changes the goals.
        unchanged: The reward of a tactic that leaves the goals as they were.
        failed: The reward of a tactic Lean rejects (or the screen or audit refuses).
        unparsable: The reward of a completion holding no tactic.
        state_column: The dataset column holding the state before.
        prompt_format: How a completion is read as a tactic (default: the default format).
        policy: The axioms a closing proof may use (default: the standard allow-list).
    """

    def __init__(
        self,
        server: LeanServer | Callable[[], LeanServer],
        *,
        header: str = "",
        declaration: str = "example",
        implicit_binders: bool = False,
        closed: float = 1.0,
        progress: float = 0.5,
        unchanged: float = 0.0,
        failed: float = 0.0,
        unparsable: float = 0.0,
        state_column: str = "state",
        prompt_format: PromptFormat | None = None,
        policy: AxiomPolicy | None = None,
    ) -> None:
        self._server = server if isinstance(server, LeanServer) else None
        self._factory = None if isinstance(server, LeanServer) else server
        self.header = header.strip()
        self.declaration = declaration
        self.implicit_binders = implicit_binders
        self.values = {
            "closed": closed,
            "progress": progress,
            "unchanged": unchanged,
            "failed": failed,
            "unparsable": unparsable,
        }
        self.state_column = state_column
        self.prompt_format = prompt_format or PromptFormat()
        self.policy = policy or AxiomPolicy()
        self.stats = LeanRewardStats()
        self._starts: dict[str, ProofState | None] = {}
        self._generation = -1
        self.__name__ = "lean_checked_reward"

    @property
    def server(self) -> LeanServer:
        """The Lean server (made on first use when a function was given)."""
        if self._server is None:
            assert self._factory is not None
            self._server = self._factory()
        return self._server

    def _start(self, state: str) -> ProofState | None:
        server = self.server
        if self._generation != server.generation:
            self._starts.clear()
            self._generation = server.generation
        if state not in self._starts:
            try:
                source = goal_to_source(
                    state, declaration=self.declaration, implicit=self.implicit_binders
                )
            except ValueError:
                self._starts[state] = None
                return None
            code = f"{self.header}\n\n{source}" if self.header else source
            try:
                self._starts[state] = server.open_sorries(code)[0]
            except LeanError:
                self._starts[state] = None
            self._generation = server.generation
        return self._starts[state]

    def score(self, completion: Any, state: str) -> float | None:
        """The reward of one completion.

        Args:
            completion: The completion as TRL gives it (text, or a list of chat messages).
            state: The proof state before the tactic.

        Returns:
            The reward for the outcome; None when the state cannot be recreated or the
            server failed.
        """
        tactic = self.prompt_format.parse(completion_text(completion))
        if tactic is None:
            self.stats.unparsable += 1
            return self.values["unparsable"]
        if forbidden_in_proof(tactic) is not None:  # never sent to Lean
            self.stats.refused += 1
            return self.values["failed"]
        for attempt in range(2):
            start = self._start(state)
            if start is None:
                self.stats.unavailable += 1
                return None
            try:
                result = self.server.run_tactic(start, tactic)
                break
            except RequestTimeout:
                self.stats.failed += 1
                return self.values["failed"]
            except StaleStateError:
                # the process that made the state is gone: recreate the state once
                self._starts.pop(state, None)
                if attempt:
                    self.stats.unavailable += 1
                    return None
            except ServerError:
                self.stats.unavailable += 1
                return None
        self.stats.checked += 1
        assert start is not None  # the loop ends early without a state
        if isinstance(result, ProofFinished):
            judgement = self._judge(state, tactic)
            if judgement is None:
                self.stats.unavailable += 1
                return None
            if not judgement.accepted:
                self.stats.refused += 1
                return self.values["failed"]
            self.stats.closed += 1
            return self.values["closed"]
        if isinstance(result, TacticFailed):
            self.stats.failed += 1
            return self.values["failed"]
        if result.goals == start.goals:
            self.stats.unchanged += 1
            return self.values["unchanged"]
        self.stats.progressed += 1
        return self.values["progress"]

    def _judge(self, state: str, tactic: str) -> Judgement | None:
        """Lean's judgement on the goal of ``state`` proved by ``tactic``, stated as a theorem
        of its own with its axioms audited (None when it cannot be asked)."""
        block = textwrap.indent(tactic.strip("\n"), "  ")
        try:
            source = goal_to_source(
                state,
                declaration=f"theorem {REWARD_NAME}",
                implicit=self.implicit_binders,
                proof=f"by\n{block}",
            )
        except ValueError:
            return None
        code = f"{self.header}\n\n{source}" if self.header else source
        audited = AuditedCode.around(code, len(code) - len(source), len(code), REWARD_NAME)
        try:
            judgement, _ = check_declaration(self.server, audited, self.policy)
        except LeanError:
            return None
        return judgement

    def __call__(self, completions: Sequence[Any], **columns: Any) -> list[float | None]:
        """The rewards of a batch of completions, as TRL calls a reward function.

        Args:
            completions: The completions.
            **columns: The dataset's columns for them; ``state_column`` must be one.

        Returns:
            One reward (or None) per completion.

        Raises:
            LeanloopError: The state column is missing or its length differs.
        """
        states = columns.get(self.state_column)
        if states is None:
            raise LeanloopError(
                f"the Lean-checked reward needs the '{self.state_column}' column (the state "
                "before the step) in the dataset",
                hint="GRPOTrainer's datasets carry it; for your own data add the column",
            )
        if len(states) != len(completions):
            raise LeanloopError(
                f"{plural(len(completions), 'completion')} but {plural(len(states), 'state')} "
                "for the Lean reward"
            )
        return [self.score(c, s) for c, s in zip(completions, states, strict=True)]

    def close(self) -> None:
        """Close the Lean server, if one was made."""
        if self._server is not None:
            self._server.close()
