"""Fill a ``sorry`` in a user's Lean file with a proof, and write it only when Lean accepts it:
only the proof (from the declaration's ``:=`` to the end of its proof) is replaced — what follows
(``where`` blocks, ``termination_by``, the next commands) stays, and every byte outside that span
is checked to be unchanged (line endings, a byte order mark, tabs, a missing final newline);
Lean judges the filled declaration in its file (other declarations may keep their sorries) and
audits its axioms; only then is the file written in one step (the original kept as a backup),
the theorem marked ``sorry_proved`` and, on a branch, committed. A file that may not be written
(read-only, immutable, or in a directory that may not be written) is left untouched, before Lean
is asked and again before writing."""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import os
import shutil
import stat
import textwrap
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from leanloop.agent.fill_span import lean_span
from leanloop.agent.git_branch import COMMIT_SUBJECT
from leanloop.atomic import write_bytes_atomic
from leanloop.data.records import AttemptStatus, Theorem
from leanloop.errors import LeanloopError
from leanloop.lean.account import ElaboratedCommand
from leanloop.lean.audit import (
    AuditedCode,
    Judgement,
    Outcome,
    check_declaration,
    declared_name,
)
from leanloop.lean.axioms import AxiomPolicy
from leanloop.lean.errors import LeanError
from leanloop.lean.keywords import COMMAND_WORDS, HASH_BOTH, HASH_COMMANDS, IN_COMMANDS, MODIFIERS
from leanloop.lean.lexer import Kind, Token, hash_word, is_unterminated, tokenize
from leanloop.lean.proof_end import modifies_declaration
from leanloop.lean.scanner import (
    CLOSING_BRACKETS,
    NEVER_IN_PROOFS,
    OPENING_BRACKETS,
    Declaration,
    SourceScan,
    scan,
)
from leanloop.lean.screen import forbidden_in_proof
from leanloop.lean.server import LeanServer

if TYPE_CHECKING:
    from leanloop.agent.git_branch import BranchWorkspace
    from leanloop.database import DynamicDatabase

#: Where backups of filled files go, under the project root.
BACKUP_DIR = ".leanloop-backups"
_BOM = "\ufeff"

Lease = Callable[[], AbstractContextManager[LeanServer]]


class FillStatus(StrEnum):
    """What happened to the file a proof was offered to — only that: Lean's side of a fill is
    its ``Judgement`` (``FillResult.judgement``), and how the attempt is stored is
    ``FillResult.attempt_status``."""

    WRITTEN = "written"  # Lean accepted the filled declaration: written (on the branch)
    NOT_ACCEPTED = "not_accepted"  # left as it is: Lean's judgement (or the screen, before
    # Lean saw it) did not accept the proof; the judgement says why
    CHECK_FAILED = "check_failed"  # left as it is: Lean could not judge it (the server failed)
    NOT_FOUND = "not_found"  # the declaration, its ':=' body or its sorry is no longer there
    CHANGED = "changed"  # the file changed while Lean checked: left as the user saved it
    WRITE_FAILED = "write_failed"  # Lean accepted it, but the file could not be written
    UNSAFE = "unsafe_edit"  # where the proof ends is unclear: nothing is replaced
    READ_ONLY = "read_only"  # the file (or its directory) may not be written: left untouched


@dataclass(frozen=True)
class FillResult:
    """The outcome of filling one theorem's ``sorry``: what happened to the file (``status``)
    and Lean's judgement on the filled declaration (``judgement``; None when Lean judged
    nothing). On a branch, ``working_tree`` says whether the user's own file got the same
    proof (``written``) or was left (``left``, it differs from what Lean checked)."""

    full_name: str
    file_path: str
    status: FillStatus
    proof: str
    reason: str = ""
    check_seconds: float = 0.0
    backup: Path | None = None
    commit: str | None = None
    axioms: tuple[str, ...] | None = None
    working_tree: str | None = None
    judgement: Judgement | None = None

    def __post_init__(self) -> None:
        accepted = self.judgement is not None and self.judgement.accepted
        if self.status is FillStatus.WRITTEN and not accepted:
            raise ValueError("a proof is written only when Lean's judgement accepted it")
        if self.status is FillStatus.NOT_ACCEPTED and (self.judgement is None or accepted):
            raise ValueError("'not_accepted' needs the judgement that did not accept the proof")

    @property
    def written(self) -> bool:
        """Whether the proof was written into its file (on the branch)."""
        return self.status is FillStatus.WRITTEN

    @property
    def attempt_status(self) -> AttemptStatus:
        """How the fill is stored as the proof attempt: when the proof was written or Lean's
        judgement kept it out, that judgement read by ``AttemptStatus.judged`` (the one reading
        of a judgement); otherwise — Lean accepted it but it was not written, or Lean did not
        judge it — ``error``, tried again by the next run."""
        if self.judgement is not None and (self.written or not self.judgement.accepted):
            return AttemptStatus.judged(self.judgement)
        return AttemptStatus.ERROR


