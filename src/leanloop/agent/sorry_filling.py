"""Fill a ``sorry`` in a user's Lean file with a proof, and write it only when Lean accepts the
whole file: the declaration's body is replaced, the file is checked, and only then written in
one step (the original kept as a backup), the theorem marked ``sorry_proved`` in the database,
and optionally committed on a branch of its own."""

from __future__ import annotations

import shutil
import textwrap
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from leanloop.atomic import write_text_atomic
from leanloop.data.records import Theorem
from leanloop.errors import LeanloopError
from leanloop.lean.errors import LeanError
from leanloop.lean.lexer import Kind, tokenize
from leanloop.lean.scanner import Declaration, scan
from leanloop.lean.server import LeanServer
from leanloop.lean.verdict import is_sorry_warning

if TYPE_CHECKING:
    from leanloop.agent.git_branch import BranchCommitter
    from leanloop.database import DynamicDatabase

#: Words a proof may not contain: it would not be a proof (``native_decide`` trusts the compiler).
FORBIDDEN = frozenset({"sorry", "admit", "native_decide"})
#: Where backups of filled files go, under the project root.
BACKUP_DIR = ".leanloop-backups"


class FillStatus(StrEnum):
    """What happened to a proof offered for a ``sorry``."""

    WRITTEN = "written"  # Lean accepted the file; it was written
    REJECTED = "rejected"  # Lean rejected the file with the proof in it
    FORBIDDEN = "forbidden"  # the proof uses sorry, admit or native_decide
    NOT_FOUND = "not_found"  # the declaration or its sorry is no longer in the file
    CHECK_FAILED = "check_failed"  # Lean could not be asked (the server failed)


@dataclass(frozen=True)
class FillResult:
    """The outcome of filling one theorem's ``sorry``."""

    full_name: str
    file_path: str
    status: FillStatus
    proof: str
    reason: str = ""
    check_seconds: float = 0.0
    backup: Path | None = None
    commit: str | None = None

    @property
    def written(self) -> bool:
        return self.status is FillStatus.WRITTEN


def proof_body(proof: str | Sequence[str], column: int = 0) -> str:
    """The text that follows ``:=`` for a proof: a term or ``by`` block as given, or a tactic
    list as a ``by`` block indented two columns past the declaration (a multi-line tactic keeps
    its own indentation)."""
    if isinstance(proof, str):
        text = proof.strip()
        return text.removeprefix(":=").strip()
    indent = " " * (column + 2)
    lines = []
    for tactic in proof:
        block = textwrap.dedent(tactic).strip("\n")
        lines.append(textwrap.indent(block, indent))
    return "by\n" + "\n".join(lines)


def forbidden_words(text: str) -> list[str]:
    """The forbidden identifiers the proof uses (comments and strings do not count)."""
    return sorted({t.text for t in tokenize(text) if t.kind is Kind.IDENT and t.text in FORBIDDEN})


def find_declaration(source: str, theorem: Theorem) -> Declaration | None:
    """The theorem's declaration in ``source``: by full name, the one nearest its recorded
    line when there are several."""
    found = [d for d in scan(source).declarations if d.full_name == theorem.full_name]
    if not found:
        return None
    return min(found, key=lambda d: abs(d.start.line - theorem.start.line))


