"""The one interface for interactive proving, shaped like an environment: start a proof (from a
goal or a theorem), run a tactic on a state, check a whole piece of code, release states, close.
Backends (Lean REPL, Pantograph) implement it; nothing above this layer sees raw protocol data."""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass

from leanloop.lean.elaboration import CheckResult, LeanMessage, SorrySite, TacticStep
from leanloop.lean.errors import StaleStateError
from leanloop.lean.scanner import Declaration, SourceScan

__all__ = [
    "NO_GOALS",
    "CheckResult",
    "LeanMessage",
    "LeanServer",
    "ProofFinished",
    "ProofState",
    "ServerStats",
    "SorrySite",
    "TacticFailed",
    "TacticResult",
    "TacticStep",
    "TheoremSource",
]

NO_GOALS = "no goals"


@dataclass(frozen=True)
class ProofState:
    """Open goals of a proof in progress, each pretty-printed as Lean shows it.

    A state belongs to the server process that made it: given to another server, or to the
    same server after its process restarted, it raises ``StaleStateError``.

    Attributes:
        id: The server's number for the state.
        goals: The open goals.
        generation: Which process of the server made it.
        owner: Which server made it.
        messages: What Lean printed on the way (warnings, infos).
    """

    id: int
    goals: tuple[str, ...]
    generation: int = 0  # which process of the server made it
    owner: int = 0  # id of the server that made it
    messages: tuple[LeanMessage, ...] = ()

    @property
    def pretty(self) -> str:
        """The state as LeanDojo writes it: goals separated by blank lines, or 'no goals'."""
        return "\n\n".join(self.goals) if self.goals else NO_GOALS


@dataclass(frozen=True)
class ProofFinished:
    """The tactic closed every goal and Lean raised no error (no ``sorry`` either).

    Attributes:
        state_id: The server's number for the finished state.
        messages: What Lean printed on the way.
    """

    state_id: int
    messages: tuple[LeanMessage, ...] = ()


@dataclass(frozen=True)
class TacticFailed:
    """Lean rejected the tactic; ``error`` is its main message.

    Attributes:
        error: Lean's first error (or why the step does not count, e.g. a ``sorry`` left).
        messages: Everything Lean printed.
    """

    error: str
    messages: tuple[LeanMessage, ...] = ()


TacticResult = ProofState | ProofFinished | TacticFailed


@dataclass(frozen=True)
class TheoremSource:
    """Where a theorem is, for starting a proof of it: its file's text and the declaration.

    ``prefix`` is the source before the declaration (imports, namespaces, earlier declarations);
    ``signature`` is what follows the theorem's name up to ``:=`` (its binders and type).

    Attributes:
        full_name: The theorem's full name.
        file_path: Its file, relative to the project.
        prefix: The source before the declaration.
        signature: Its binders and type.
        module: Its module (``Mathlib.Logic.Basic``), when known.
    """

    full_name: str
    file_path: str
    prefix: str
    signature: str
    module: str | None = None
    local_context: str = ""  # 'set_option ... in' lines that apply to the theorem
    kind: str = "theorem"  # the declaration keyword (theorem, lemma, def, ...)
    modifiers: tuple[str, ...] = ()  # private, noncomputable, ...
    name: str | None = None  # as declared, relative to the namespaces open around it
    #: the namespaces and sections open around the declaration (see ``Declaration.scopes``)
    scopes: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_scan(cls, scanned: SourceScan, declaration: Declaration, file_path: str):
        """The source of a declaration that ``lean.scanner`` found.

        Args:
            scanned: The scanned file.
            declaration: The declaration in it.
            file_path: The file's path, relative to the project.

        Returns:
            TheoremSource: Where the declaration is and what precedes it.

        Raises:
            ValueError: The declaration has no name.
        """
        if declaration.full_name is None:
            raise ValueError("an unnamed declaration cannot be started by name")
        module = file_path.removesuffix(".lean").replace("/", ".")
        return cls(
            full_name=declaration.full_name,
            file_path=file_path,
            prefix=scanned.prefix_before(declaration),
            signature=declaration.signature,
            module=module,
            local_context=declaration.local_context,
            kind=declaration.kind,
            modifiers=declaration.modifiers,
            name=declaration.name,
            scopes=declaration.scopes,
        )

    def example(self) -> str:
        """The theorem restated as an ``example`` whose proof is ``sorry``.

        Returns:
            The ``example`` (with the theorem's local ``set_option ... in`` lines).
        """
        return f"{self.local_context}example {self.signature} := by sorry"


@dataclass
class ServerStats:
    requests: int = 0
    failures: int = 0
    restarts: int = 0