def proof_body(proof: str | Sequence[str], column: int = 0, newline: str = "\n") -> str:
    """The text that follows ``:=`` for a proof: a term or ``by`` block as given, or a tactic
    list as a ``by`` block indented two columns past the declaration (a multi-line tactic keeps
    its own indentation); lines end with ``newline``."""
    if isinstance(proof, str):
        text = proof.strip().removeprefix(":=").strip()
    else:
        indent = " " * (column + 2)
        lines = [textwrap.indent(textwrap.dedent(t).strip("\n"), indent) for t in proof]
        text = "by\n" + "\n".join(lines)
    text = text.replace("\r\n", "\n")
    return text.replace("\n", newline) if newline != "\n" else text


def outside_span_problem(before: bytes, after: bytes, start: int, end: int) -> str:
    """Why ``after`` is not ``before`` with only bytes ``[start, end)`` replaced ('' when it
    is): the first byte outside that span that would change, line endings and a byte order
    mark included."""
    tail = len(before) - end
    if after[:start] != before[:start]:
        first = next(i for i, (a, b) in enumerate(zip(after, before, strict=False)) if a != b)
        return f"byte {first}, before the proof, would change"
    if len(after) < start + tail or after[len(after) - tail :] != before[end:]:
        return "the bytes after the proof would change"
    return ""


def span_problem(span: str) -> str:
    """Why the text a fill would replace (``:= <proof>``) may hold more than a proof ('' when
    it holds only a proof): a command at the proof's own bracket depth (a declaration, scope or
    other command word, a modifier before a declaration, ``open``/``set_option`` with no ``in``
    on its line, a ``#`` command no library declares as a tactic), a declaration or scope
    keyword first on a line at any depth, a doc comment or an attribute (but the note of
    ``#adaptation_note``), brackets that do not balance, or a string or comment left
    unterminated. A check of the span itself, independent of how the scanner found its end."""
    depth = 0
    every = tokenize(span)
    for token in every:
        if is_unterminated(token):
            return f"line {token.line} of the proof: a {token.kind.value} is never closed"
    tokens = [t for t in every if t.kind is not Kind.COMMENT]
    for index, token in enumerate(tokens):
        where = f"line {token.line} of the proof"
        if token.kind is Kind.SYMBOL and token.text in OPENING_BRACKETS:
            depth += 1
            if token.text == "@[" and depth == 1:
                return f"{where}: '@[' starts a declaration"
            continue
        if token.kind is Kind.SYMBOL and token.text in CLOSING_BRACKETS:
            depth -= 1
            if depth < 0:
                return f"{where}: a {token.text!r} closes no bracket"
            continue
        noted = index >= 2 and hash_word(tokens, index - 2) == "adaptation_note"
        if token.kind in (Kind.DOC, Kind.MODDOC) and not noted:
            return f"{where}: {token.text[:12]!r} starts a declaration"
        command = _command_word(tokens, index) if depth == 0 else None
        if command is None and token.line_start and token.text in NEVER_IN_PROOFS:
            command = repr(token.text)
        if command is not None:
            return f"{where}: {command} starts a command"
    if depth:
        return f"the proof's brackets do not balance ({depth} left open)"
    return ""


def _command_word(tokens: Sequence[Token], index: int) -> str | None:
    """The command word at ``tokens[index]`` (at the proof's depth), spelt, or None."""
    token = tokens[index]
    word = hash_word(tokens, index)
    if word is not None:
        return f"'#{word}'" if word in HASH_COMMANDS - HASH_BOTH else None
    if token.kind is not Kind.IDENT:
        return None
    if token.text in COMMAND_WORDS or (
        token.text in MODIFIERS and modifies_declaration(tokens, index)
    ):
        return repr(token.text)
    if token.text in IN_COMMANDS:
        line = itertools.takewhile(lambda t: t.line == token.line, tokens[index + 1 :])
        if not any(t.text == "in" for t in line):
            return f"{token.text!r} without 'in'"
    return None