class SorryFiller:
    """Fills ``sorry``s in the files of one Lean project, through ``server`` (a Lean server
    started in that project, which checks whole files).

    With ``database``, a written proof marks the theorem ``sorry_proved`` with its proof; with
    ``branch``, each written file is also committed on that branch (never on the current one).
    """

    def __init__(
        self,
        project_root: str | Path,
        server: LeanServer,
        *,
        database: DynamicDatabase | None = None,
        branch: BranchCommitter | None = None,
        backup_dir: str | Path | None = None,
    ) -> None:
        self.root = Path(project_root).expanduser().resolve()
        self.server = server
        self.database = database
        self.branch = branch
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        self.backup_dir = Path(backup_dir) if backup_dir else self.root / BACKUP_DIR / stamp

    def _path(self, theorem: Theorem) -> Path:
        path = (self.root / theorem.file_path).resolve()
        if not path.is_relative_to(self.root):
            raise LeanloopError(f"{theorem.file_path} is outside the project {self.root}")
        return path

    def fill(self, theorem: Theorem, proof: str | Sequence[str]) -> FillResult:
        """Put ``proof`` (a term or ``by`` block, or a list of tactics) in place of the
        theorem's proof, check the whole file with Lean and write it only if accepted."""
        path = self._path(theorem)
        try:
            source = path.read_text(encoding="utf-8")
        except OSError as exc:
            return self._result(theorem, FillStatus.NOT_FOUND, "", f"cannot read it: {exc}")
        declaration = find_declaration(source, theorem)
        if declaration is None:
            return self._result(
                theorem, FillStatus.NOT_FOUND, "", "the declaration is no longer in the file"
            )
        body = proof_body(proof, declaration.start.column)
        if not declaration.has_sorry:
            return self._result(
                theorem, FillStatus.NOT_FOUND, body, "the declaration has no sorry any more"
            )
        if source[declaration.statement_end.offset :].lstrip()[:2] != ":=":
            return self._result(
                theorem,
                FillStatus.NOT_FOUND,
                body,
                "the declaration's body is not ':= ...' (pattern matching or 'where')",
            )
        words = forbidden_words(body)
        if words:
            return self._result(
                theorem, FillStatus.FORBIDDEN, body, f"the proof uses {', '.join(words)}"
            )
        filled = (
            source[: declaration.statement_end.offset]
            + " := "
            + body
            + source[declaration.end.offset :]
        )
        started = time.perf_counter()
        try:
            verdict = self.server.check(filled)
        except LeanError as exc:
            return self._result(theorem, FillStatus.CHECK_FAILED, body, exc.message)
        seconds = time.perf_counter() - started
        end = declaration.statement_end.offset + len(" := ") + len(body)
        problem = _problem(verdict, filled, declaration.start.offset, end)
        if problem:
            return self._result(theorem, FillStatus.REJECTED, body, problem, seconds)
        try:
            unchanged = path.read_text(encoding="utf-8") == source
        except OSError:
            unchanged = False
        if not unchanged:  # edited while Lean checked: the user's version wins
            return self._result(
                theorem,
                FillStatus.NOT_FOUND,
                body,
                "the file changed while Lean checked the proof; it was left as it is",
                seconds,
            )
        backup = self._backup(path)
        write_text_atomic(path, filled)
        commit, reasons = None, []
        if self.database is not None:
            try:
                self.database.record_proof(theorem, body)
            except LeanloopError as exc:  # the file is written all the same
                reasons.append(f"written, but not recorded in the database: {exc.message}")
        if self.branch is not None:
            try:
                commit = self.branch.commit(
                    {path: filled}, f"Prove {theorem.full_name} (checked by Lean)"
                )
            except LeanloopError as exc:  # the file is written all the same
                reasons.append(f"written, but not committed on {self.branch.branch}: {exc.message}")
        return FillResult(
            theorem.full_name,
            theorem.file_path,
            FillStatus.WRITTEN,
            body,
            reason="; ".join(reasons),
            check_seconds=seconds,
            backup=backup,
            commit=commit,
        )

    def _backup(self, path: Path) -> Path:
        target = self.backup_dir / path.relative_to(self.root)
        if not target.exists():  # the file as it was before this run changed it
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
        return target

    @staticmethod
    def _result(theorem, status, proof, reason, seconds=0.0) -> FillResult:
        return FillResult(theorem.full_name, theorem.file_path, status, proof, reason, seconds)


def _problem(verdict, filled: str, start: int, end: int) -> str:
    """Why Lean's verdict on the filled file does not accept the proof ('' if it does): any
    error in the file, or a ``sorry`` left in the filled declaration (between offsets
    ``start`` and ``end``; other declarations may keep theirs)."""
    errors = [m for m in verdict.messages if m.severity == "error"]
    if errors:
        first = errors[0]
        where = f"line {first.line}: " if first.line is not None else ""
        return f"Lean rejected the file: {where}{first.text.strip().splitlines()[0][:200]}"
    first_line = filled.count("\n", 0, start) + 1
    last_line = first_line + filled.count("\n", start, end)
    own_sorry = [
        m
        for m in verdict.messages
        if is_sorry_warning(m) and (m.line is None or first_line <= m.line <= last_line)
    ]
    if own_sorry:
        return "Lean accepted the file only thanks to a sorry in this declaration"
    return ""
