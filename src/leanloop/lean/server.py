"""The one interface for interactive proving, shaped like an environment: start a proof (from a
goal or a theorem), run a tactic on a state, check a whole piece of code, release states, close.
Backends (Lean REPL, Pantograph) implement it; nothing above this layer sees raw protocol data."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

from leanloop.lean.errors import StaleStateError
from leanloop.lean.scanner import Declaration, SourceScan
from leanloop.lean.verdict import Verdict, verdict_of

NO_GOALS = "no goals"


@dataclass(frozen=True)
class LeanMessage:
    """A message Lean printed: severity, where (1-based line, 0-based column) and the text."""

    severity: str
    text: str
    line: int | None = None
    column: int | None = None
    end_line: int | None = None
    end_column: int | None = None

    @property
    def data(self) -> str:  # the field name Lean uses
        return self.text

    def __str__(self) -> str:
        where = f"{self.line}:{self.column}: " if self.line is not None else ""
        return f"{where}{self.severity}: {self.text}"


@dataclass(frozen=True)
class ProofState:
    """Open goals of a proof in progress, each pretty-printed as Lean shows it."""

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
    """The tactic closed every goal and Lean raised no error (no ``sorry`` either)."""

    state_id: int
    messages: tuple[LeanMessage, ...] = ()


@dataclass(frozen=True)
class TacticFailed:
    """Lean rejected the tactic; ``error`` is its main message."""

    error: str
    messages: tuple[LeanMessage, ...] = ()


TacticResult = ProofState | ProofFinished | TacticFailed


@dataclass(frozen=True)
class CheckResult:
    """Lean's answer on a whole piece of code."""

    verdict: Verdict
    messages: tuple[LeanMessage, ...] = ()
    sorry_goals: tuple[str, ...] = ()
    #: the line of each sorry of ``sorry_goals`` (None where the server gave none)
    sorry_lines: tuple[int | None, ...] = ()

    @property
    def accepted(self) -> bool:
        """Whether Lean accepted the code as a whole (no error, no sorry anywhere in it)."""
        return self.verdict is Verdict.ACCEPTED

    @classmethod
    def from_messages(
        cls,
        messages: Sequence[LeanMessage],
        sorry_goals: Sequence[str] = (),
        sorry_lines: Sequence[int | None] = (),
    ) -> CheckResult:
        verdict = verdict_of(messages, sorries=len(sorry_goals))
        lines = tuple(sorry_lines) or (None,) * len(sorry_goals)
        return cls(verdict, tuple(messages), tuple(sorry_goals), lines)

    @property
    def errors(self) -> list[LeanMessage]:
        return [m for m in self.messages if m.severity == "error"]


@dataclass(frozen=True)
class TheoremSource:
    """Where a theorem is, for starting a proof of it: its file's text and the declaration.

    ``prefix`` is the source before the declaration (imports, namespaces, earlier declarations);
    ``signature`` is what follows the theorem's name up to ``:=`` (its binders and type).
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
        """The theorem restated as an ``example`` whose proof is ``sorry``."""
        return f"{self.local_context}example {self.signature} := by sorry"


@dataclass
class ServerStats:
    requests: int = 0
    failures: int = 0
    restarts: int = 0


class LeanServer(ABC):
    """A Lean server for interactive proving (see the module docstring)."""

    #: Short name of the backend ("repl", "pantograph").
    backend: str = ""
    #: Whether Lean itself answers: False for a server that replays recorded data, whose
    #: finished proofs are "replayed", never "proved".
    checks_with_lean: bool = True

    def __init__(self) -> None:
        self.stats = ServerStats()

    @abstractmethod
    def start_proof(self, goal: str) -> ProofState:
        """A proof of the proposition ``goal`` (a Lean expression of type ``Prop``)."""

    @abstractmethod
    def start_theorem(self, theorem: TheoremSource) -> ProofState:
        """A proof of an existing theorem, in the context of its file."""

    @abstractmethod
    def open_sorries(self, code: str) -> list[ProofState]:
        """Elaborate ``code`` and give the proof state standing at its ``sorry``s."""

    @abstractmethod
    def run_tactic(
        self, state: ProofState, tactic: str, *, goal: int | None = None
    ) -> TacticResult:
        """Run ``tactic`` on ``state`` (on its ``goal``-th goal only, when given)."""

    @abstractmethod
    def check(self, code: str) -> CheckResult:
        """Elaborate a whole piece of Lean code (with its imports) and give Lean's verdict."""

    def release(self, *states: ProofState) -> None:  # noqa: B027 - a no-op is a valid default
        """Tell the server these states are no longer needed."""

    @property
    @abstractmethod
    def generation(self) -> int:
        """Which process of the server is current (changes on every restart)."""

    @abstractmethod
    def close(self) -> None: ...

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