class LeanServer(ABC):
    """A Lean server for interactive proving, shaped like an environment: start a proof (from
    a goal or a theorem), run a tactic on a state, check a whole piece of code, release states,
    close (also at the end of a ``with`` block).

    Lean's own refusals are values (``TacticFailed``, a ``CheckResult`` that is not accepted).
    A request that fails for another reason raises a ``ServerError`` (a timeout, a crash, an
    answer that is not the protocol's, memory over the limit): the process is stopped and the
    next request starts a fresh one, whose states are new (older ones raise
    ``StaleStateError``). A request the backend's protocol cannot make (``features`` says what
    it can) raises ``Unsupported`` before anything is sent. Backends, by name in
    ``leanloop.lean.backends``: ``ReplServer`` (the Lean REPL), ``PantographServer``, and
    ``ReplayServer`` (recorded transitions, no Lean).
    """

    #: Short name of the backend ("repl", "pantograph").
    backend: str = ""
    #: Whether Lean itself answers: False for a server that replays recorded data, whose
    #: finished proofs are "replayed", never "proved".
    checks_with_lean: bool = True
    #: What ``elaborate`` can give beyond messages and sorries (``leanloop.lean.backends``
    #: names them: ``tactics``, ``account``, ``elaborators``, ``infotree``).
    features: frozenset[str] = frozenset()

    def __init__(self) -> None:
        self.stats = ServerStats()

    @abstractmethod
    def start_proof(self, goal: str) -> ProofState:
        """Start a proof of a proposition.

        Args:
            goal: A Lean expression of type ``Prop``, e.g. ``∀ n : Nat, n + 0 = n``.

        Returns:
            The proof's first state.

        Raises:
            LeanRequestError: Lean cannot elaborate the goal.
            ServerError: The server failed (it restarts on the next request).
        """

    @abstractmethod
    def start_theorem(self, theorem: TheoremSource) -> ProofState:
        """Start a proof of an existing theorem, in the context of its file.

        Args:
            theorem: Where the theorem is: the source before it and its signature.

        Returns:
            The proof's first state (the theorem's statement as the goal).

        Raises:
            LeanRequestError: The file up to the theorem, or its statement, does not
                elaborate.
            ServerError: The server failed.
        """

    @abstractmethod
    def open_sorries(self, code: str) -> list[ProofState]:
        """Elaborate code and give the proof state standing at each of its ``sorry``s.

        Args:
            code: Lean code with its imports, and at least one ``sorry``.

        Returns:
            One state per ``sorry``, in order.

        Raises:
            LeanRequestError: The code does not elaborate, or has no ``sorry``.
            ServerError: The server failed.
        """

    @abstractmethod
    def run_tactic(
        self, state: ProofState, tactic: str, *, goal: int | None = None
    ) -> TacticResult:
        """Run a tactic on a state.

        Args:
            state: A state this server made (since its last restart).
            tactic: The tactic (several lines allowed).
            goal: Run it on this goal of the state only (0-based); None for the first goal
                as Lean runs it.

        Returns:
            TacticResult: ``ProofState`` with the goals left, ``ProofFinished`` when none
            are (and no ``sorry`` or error), or ``TacticFailed`` with Lean's error.

        Raises:
            StaleStateError: ``state`` belongs to another server or an older process.
            ServerError: The server failed.
        """

    @abstractmethod
    def check(self, code: str) -> CheckResult:
        """Elaborate a whole piece of Lean code and give Lean's verdict.

        Args:
            code: Lean code with its imports.

        Returns:
            Lean's verdict on the code as a whole, with its messages and the goal at each
            ``sorry``.

        Raises:
            ServerError: The server failed.
        """

    def elaborate(
        self,
        code: str,
        *,
        all_tactics: bool = False,
        account: bool = False,
        infotree: str | None = None,
    ) -> CheckResult:
        """Elaborate code and give everything Lean reported on it.

        Args:
            code: Lean code with its imports.
            all_tactics: Also report every tactic with the goals before it (for tracing).
            account: Also report Lean's account of the commands it elaborated (where the
                backend gives none, ``commands`` is None: such an answer proves nothing).
            infotree: Also give Lean's infotree of this kind (``full``, ``tactics``,
                ``original``, ``substantive``), as the server sent it.

        Returns:
            Lean's messages and sorries, and what was asked for; positions refer to ``code``.

        Raises:
            Unsupported: The backend cannot give what was asked for (see ``features``).
            LeanRequestError: The server refused the code (e.g. imports that do not elaborate).
            ServerError: The server failed.
        """
        wanted = {"tactics": all_tactics, "infotree": infotree is not None}
        self.require(*(feature for feature, asked in wanted.items() if asked))
        return self.check(code)

    def require(self, *features: str) -> None:
        """Refuse, before anything is sent, what this backend cannot do.

        Args:
            *features: What the caller needs (see ``features``).

        Raises:
            Unsupported: A feature the backend lacks, named with what the backends offer.
        """
        missing = [f for f in features if f not in self.features]
        if missing:
            from leanloop.lean.backends import unsupported

            raise unsupported(self.backend or type(self).__name__, missing[0])

    def load_imports(self, header: str) -> None:  # noqa: B027 - a no-op is a valid default
        """Elaborate the imports of the code to come now, under the server's own time limit,
        so that a ``time_limit`` on the check that follows does not cut them short (a REPL
        keeps them for every later code with the same imports).

        Args:
            header: The code's imports (``import`` lines and what comes with them).

        Raises:
            LeanRequestError: The imports do not elaborate.
            ServerError: The server failed.
        """

    @contextlib.contextmanager
    def time_limit(self, seconds: float) -> Iterator[None]:
        """Bound each request to ``seconds`` (at most the server's own limit) inside the block.

        Args:
            seconds: The limit.

        Yields:
            Nothing: the block runs under the limit, which is lifted after it.
        """
        yield

    def release(self, *states: ProofState) -> None:  # noqa: B027 - a no-op is a valid default
        """Tell the server these states are no longer needed (it may free them).

        Args:
            *states: The states.
        """

    @property
    @abstractmethod
    def generation(self) -> int:
        """Which process of the server is current (changes on every restart)."""

    @abstractmethod
    def close(self) -> None:
        """Stop the server's process, if one is running."""

    def __enter__(self) -> LeanServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _own(self, state: ProofState) -> None:
        """Refuse states of another server, or of a process that has since been restarted."""
        if state.owner != id(self) or state.generation != self.generation:
            raise StaleStateError(
                f"proof state {state.id} belongs to a Lean server process that is gone "
                "(restarted or closed)",
                hint="start the proof again",
            )
