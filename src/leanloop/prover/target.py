"""What a prover is asked to prove — a goal (``GoalTarget``), a theorem's source
(``SourceTarget``) or a theorem record found under a project root (``TheoremTarget``) — how a
proof of it starts on a server, and its proofs as Lean code to judge (``AuditedCode``: the
declaration, then its axioms printed at top level)."""

from __future__ import annotations

import os
import textwrap
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Protocol, runtime_checkable

from leanloop.data.records import Theorem
from leanloop.errors import LeanloopError
from leanloop.lean.audit import AuditedCode, declared_name
from leanloop.lean.lexer import escape_name
from leanloop.lean.scanner import scan
from leanloop.lean.server import LeanServer, ProofState, TheoremSource

#: The name a goal is stated under when its proof is checked.
GOAL_NAME = "leanloop_goal"


@runtime_checkable
class RecordedStarts(Protocol):
    """A server that can start a theorem record from its recorded first state (a replay)."""

    def start_recorded(self, theorem: Theorem) -> ProofState: ...


def proof_block(proof: str) -> str:
    """A proof body (the tactics after ``by``) indented as the block of a declaration."""
    return textwrap.indent(textwrap.dedent(proof).strip("\n"), "  ")


class Target(ABC):
    """One thing to prove: a ``GoalTarget``, a ``SourceTarget`` or a ``TheoremTarget``
    (``Target.of`` picks the kind from what it is given)."""

    @staticmethod
    def of(
        goal: str | None = None,
        theorem: Theorem | TheoremSource | Target | None = None,
        project_root: str | os.PathLike[str] | None = None,
    ) -> Target:
        """The target of ``search(server, goal=..., theorem=...)``: a goal, or a theorem (a
        record is looked up under ``project_root`` when it is started on a Lean server)."""
        if (goal is None) == (theorem is None):
            raise LeanloopError(
                "give either a goal or a theorem to prove",
                hint="search(server, goal='∀ p q : Prop, p ∧ q → q ∧ p') or "
                "search(server, theorem=...)",
            )
        if goal is not None:
            if not isinstance(goal, str) or not goal.strip():
                raise LeanloopError(f"goal {goal!r}: expected the statement to prove, as text")
            return GoalTarget(goal.strip())
        if isinstance(theorem, Target):
            return theorem
        if isinstance(theorem, TheoremSource):
            return SourceTarget(theorem)
        if isinstance(theorem, Theorem):
            root = Path(project_root).expanduser() if project_root is not None else None
            return TheoremTarget(theorem, root)
        raise LeanloopError(
            f"theorem of type {type(theorem).__name__}: expected a Theorem record or a "
            "TheoremSource"
        )

    @property
    @abstractmethod
    def label(self) -> str:
        """The theorem's full name, or the goal."""

    @abstractmethod
    def start(self, server: LeanServer) -> ProofState:
        """The first state of a proof of the target on ``server``."""

    @abstractmethod
    def statement(self) -> str:
        """The theorem as a model is shown it for a whole proof, ending with ``:= by``."""

    @abstractmethod
    def audited(self, proof: str) -> AuditedCode | None:
        """Lean code stating the target with ``proof`` (the body of its ``by`` block), followed
        by the audit of its axioms; None when the target's source is unknown."""

    def audited_tactics(self, tactics: Sequence[str]) -> AuditedCode | None:
        """``audited`` of a proof given as tactics, one after the other."""
        return self.audited("\n".join(tactics))

    @property
    def source(self) -> TheoremSource | None:
        """The theorem's source when it is known without reading anything, else None."""
        return None


@dataclass(frozen=True)
class GoalTarget(Target):
    """A proposition to prove, stated as a theorem of its own."""

    goal: str

    @property
    def label(self) -> str:
        return self.goal

    def start(self, server: LeanServer) -> ProofState:
        return server.start_proof(self.goal)

    def statement(self) -> str:
        return f"example : {self.goal} := by"

    def audited(self, proof: str) -> AuditedCode:
        code = f"theorem {GOAL_NAME} : {self.goal} := by\n{proof_block(proof)}"
        return AuditedCode.around(code, 0, len(code), GOAL_NAME)


