"""Judging one declaration by Lean: code that holds the declaration and then asks
``#print axioms`` for it at top level (``AuditedCode``), and the judgement on Lean's answer — only
errors and sorries located in that declaration count, and its axioms must pass the policy
(``judge``, ``check_declaration``). Every mode of leanloop that calls a proof proved goes through
here."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from leanloop.lean.axioms import AxiomAudit, AxiomPolicy, find_axiom_report, same_name
from leanloop.lean.lexer import escape_name, split_name
from leanloop.lean.server import CheckResult, LeanMessage, LeanServer
from leanloop.lean.verdict import is_sorry_warning


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
    """Lean code holding one declaration to judge, with two audit commands of leanloop's own:
    right after the declaration, in its own scope, ``#print axioms`` of the name as declared
    (Lean's answer names the constant it made, so leanloop's reading of the namespaces is
    checked), and at the end, after the scopes still open are closed, ``#print axioms`` of the
    full name with full names printed (the axioms the policy judges).

    ``first_line`` and ``last_line`` (1-based, inclusive) are the declaration's lines in
    ``code``; ``name_line`` and ``audit_line`` those of the two audit commands; ``own_lines``
    every line leanloop added."""

    code: str
    name: str
    first_line: int
    last_line: int
    name_line: int
    audit_line: int
    own_lines: frozenset[int]

    @classmethod
    def around(
        cls,
        text: str,
        start: int,
        end: int,
        name: str,
        open_scopes: Sequence[tuple[str, str]] = (),
        declared: str | None = None,
    ) -> AuditedCode:
        """``text`` (whose declaration ``name``, declared as ``declared`` — by default the last
        part of ``name`` — spans offsets ``[start, end)``) with the audit added; ``open_scopes``
        are the namespaces and sections still open at the end of ``text``."""
        first_line = text.count("\n", 0, start) + 1
        last_line = first_line + text.count("\n", start, max(start, end - 1))
        declared = declared or split_name(escape_name(name))[-1]
        head = text[:end]
        name_line = head.count("\n") + 3
        rest = text[end:].rstrip()
        body = f"{head}\n\n#print axioms {escape_name(declared)}\n{rest}".rstrip()
        tail = [
            *closing_commands(open_scopes),
            f"set_option pp.fullNames true in #print axioms {escape_name(name)}",
        ]
        code = body + "\n\n" + "\n".join(tail) + "\n"
        audit_line = body.count("\n") + 2 + len(tail)
        own = {name_line, *range(audit_line - len(tail) + 1, audit_line + 1)}
        return cls(code, name, first_line, last_line, name_line, audit_line, frozenset(own))

    @classmethod
    def unaudited(cls, text: str, start: int, end: int, name: str) -> AuditedCode:
        """``text`` as it is, its declaration ``name`` spanning ``[start, end)``, with no audit
        added: for a verdict recorded on that exact text, which no audit line can be added to
        (the judgement says the axioms were not audited)."""
        first_line = text.count("\n", 0, start) + 1
        last_line = first_line + text.count("\n", start, max(start, end - 1))
        return cls(text, name, first_line, last_line, 0, 0, frozenset())

    @property
    def audits(self) -> bool:
        """Whether the code carries leanloop's ``#print axioms`` lines."""
        return self.audit_line > 0

    def inside(self, line: int | None) -> bool:
        """Whether a message at ``line`` belongs to the declaration (no line: assume so)."""
        return line is None or self.first_line <= line <= self.last_line


class Outcome(StrEnum):
    """How Lean's answer on an ``AuditedCode`` judges its declaration."""

    ACCEPTED = "accepted"  # no error, no sorry in the declaration; axioms on the allow-list
    REJECTED = "rejected"  # Lean reported an error in the declaration
    SORRY = "sorry"  # the declaration uses sorry
    REFUSED = "refused"  # accepted by Lean, but an axiom is not allowed (or none was reported)
    BROKEN = "broken"  # an error outside the declaration: the code around it does not elaborate


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


def judge(result: CheckResult, audited: AuditedCode, policy: AxiomPolicy) -> Judgement:
    """Judge the declaration of ``audited`` from Lean's answer ``result`` on its code.

    Messages located outside the declaration (an earlier ``sorry``, a linter warning) do not
    count. An error before it means the code around it does not elaborate (``broken``); an error
    after it (in the code that follows, or in leanloop's own audit lines) rejects it; an audit
    answer that is missing, repeated or about another constant refuses it. Where the answer
    carries no proof status, nothing is assumed: the audit decides. Code without audit lines
    (``AuditedCode.unaudited``) is judged by its located messages alone, and the judgement says
    that its axioms were not audited."""
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
    sorry_warned = any(is_sorry_warning(m) and audited.inside(m.line) for m in result.messages)
    sorry_left = any(audited.inside(line) for line in result.sorry_lines)
    if sorry_warned or sorry_left:
        return Judgement(Outcome.SORRY, "Lean accepted it only thanks to a sorry in it")
    if not audited.audits:
        return Judgement(Outcome.ACCEPTED, "", (), audited=False)
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