def read_only_reason(path: Path) -> str:
    """Why ``path`` may not be written ('' when it may): the file has no write permission
    (for anyone, or for this user), is marked immutable or lies on a read-only file system, or
    its directory (where the new version is written before it replaces the file) may not be
    written. A file the user made read-only is never replaced, even by a user who could."""
    try:
        mode = path.stat()
        directory = path.parent.stat()
    except OSError as exc:
        return f"its permissions cannot be read: {exc.strerror or exc}"
    with contextlib.suppress(OSError, AttributeError):
        if os.statvfs(path.parent).f_flag & os.ST_RDONLY:
            return "it is on a read-only file system"
    flags = getattr(mode, "st_flags", 0) | getattr(directory, "st_flags", 0)
    if flags & (getattr(stat, "UF_IMMUTABLE", 0) | getattr(stat, "SF_IMMUTABLE", 0)):
        return "it or its directory is marked immutable"
    if not mode.st_mode & 0o222:
        return f"the file is read-only (mode {stat.S_IMODE(mode.st_mode):04o})"
    if not os.access(path, os.W_OK):
        return "you may not write it (permission, or the file is marked immutable)"
    if not directory.st_mode & 0o222:
        return f"its directory is read-only (mode {stat.S_IMODE(directory.st_mode):04o})"
    if not os.access(path.parent, os.W_OK | os.X_OK):
        return "you may not write in its directory (permission, or it is marked immutable)"
    return ""


def _for_lean(text: str) -> str:
    """The file as Lean is shown it: without a byte order mark, with LF line ends (line
    numbers are unchanged)."""
    return text.removeprefix(_BOM).replace("\r\n", "\n")


def find_declaration(source: str | SourceScan, theorem: Theorem) -> Declaration | None:
    """The theorem's declaration in ``source`` (text, or its scan): by full name, the one
    nearest its recorded line when there are several."""
    scanned = scan(source) if isinstance(source, str) else source
    found = [d for d in scanned.declarations if d.full_name == theorem.full_name]
    if not found:
        return None
    return min(found, key=lambda d: abs(d.start.line - theorem.start.line))


@dataclass(frozen=True)
class _Edit:
    """One planned edit of a file: its bytes before and after, and the code Lean judges."""

    before: bytes
    after: bytes
    body: str
    audited: AuditedCode


