"""Judging one declaration by Lean: code that holds the declaration and then asks
``#print axioms`` for it at top level (``AuditedCode``), and the judgement on Lean's answer — only
errors and sorries located in that declaration count, and its axioms must pass the policy
(``judge``, ``check_declaration``). Every mode of leanloop that calls a proof proved goes through
here."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from leanloop.lean.account import (
    END,
    PRINT_AXIOMS,
    SET_OPTION,
    ExpectedCommand,
    Offsets,
    declaration_problem,
    place,
    sequence_problem,
)
from leanloop.lean.axioms import AxiomAudit, AxiomPolicy, find_axiom_report, same_name
from leanloop.lean.lexer import escape_name, split_name
from leanloop.lean.server import CheckResult, LeanMessage, LeanServer
from leanloop.lean.verdict import Outcome, is_sorry_warning

__all__ = [
    "AuditedCode",
    "Judgement",
    "Outcome",
    "check_declaration",
    "closing_commands",
    "declared_name",
    "judge",
]


def closing_commands(scopes: Sequence[tuple[str, str]]) -> list[str]:
    """The ``end`` commands that close ``scopes`` (outermost first, as the scanner gives them),
    innermost first."""
    return [f"end {name}".rstrip() for _kind, name in reversed(scopes)]


def declared_name(full_name: str, name: str | None, modifiers: Sequence[str] = ()) -> str:
    """How the declaration ``full_name`` is named right after it, in its own scope: as it was
    declared (``name``), or, for a ``protected`` one (which its short name does not reach, even
    in its namespace), with its last namespace part."""
    parts = split_name(escape_name(full_name))
    if "protected" in modifiers and len(parts) >= 2:
        return ".".join(parts[-2:])
    return escape_name(name) if name else parts[-1]


@dataclass(frozen=True)
class AuditedCode:
    """Lean code holding one declaration to judge, with leanloop's own audit commands: right
    after the declaration, in its own scope, ``#print axioms`` of the name as declared (Lean's
    answer names the constant it made, so leanloop's reading of the namespaces is checked), and
    at the end, after the scopes still open are closed, ``set_option pp.fullNames true`` and
    ``#print axioms`` of the full name (the axioms the policy judges).

    ``start`` and ``end`` are the offsets of the declaration's text in ``code``: Lean must
    elaborate exactly one command starting there (text before ``start`` is trusted: a file's
    prefix, a benchmark's header). ``expected`` lists the commands leanloop itself put after
    the declaration, each at its offset; ``rest`` the commands of the text that followed the
    declaration in its file (a sorry fill), as Lean elaborated them in the original file, at
    their offsets here — None when that text is not checked. ``first_line`` and ``last_line``
    (1-based, inclusive) are the declaration's lines as leanloop reads them (Lean's own range
    replaces them when the answer carries Lean's account); ``name_line`` and ``audit_line``
    those of the two ``#print axioms``; ``own_lines`` every line leanloop added."""

    code: str
    name: str
    first_line: int
    last_line: int
    name_line: int
    audit_line: int
    own_lines: frozenset[int]
    start: int = 0
    end: int = 0
    expected: tuple[ExpectedCommand, ...] = ()
    rest: tuple[ExpectedCommand, ...] | None = None
    rest_span: tuple[int, int] = (0, 0)

    @classmethod
    def around(
        cls,
        text: str,
        start: int,
        end: int,
        name: str,
        open_scopes: Sequence[tuple[str, str]] = (),
        declared: str | None = None,
        rest: Sequence[ExpectedCommand] | None = None,
    ) -> AuditedCode:
        """``text`` (whose declaration ``name``, declared as ``declared`` — by default the last
        part of ``name`` — spans offsets ``[start, end)``) with the audit added; ``open_scopes``
        are the namespaces and sections still open at the end of ``text``; ``rest``, the
        commands Lean elaborated in ``text[end:]`` (offsets relative to ``end``), when that
        text must still read as it did.

        The audit of the name goes after the declaration's last line, so that the text right
        after the declaration reads as it does in ``text`` (a proof ending in a comment would
        swallow what follows it on its line there too)."""
        first_line = text.count("\n", 0, start) + 1
        last_line = first_line + text.count("\n", start, max(start, end - 1))
        declared = declared or split_name(escape_name(name))[-1]
        split = text.find("\n", end)
        head = text if split < 0 else text[:split]
        name_line = head.count("\n") + 3
        name_command = f"#print axioms {escape_name(declared)}"
        after = text[len(head) :].rstrip()
        body = f"{head}\n\n{name_command}{after}".rstrip()
        shift = 2 + len(name_command)  # text after the declaration's line moves this far
        tail = [
            *closing_commands(open_scopes),
            "set_option pp.fullNames true",
            f"#print axioms {escape_name(name)}",
        ]
        code = body + "\n\n" + "\n".join(tail) + "\n"
        audit_line = body.count("\n") + 2 + len(tail)
        own = {name_line, *range(audit_line - len(tail) + 1, audit_line + 1)}
        expected = [ExpectedCommand(len(head) + 2, PRINT_AXIOMS)]
        offset = len(body) + 2
        for command in tail:
            kind = END if command.startswith("end") else SET_OPTION
            made = PRINT_AXIOMS if "#print" in command else kind
            expected.append(ExpectedCommand(offset, made))
            offset += len(command) + 1
        moved = None
        if rest is not None:
            places = [end + c.offset for c in rest]
            moved = tuple(
                ExpectedCommand(at + (shift if at >= len(head) else 0), c.expected)
                for at, c in zip(places, rest, strict=True)
            )
        return cls(
            code,
            name,
            first_line,
            last_line,
            name_line,
            audit_line,
            frozenset(own),
            start,
            end,
            tuple(expected),
            moved,
            (end, len(body)),
        )

    @classmethod
    def unaudited(cls, text: str, start: int, end: int, name: str) -> AuditedCode:
        """``text`` as it is, its declaration ``name`` spanning ``[start, end)``, with no audit
        added: for a verdict recorded on that exact text, which no audit line can be added to
        (the judgement says the axioms were not audited)."""
        first_line = text.count("\n", 0, start) + 1
        last_line = first_line + text.count("\n", start, max(start, end - 1))
        return cls(text, name, first_line, last_line, 0, 0, frozenset(), start, end)

    @property
    def audits(self) -> bool:
        """Whether the code carries leanloop's ``#print axioms`` lines."""
        return self.audit_line > 0

    def inside(self, line: int | None) -> bool:
        """Whether a message at ``line`` belongs to the declaration (no line: assume so)."""
        return line is None or self.first_line <= line <= self.last_line


@dataclass(frozen=True)
class Judgement:
    """The judgement on one declaration: its outcome, a one-line reason (empty when accepted)
    and the axioms Lean reported it depends on (empty when none was reported)."""

    outcome: Outcome
    reason: str = ""
    axioms: tuple[str, ...] = ()
    #: False when Lean's answer carried no audit (a recorded verdict): the axioms are unknown
    audited: bool = True

    @property
    def accepted(self) -> bool:
        return self.outcome is Outcome.ACCEPTED


def _first_line(message: LeanMessage) -> str:
    text = message.text.strip().splitlines()
    return (text[0] if text else "")[:200]


def _account(result: CheckResult, audited: AuditedCode) -> tuple[AuditedCode, str | None]:
    """What Lean's account of the commands it elaborated says of ``audited``: the code with the
    declaration's lines as Lean elaborated them, and why the account refuses the check (None
    when the commands are exactly the ones expected; '' when there is no account)."""
    if result.commands is None:
        return audited, ""
    code = audited.code
    placed = place(result.commands, code)
    declaration, problem = declaration_problem(placed, audited.start, audited.end)
    if declaration is None:
        return audited, problem
    lines = Offsets(code)
    first = lines.line(declaration.start)
    last = lines.line(max(declaration.start, declaration.end - 1))
    located = dataclasses.replace(audited, first_line=first, last_line=last)
    if declaration.end > audited.end and audited.audits:
        return located, "Lean's declaration ends after where leanloop read its end"
    if not audited.audits:
        return located, None
    own = {c.offset for c in audited.expected}
    if audited.rest is None:  # the file's own text after the declaration is not checked
        rest_start, rest_end = audited.rest_span
        placed = [p for p in placed if p.start in own or not rest_start <= p.start < rest_end]
        expected: tuple[ExpectedCommand, ...] = audited.expected
    else:
        expected = tuple(sorted((*audited.expected, *audited.rest), key=lambda c: c.offset))
    problem = sequence_problem(placed, audited.end, len(code) + 1, expected)
    return located, problem or None


def judge(result: CheckResult, audited: AuditedCode, policy: AxiomPolicy) -> Judgement:
    """Judge the declaration of ``audited`` from Lean's answer ``result`` on its code.

    Messages located outside the declaration (an earlier ``sorry``, a linter warning) do not
    count. An error before it means the code around it does not elaborate (``broken``); an error
    after it (in the code that follows, or in leanloop's own audit lines) rejects it. Then
    Lean's account of the commands it elaborated decides whether the check counts at all: Lean
    must have elaborated exactly one command in the declaration's text, leanloop's audit
    commands where leanloop put them with Lean's own elaborators, and nothing else (a command
    the screen did not see, a ``#print axioms`` a macro rewrote, an audit hidden in a comment
    refuse it); audited code whose answer carries no account is refused too, since what ran
    cannot be confirmed. An audit answer that is missing, repeated or about another constant
    refuses it. Code without audit lines (``AuditedCode.unaudited``, a recorded verdict) is
    judged by its located messages alone, and the judgement says that its axioms were not
    audited: it is never a proof."""
    audited, account = _account(result, audited)
    errors = [m for m in result.messages if m.severity == "error"]
    own = [m for m in errors if audited.inside(m.line)]
    if own:
        where = f"line {own[0].line}: " if own[0].line is not None else ""
        return Judgement(Outcome.REJECTED, f"Lean rejected it: {where}{_first_line(own[0])}")
    before = [m for m in errors if m.line is not None and m.line < audited.first_line]
    if before:
        return Judgement(
            Outcome.BROKEN,
            f"the code before the declaration does not elaborate: line {before[0].line}: "
            f"{_first_line(before[0])}",
        )
    audit_errors = [m for m in errors if m.line in audited.own_lines]
    if audit_errors:  # e.g. a proof left unfinished, whose parse error shows at the next line
        return Judgement(
            Outcome.REJECTED,
            f"Lean rejected the code at leanloop's audit (no axioms were read): line "
            f"{audit_errors[0].line}: {_first_line(audit_errors[0])}",
        )
    if errors:
        return Judgement(
            Outcome.REJECTED,
            f"the code after the declaration does not elaborate with it: line "
            f"{errors[0].line}: {_first_line(errors[0])}",
        )
    if account:
        return Judgement(Outcome.REFUSED, f"Lean's account refuses it: {account}")
    sorry_warned = any(is_sorry_warning(m) and audited.inside(m.line) for m in result.messages)
    sorry_left = any(audited.inside(line) for line in result.sorry_lines)
    if sorry_warned or sorry_left:
        return Judgement(Outcome.SORRY, "Lean accepted it only thanks to a sorry in it")
    if not audited.audits:
        return Judgement(Outcome.ACCEPTED, "", (), audited=False)
    if account is not None:  # '' : Lean gave no account of what it elaborated
        return Judgement(
            Outcome.REFUSED,
            "the Lean server gave no account of the commands it elaborated (an infotree), so "
            "leanloop cannot confirm that only the expected commands ran",
        )
    made = find_axiom_report(result.messages, line=audited.name_line)
    if made is None or not same_name(made.name, audited.name):
        found = f"Lean named it {made.name}" if made is not None else "Lean did not name it"
        return Judgement(
            Outcome.REFUSED,
            f"the axiom audit refused it: {found}, leanloop read it as {audited.name}",
        )
    report = find_axiom_report(result.messages, name=audited.name, line=audited.audit_line)
    audit = policy.judge(report) if report is not None else AxiomAudit.missing(audited.name)
    if not audit.passed:
        return Judgement(
            Outcome.REFUSED, f"the axiom audit refused it: {audit.reason}", audit.axioms
        )
    return Judgement(Outcome.ACCEPTED, "", audit.axioms)


def check_declaration(
    server: LeanServer, audited: AuditedCode, policy: AxiomPolicy
) -> tuple[Judgement, CheckResult]:
    """Send ``audited.code`` to ``server`` and judge its declaration (a ``LeanError`` of the
    server propagates)."""
    result = server.check(audited.code)
    return judge(result, audited, policy), result
