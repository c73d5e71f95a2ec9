"""What a prover is asked to prove and how a proof of it starts on a server: a goal, a theorem's
source (``TheoremSource``), or a theorem record (its recorded first state on a replay server, its
source file under a project root on a Lean server); and its proofs as Lean code to check."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Protocol, runtime_checkable

from leanloop.data.records import Theorem
from leanloop.errors import LeanloopError
from leanloop.lean.scanner import scan
from leanloop.lean.server import LeanServer, ProofState, TheoremSource


@runtime_checkable
class RecordedStarts(Protocol):
    """A server that can start a theorem record from its recorded first state (a replay)."""

    def start_recorded(self, theorem: Theorem) -> ProofState: ...


@dataclass(frozen=True)
class Target:
    """One thing to prove: exactly one of ``goal``, ``source`` and ``theorem``. A theorem record
    started on a Lean server needs ``project_root``, the Lean project it comes from (checked out
    at its commit), where its file is read and scanned."""

    goal: str | None = None
    source: TheoremSource | None = None
    theorem: Theorem | None = None
    project_root: Path | None = None

    @classmethod
    def of(
        cls,
        goal: str | None = None,
        theorem: Theorem | TheoremSource | None = None,
        project_root: str | Path | None = None,
    ) -> Target:
        """The target of ``search(server, goal=..., theorem=...)``: a goal, or a theorem."""
        if (goal is None) == (theorem is None):
            raise LeanloopError(
                "give either a goal or a theorem to prove",
                hint="search(server, goal='∀ p q : Prop, p ∧ q → q ∧ p') or "
                "search(server, theorem=...)",
            )
        root = Path(project_root).expanduser() if project_root is not None else None
        if goal is not None:
            if not isinstance(goal, str) or not goal.strip():
                raise LeanloopError(f"goal {goal!r}: expected the statement to prove, as text")
            return cls(goal=goal.strip(), project_root=root)
        if isinstance(theorem, TheoremSource):
            return cls(source=theorem, project_root=root)
        if isinstance(theorem, Theorem):
            return cls(theorem=theorem, project_root=root)
        raise LeanloopError(
            f"theorem of type {type(theorem).__name__}: expected a Theorem record or a "
            "TheoremSource"
        )

    @property
    def label(self) -> str:
        if self.goal is not None:
            return self.goal
        if self.source is not None:
            return self.source.full_name
        assert self.theorem is not None
        return self.theorem.full_name

    # -- starting ----------------------------------------------------------------------------

    def start(self, server: LeanServer) -> ProofState:
        """The first state of a proof of the target on ``server``."""
        if self.goal is not None:
            return server.start_proof(self.goal)
        if self.theorem is not None and isinstance(server, RecordedStarts):
            return server.start_recorded(self.theorem)
        return server.start_theorem(self.theorem_source)

    @cached_property
    def theorem_source(self) -> TheoremSource:
        """The theorem's source: as given, or read from its file under ``project_root``."""
        if self.source is not None:
            return self.source
        if self.theorem is None:
            raise LeanloopError(f"{self.label}: a goal has no source file")
        return theorem_source(self.theorem, self.project_root)

    @property
    def known_source(self) -> TheoremSource | None:
        """The source when it is known without reading anything (given, or a theorem record
        whose file can be found), else None."""
        if self.source is not None:
            return self.source
        if self.theorem is not None and self.project_root is not None:
            return self.theorem_source
        return None

    # -- proofs as Lean code -----------------------------------------------------------------

    def statement(self) -> str:
        """The theorem as a model is shown it for a whole proof, ending with ``:= by``."""
        if self.goal is not None:
            return f"example : {self.goal} := by"
        source = self.known_source
        if source is not None:
            return f"{source.local_context}theorem {source.full_name} {source.signature} := by"
        assert self.theorem is not None
        if self.theorem.statement:
            return f"{self.theorem.statement.rstrip()} := by"
        if self.theorem.traced_tactics:
            return self.theorem.traced_tactics[0].state_before
        raise LeanloopError(
            f"{self.theorem.full_name}: neither its statement nor a recorded state is known",
            hint="give the Lean project it comes from (project_root) or a TheoremSource",
        )

    def code(self, proof: str) -> str | None:
        """Lean code stating the target with ``proof`` (the body of its ``by`` block) as its
        proof, for ``LeanServer.check``; None for a theorem record without its source."""
        body = textwrap.indent(textwrap.dedent(proof).strip("\n"), "  ")
        if self.goal is not None:
            return f"example : {self.goal} := by\n{body}"
        source = self.known_source
        if source is None:
            return None
        declaration = f"{source.local_context}example {source.signature} := by\n{body}"
        prefix = source.prefix.rstrip()
        return f"{prefix}\n\n{declaration}" if prefix else declaration

    def tactics_code(self, tactics: Sequence[str]) -> str | None:
        """``code`` of a proof given as tactics, one after the other."""
        return self.code("\n".join(tactics))


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
        text = path.read_text(encoding="utf-8")
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