class SorryFiller:
    """Fills ``sorry``s in the files of one Lean project through ``server`` (a Lean server
    started in the project, or a lease of one: ``with server() as lean: ...``).

    With ``database``, a written proof marks the theorem ``sorry_proved`` with its proof. With
    ``branch`` (a ``BranchWorkspace``), the file is filled, checked and committed in the
    branch's own worktree (``server`` then runs there), so that the branch is HEAD plus the
    proofs Lean checked and nothing else; the user's file gets the same proof only if it still
    matches the branch's. ``policy`` is the axiom audit (default: the standard allow-list).
    """

    def __init__(
        self,
        project_root: str | Path,
        server: LeanServer | Lease,
        *,
        database: DynamicDatabase | None = None,
        branch: BranchWorkspace | None = None,
        backup_dir: str | Path | None = None,
        policy: AxiomPolicy | None = None,
    ) -> None:
        self.root = Path(project_root).expanduser().resolve()
        if isinstance(server, LeanServer):
            self.lease: Lease = lambda: contextlib.nullcontext(server)
        else:
            self.lease = server
        self.database = database
        self.branch = branch
        self.policy = policy or AxiomPolicy()
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        self.backup_dir = Path(backup_dir) if backup_dir else self.root / BACKUP_DIR / stamp
        self._accounts: dict[tuple[str, str], tuple[ElaboratedCommand, ...] | None] = {}

    @property
    def tree(self) -> Path:
        """Where files are filled and checked: the project, or the branch's worktree of it."""
        return self.branch.project_root(self.root) if self.branch is not None else self.root

    def _path(self, root: Path, theorem: Theorem) -> Path:
        path = (root / theorem.file_path).resolve()
        if not path.is_relative_to(root.resolve()):
            raise LeanloopError(f"{theorem.file_path} is outside the project {self.root}")
        return path

    def fill(self, theorem: Theorem, proof: str | Sequence[str]) -> FillResult:
        """Put ``proof`` (a term or ``by`` block, or a list of tactics) in place of the
        theorem's proof, have Lean judge the declaration in its file and write it only if
        accepted."""
        path = self._path(self.tree, theorem)
        try:
            before = path.read_bytes()
            source = before.decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            return self._result(theorem, FillStatus.NOT_FOUND, "", f"cannot read it: {exc}")
        plan = self._plan(theorem, proof, before, source, settle=True)
        if isinstance(plan, FillResult):
            return plan
        unwritable = read_only_reason(path)
        if unwritable:  # nothing to ask Lean: the proof could not be written
            return self._result(
                theorem, FillStatus.READ_ONLY, plan.body, f"{unwritable}; it was left as it is"
            )
        started = time.perf_counter()
        try:
            with self.lease() as server:
                account = self._original_account(server, path, source)
                settled = self._plan(theorem, proof, before, source, account=account)
                if isinstance(settled, FillResult):
                    return settled
                plan = settled
                judgement, _ = check_declaration(server, plan.audited, self.policy)
        except LeanError as exc:
            return self._result(theorem, FillStatus.CHECK_FAILED, plan.body, exc.message)
        seconds = time.perf_counter() - started
        if not judgement.accepted:
            return self._result(
                theorem, FillStatus.NOT_ACCEPTED, plan.body, judgement.reason, seconds, judgement
            )
        try:
            unchanged = path.read_bytes() == before
        except OSError:
            unchanged = False
        if not unchanged:  # edited while Lean checked: the user's version wins
            return self._result(
                theorem,
                FillStatus.CHANGED,
                plan.body,
                "the file changed while Lean checked the proof; it was left as it is",
                seconds,
                judgement,
            )
        try:
            return self._write(theorem, path, plan, seconds, judgement)
        except (OSError, LeanloopError) as exc:
            reason = f"Lean accepted the proof but the file was not written: {exc}"
            return self._result(
                theorem, FillStatus.WRITE_FAILED, plan.body, reason, seconds, judgement
            )

    def _original_account(
        self, server: LeanServer, path: Path, source: str
    ) -> tuple[ElaboratedCommand, ...] | None:
        """Lean's account of the commands of the file as it is (before the fill), asked once per
        content of the file; None when the server gives none."""
        key = (str(path), hashlib.sha256(source.encode("utf-8")).hexdigest())
        if key not in self._accounts:
            self._accounts[key] = server.check(_for_lean(source)).commands
        return self._accounts[key]

    def _plan(
        self,
        theorem: Theorem,
        proof: str | Sequence[str],
        before: bytes,
        source: str,
        *,
        account: Sequence[ElaboratedCommand] | None = None,
        settle: bool = False,
    ) -> _Edit | FillResult:
        """The edit that puts ``proof`` in place of the theorem's proof, or why there is none.

        With Lean's ``account`` of the file as it is, the span ends where Lean's declaration
        ends and the commands after it must read the same once the proof is in (see
        ``agent.fill_span``); without it, the scanner's reading decides, and an end it is
        unsure of is refused — unless ``settle``, for a first plan that Lean's account will
        settle."""
        scanned = scan(source)
        declaration = find_declaration(scanned, theorem)
        if declaration is None:
            return self._result(
                theorem, FillStatus.NOT_FOUND, "", "the declaration is no longer in the file"
            )
        newline = "\r\n" if "\r\n" in source else "\n"
        body = proof_body(proof, declaration.indent, newline)
        span = declaration.proof_span
        if span is None:
            return self._result(
                theorem,
                FillStatus.NOT_FOUND,
                body,
                "the declaration's body is not ':= ...' (pattern matching or 'where')",
            )
        start, end = span
        rest = None
        if account is not None:
            first = (declaration.context_start or declaration.code_start).offset
            settled = lean_span(source, account, first, span, declaration.end.offset)
            if isinstance(settled, str):
                return self._result(
                    theorem, FillStatus.UNSAFE, body, f"{settled}; nothing was replaced"
                )
            start, end, rest = settled.start, settled.end, settled.rest
            declaration_end = settled.declaration_end
        else:
            declaration_end = declaration.end.offset
        if declaration.proof_unclear and account is None and not settle:
            return self._result(
                theorem,
                FillStatus.UNSAFE,
                body,
                f"where its proof ends is unclear ({declaration.proof_unclear}); "
                "nothing was replaced",
            )
        # Lean's account says where the declaration ends and no command starts in it
        problem = span_problem(source[start:end]) if account is None and not settle else ""
        if problem:
            return self._result(
                theorem,
                FillStatus.UNSAFE,
                body,
                f"where its proof ends is unclear ({problem}); nothing was replaced",
            )
        if not any(start <= s.offset < end for s in declaration.sorries):
            return self._result(
                theorem, FillStatus.NOT_FOUND, body, "the declaration's proof has no sorry any more"
            )
        refusal = forbidden_in_proof(body)
        if refusal is not None:  # never shown to Lean: the soundness policy refuses it
            reason = f"refused: {refusal.reason}"
            refused = Judgement(Outcome.REFUSED, reason)
            return self._result(theorem, FillStatus.NOT_ACCEPTED, body, reason, judgement=refused)
        replacement = ":= " + body
        after_text = source[:start] + replacement + source[end:]
        after = after_text.encode("utf-8")  # what would be written, checked against the file
        problem = outside_span_problem(
            before, after, len(source[:start].encode("utf-8")), len(source[:end].encode("utf-8"))
        )
        if problem:
            return self._result(
                theorem, FillStatus.UNSAFE, body, f"{problem}; nothing was replaced"
            )
        # the declaration as Lean sees it: its context lines and attributes to its last clause
        first = (declaration.context_start or declaration.code_start).offset
        last = declaration_end + len(replacement) - (end - start)
        checked = _for_lean(after_text)
        audited = AuditedCode.around(
            checked,
            len(_for_lean(after_text[:first])),
            len(_for_lean(after_text[:last])),
            theorem.full_name,
            scanned.open_scopes,  # only the proof changed: the scopes are the file's
            declared_name(theorem.full_name, declaration.name, declaration.modifiers),
            rest,
        )
        return _Edit(before, after, body, audited)

    def _write(
        self, theorem: Theorem, path: Path, plan: _Edit, seconds: float, judgement: Judgement
    ) -> FillResult:
        reasons: list[str] = []
        backup = None
        working_tree = None
        commit = None
        unwritable = read_only_reason(path)
        if unwritable:  # made read-only while Lean checked: nothing is written, no backup
            reason = f"Lean accepted the proof but it was not written: {unwritable}"
            return self._result(
                theorem, FillStatus.READ_ONLY, plan.body, reason, seconds, judgement
            )
        if self.branch is None:
            backup = self._backup(path)
            write_bytes_atomic(path, plan.after)
        else:
            write_bytes_atomic(path, plan.after)  # in the branch's worktree
            commit = self.branch.commit([path], COMMIT_SUBJECT.format(name=theorem.full_name))
            working_tree, backup, note = self._mirror(theorem, plan)
            if note:
                reasons.append(note)
        if self.database is not None:
            try:
                self.database.record_proof(theorem, plan.body.replace("\r\n", "\n"))
            except LeanloopError as exc:  # the file is written all the same
                reasons.append(f"written, but not recorded in the database: {exc.message}")
        return FillResult(
            theorem.full_name,
            theorem.file_path,
            FillStatus.WRITTEN,
            plan.body,
            reason="; ".join(reasons),
            check_seconds=seconds,
            backup=backup,
            commit=commit,
            axioms=judgement.axioms,
            working_tree=working_tree,
            judgement=judgement,
        )

    def _mirror(self, theorem: Theorem, plan: _Edit) -> tuple[str, Path | None, str]:
        """Give the user's own file the proof committed on the branch, if it still holds what
        the branch held before (else leave it, and say so)."""
        path = self._path(self.root, theorem)
        try:
            matches = path.read_bytes() == plan.before
        except OSError:
            matches = False
        if not matches:
            return (
                "left",
                None,
                "your working tree's file differs from the branch's, so it was left as it is",
            )
        unwritable = read_only_reason(path)
        if unwritable:
            return "left", None, f"your working tree's file was left as it is: {unwritable}"
        backup = self._backup(path)
        write_bytes_atomic(path, plan.after)
        return "written", backup, ""

    def _backup(self, path: Path) -> Path:
        target = self.backup_dir / path.relative_to(self.root)
        if not target.exists():  # the file as it was before this run changed it
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
        return target

    @staticmethod
    def _result(
        theorem: Theorem,
        status: FillStatus,
        proof: str,
        reason: str,
        seconds: float = 0.0,
        judgement: Judgement | None = None,
    ) -> FillResult:
        axioms = judgement.axioms if judgement is not None else None
        return FillResult(
            theorem.full_name,
            theorem.file_path,
            status,
            proof,
            reason,
            seconds,
            axioms=axioms,
            judgement=judgement,
        )