@dataclass(frozen=True)
class SourceTarget(Target):
    """A theorem given by its source: the file's text before it, its signature and context."""

    theorem_source: TheoremSource

    @property
    def label(self) -> str:
        return self.theorem_source.full_name

    @property
    def source(self) -> TheoremSource:
        return self.theorem_source

    def start(self, server: LeanServer) -> ProofState:
        return server.start_theorem(self.theorem_source)

    def statement(self) -> str:
        return source_statement(self.theorem_source)

    def audited(self, proof: str) -> AuditedCode:
        return source_code(self.theorem_source, proof)


@dataclass(frozen=True)
class TheoremTarget(Target):
    """A theorem record: started from its recorded first state on a replay server, from its
    file under ``project_root`` (the Lean project at the theorem's commit) on a Lean server."""

    theorem: Theorem
    project_root: Path | None = None

    @property
    def label(self) -> str:
        return self.theorem.full_name

    def start(self, server: LeanServer) -> ProofState:
        if isinstance(server, RecordedStarts):
            return server.start_recorded(self.theorem)
        return server.start_theorem(self.theorem_source)

    @cached_property
    def theorem_source(self) -> TheoremSource:
        """The theorem's source, read from its file under ``project_root``."""
        return theorem_source(self.theorem, self.project_root)

    @property
    def source(self) -> TheoremSource | None:
        return self.theorem_source if self.project_root is not None else None

    def statement(self) -> str:
        source = self.source
        if source is not None:
            return source_statement(source)
        if self.theorem.statement:
            return f"{self.theorem.statement.rstrip()} := by"
        if self.theorem.traced_tactics:
            return self.theorem.traced_tactics[0].state_before
        raise LeanloopError(
            f"{self.theorem.full_name}: neither its statement nor a recorded state is known",
            hint="give the Lean project it comes from (project_root) or a TheoremSource",
        )

    def audited(self, proof: str) -> AuditedCode | None:
        source = self.source
        return source_code(source, proof) if source is not None else None


def source_statement(source: TheoremSource) -> str:
    return f"{source.local_context}theorem {escape_name(source.full_name)} {source.signature} := by"


def source_code(source: TheoremSource, proof: str) -> AuditedCode:
    """The theorem restated under its own name in its file's context, proved by ``proof``."""
    kind = "theorem" if source.kind in ("theorem", "lemma", "example") else source.kind
    modifiers = "".join(f"{m} " for m in source.modifiers)
    name = escape_name(source.name or source.full_name.rsplit(".", 1)[-1])
    declaration = (
        f"{source.local_context}{modifiers}{kind} {name} {source.signature} := by\n"
        f"{proof_block(proof)}"
    )
    prefix = source.prefix.rstrip()
    text = f"{prefix}\n\n{declaration}" if prefix else declaration
    start = len(text) - len(declaration)
    declared = declared_name(source.full_name, name, source.modifiers)
    return AuditedCode.around(text, start, len(text), source.full_name, source.scopes, declared)


def theorem_source(theorem: Theorem, project_root: Path | None) -> TheoremSource:
    """A theorem record's ``TheoremSource``: its file under ``project_root`` scanned for its
    declaration (by full name, else by where the theorem starts)."""
    if project_root is None:
        raise LeanloopError(
            f"{theorem.full_name}: starting it on a Lean server needs its source file",
            hint=f"give the project root (the Lean project {theorem.url} checked out at "
            f"{theorem.commit[:12]}) or a TheoremSource; without Lean, use the replay server",
        )
    path = project_root / theorem.file_path
    try:
        # as Lean is shown it: LF line ends (read so), no byte order mark
        text = path.read_text(encoding="utf-8").removeprefix("\ufeff")
    except FileNotFoundError:
        raise LeanloopError(
            f"{theorem.full_name}: its file {theorem.file_path} is not in {project_root}",
            hint=f"give the root of the Lean project {theorem.url} at commit {theorem.commit[:12]}",
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise LeanloopError(f"{path}: cannot read the theorem's source file ({exc})") from None
    scanned = scan(text)
    declaration = scanned.by_name.get(theorem.full_name)
    if declaration is None:
        # LeanDojo's start is the declaration's first line (1-based) and column (1-based)
        declaration = scanned.enclosing(theorem.start.line, max(theorem.start.column - 1, 0))
    if declaration is None or declaration.full_name is None:
        raise LeanloopError(
            f"{path}: no declaration {theorem.full_name} (nor one at line {theorem.start.line})",
            hint=f"check that the project is at the commit the theorem was traced from "
            f"({theorem.commit[:12]})",
        )
    return TheoremSource.from_scan(scanned, declaration, theorem.file_path)
