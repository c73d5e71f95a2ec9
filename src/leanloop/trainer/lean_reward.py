"""A GRPO reward checked by Lean: each completion is run as a tactic on its prompt's proof state
through a Lean server (a pool of them checking a batch concurrently); closing the goal (a proof
under leanloop's one soundness policy: Lean accepts the goal proved by it as a declaration, and its
axioms pass the audit) beats changing it, which beats leaving it as it was or an error. A tactic
the screen refuses (``run_tac``, a declared axiom, ...) never reaches Lean."""

from __future__ import annotations

import textwrap
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
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

#: What a completion's check can end in (a field of ``LeanRewardStats`` each), and whether Lean
#: ran its tactic.
Outcome = tuple[str, bool]


@dataclass
class _Checker:
    """One Lean server of the reward's pool, with the states it recreated (a state belongs to
    the process that made it)."""

    make: Callable[[], LeanServer] | None
    server: LeanServer | None = None
    starts: dict[str, ProofState | None] = field(default_factory=dict)
    generation: int = -1

    def lean(self) -> LeanServer:
        if self.server is None:
            assert self.make is not None
            self.server = self.make()
        return self.server


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

    With ``servers=N`` (and ``server`` a function that makes one, e.g. a ``Launcher``) a batch's
    completions are checked by N Lean servers at once, each taking the next completion in the
    order of the states, so that a GRPO group's completions mostly meet a server that has
    already recreated their state.

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
        servers: Lean servers checking a batch's completions at once, each made by calling
            ``server`` (which must then be a function, e.g. a ``Launcher``), each with its own
            recreated states; a batch is shared among them in the order of its states.

    Raises:
        LeanloopError: ``servers`` is below 1, or above 1 with one server instance.
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
        servers: int = 1,
    ) -> None:
        if servers < 1:
            raise LeanloopError(f"LeanCheckedReward: servers={servers}; give at least 1")
        if servers > 1 and isinstance(server, LeanServer):
            raise LeanloopError(
                f"LeanCheckedReward: servers={servers} needs a function that makes a server "
                "(e.g. a Launcher), not one server instance",
                hint="pass the launcher (or a lambda that opens a server) instead",
            )
        if isinstance(server, LeanServer):
            self._checkers = [_Checker(None, server)]
        else:
            self._checkers = [_Checker(server) for _ in range(servers)]
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
        self._lock = threading.Lock()
        self.__name__ = "lean_checked_reward"

    @property
    def server(self) -> LeanServer:
        """The (first) Lean server (made on first use when a function was given)."""
        return self._checkers[0].lean()

    @property
    def servers(self) -> int:
        """How many Lean servers check completions at once."""
        return len(self._checkers)

    def _start(self, checker: _Checker, state: str) -> ProofState | None:
        server = checker.lean()
        if checker.generation != server.generation:
            checker.starts.clear()
            checker.generation = server.generation
        if state not in checker.starts:
            try:
                source = goal_to_source(
                    state, declaration=self.declaration, implicit=self.implicit_binders
                )
            except ValueError:
                checker.starts[state] = None
                return None
            code = f"{self.header}\n\n{source}" if self.header else source
            try:
                checker.starts[state] = server.open_sorries(code)[0]
            except LeanError:
                checker.starts[state] = None
            checker.generation = server.generation
        return checker.starts[state]

    def score(self, completion: Any, state: str) -> float | None:
        """The reward of one completion (checked on the first server).

        Args:
            completion: The completion as TRL gives it (text, or a list of chat messages).
            state: The proof state before the tactic.

        Returns:
            The reward for the outcome; None when the state cannot be recreated or the
            server failed.
        """
        return self._score(self._checkers[0], completion, state)

    def _score(self, checker: _Checker, completion: Any, state: str) -> float | None:
        outcome, ran = self._outcome(checker, completion, state)
        with self._lock:
            setattr(self.stats, outcome, getattr(self.stats, outcome) + 1)
            self.stats.checked += ran
        return self._rewards[outcome]

    @property
    def _rewards(self) -> dict[str, float | None]:
        values = self.values
        return {
            "closed": values["closed"],
            "progressed": values["progress"],
            "unchanged": values["unchanged"],
            "failed": values["failed"],
            "refused": values["failed"],
            "unparsable": values["unparsable"],
            "unavailable": None,
        }

    def _outcome(self, checker: _Checker, completion: Any, state: str) -> Outcome:
        """How the check of one completion ended, and whether Lean ran its tactic."""
        tactic = self.prompt_format.parse(completion_text(completion))
        if tactic is None:
            return "unparsable", False
        if forbidden_in_proof(tactic) is not None:  # never sent to Lean
            return "refused", False
        for attempt in range(2):
            start = self._start(checker, state)
            if start is None:
                return "unavailable", False
            try:
                result = checker.lean().run_tactic(start, tactic)
                break
            except RequestTimeout:
                return "failed", False
            except StaleStateError:
                # the process that made the state is gone: recreate the state once
                checker.starts.pop(state, None)
                if attempt:
                    return "unavailable", False
            except ServerError:
                return "unavailable", False
        assert start is not None  # the loop ends early without a state
        if isinstance(result, ProofFinished):
            judgement = self._judge(checker.lean(), state, tactic)
            if judgement is None:
                return "unavailable", True
            return ("closed" if judgement.accepted else "refused"), True
        if isinstance(result, TacticFailed):
            return "failed", True
        if result.goals == start.goals:
            return "unchanged", True
        return "progressed", True

    def _judge(self, server: LeanServer, state: str, tactic: str) -> Judgement | None:
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
            judgement, _ = check_declaration(server, audited, self.policy)
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
        if len(self._checkers) == 1 or len(completions) < 2:
            return [self.score(c, s) for c, s in zip(completions, states, strict=True)]
        return self._concurrently(completions, states)

    def _concurrently(self, completions: Sequence[Any], states: Sequence[str]) -> list:
        """The batch shared among the servers: each takes the next completion in the order of
        the states (so that one server meets a state's completions in a row), until none is
        left."""
        order = iter(sorted(range(len(completions)), key=lambda i: str(states[i])))
        rewards: list[float | None] = [None] * len(completions)
        taking = threading.Lock()

        def work(checker: _Checker) -> None:
            while True:
                with taking:
                    index = next(order, None)
                if index is None:
                    return
                rewards[index] = self._score(checker, completions[index], states[index])

        workers = self._checkers[: len(completions)]
        with ThreadPoolExecutor(len(workers), thread_name_prefix="lean-reward") as pool:
            for done in [pool.submit(work, checker) for checker in workers]:
                done.result()
        return rewards

    def close(self) -> None:
        """Close the Lean servers that were made."""
        for checker in self._checkers:
            if checker.server is not None:
                checker.server.close()
