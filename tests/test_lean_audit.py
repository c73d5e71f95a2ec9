"""Judging one declaration by Lean: the code leanloop sends (the declaration, the scopes around it
closed, ``#print axioms`` at top level) and the judgement on the answer — only messages located
in the declaration count, and its axioms must pass the policy.

The axiom reports are Lean's real messages from ``fixtures/axioms`` (tests name their theorems
after them); the other messages are leanloop's own objects (see ``tests/audit_standin.py``)."""

from __future__ import annotations

import pytest

from leanloop.lean.audit import AuditedCode, Outcome, closing_commands, declared_name, judge
from leanloop.lean.axioms import AxiomPolicy, same_name
from leanloop.lean.scanner import scan
from leanloop.lean.server import CheckResult, LeanMessage
from tests.audit_standin import real_axiom_report, standin_account

FILE = """import Mathlib

namespace Outer
section Inner
open Classical

theorem early : 1 = 1 := sorry

theorem efsq (n : ℕ) : n + 0 = n := by
  simp

end Inner
"""


def audited(text: str = FILE, name: str = "Outer.efsq") -> AuditedCode:
    scanned = scan(text)
    declaration = scanned.by_name[name]
    return AuditedCode.around(
        text,
        declaration.code_start.offset,
        declaration.end.offset,
        name,
        scanned.open_scopes,
        declaration.name,
    )


def answer(
    code: AuditedCode, report: str | None, *others: LeanMessage, named: str | None = None
) -> CheckResult:
    """leanloop's own answer object: ``others``, and ``report`` at both audit lines (the one in
    the declaration's scope naming ``named`` instead when given)."""
    messages = list(others)
    if report is not None:
        scope_report = report if named is None else report.replace(report.split("'")[1], named)
        messages.append(LeanMessage("info", scope_report, code.name_line, 0))
        messages.append(LeanMessage("info", report, code.audit_line, 0))
    return CheckResult.from_messages(messages, commands=standin_account(code.code))


def test_the_audit_runs_in_the_declaration_s_scope_and_at_top_level():
    code = audited()
    lines = code.code.split("\n")
    assert lines[code.first_line - 1] == "theorem efsq (n : ℕ) : n + 0 = n := by"
    assert lines[code.last_line - 1] == "  simp"
    # right after it, in its scope, by the name it was declared with
    assert lines[code.name_line - 1] == "#print axioms efsq"
    assert lines[code.name_line + 1] == "end Inner"  # the rest of the file follows it
    # the namespace still open at the end of the file is closed, then the audit, names in full
    assert lines[code.audit_line - 3 : code.audit_line] == [
        "end Outer",
        "set_option pp.fullNames true",
        "#print axioms Outer.efsq",
    ]
    assert code.own_lines == {code.name_line, *range(code.audit_line - 2, code.audit_line + 1)}
    assert closing_commands([("namespace", "A.B"), ("section", ""), ("section", "s")]) == [
        "end s",
        "end",
        "end A.B",
    ]
    weird = AuditedCode.around("theorem «a.b» : True := trivial", 0, 31, "«a.b»")
    assert weird.code.split("\n")[2] == "#print axioms «a.b»"
    assert weird.code.endswith("#print axioms «a.b»\n")


def test_what_the_declaration_itself_did_decides(fixtures):
    code = audited()
    ok = real_axiom_report(fixtures, "#print axioms efsq").replace("'efsq'", "'Outer.efsq'")
    policy = AxiomPolicy()
    # an earlier declaration's sorry and a linter warning elsewhere do not count
    earlier = LeanMessage("warning", "declaration uses 'sorry'", 7, 8)
    lint = LeanMessage("warning", "unused variable `h`", 3, 0)
    judged = judge(answer(code, ok, earlier, lint), code, policy)
    assert judged.accepted and judged.axioms == ("propext",)
    # the same messages inside the declaration do
    inside = LeanMessage("warning", "declaration uses 'sorry'", code.first_line, 8)
    assert judge(answer(code, ok, inside), code, policy).outcome is Outcome.SORRY
    error = LeanMessage("error", "unsolved goals\n⊢ False", code.last_line, 2)
    rejected = judge(answer(code, ok, error), code, policy)
    assert rejected.outcome is Outcome.REJECTED
    assert rejected.reason == f"Lean rejected it: line {code.last_line}: unsolved goals"
    # an error before the declaration: the file does not elaborate, nothing is judged
    broken = judge(answer(code, ok, LeanMessage("error", "unknown package", 1, 0)), code, policy)
    assert broken.outcome is Outcome.BROKEN and "before the declaration" in broken.reason
    # an error after it, in the file that follows: the file does not elaborate with it
    later = LeanMessage("error", "type mismatch", code.name_line + 1, 0)
    after = judge(answer(code, ok, later), code, policy)
    assert after.outcome is Outcome.REJECTED and "after the declaration" in after.reason
    # an error in leanloop's own audit lines (a proof left unfinished shows its parse error
    # there): no axioms read, no proof
    lost = LeanMessage("error", "unexpected token '#print'", code.name_line, 0)
    unread = judge(answer(code, ok, lost), code, policy)
    assert unread.outcome is Outcome.REJECTED and "no axioms were read" in unread.reason
    # a sorry left in it (the REPL's sorries, by line)
    holes = answer(code, ok)
    holes = CheckResult.from_messages(
        list(holes.messages), ["⊢ False"], [code.last_line], holes.commands
    )
    assert judge(holes, code, policy).outcome is Outcome.SORRY
    elsewhere = CheckResult.from_messages(
        list(answer(code, ok).messages), ["⊢ 1 = 1"], [7], holes.commands
    )
    assert judge(elsewhere, code, policy).accepted


@pytest.mark.parametrize(
    ("command", "outcome", "native_allowed"),
    [
        ("#print axioms addThree", Outcome.ACCEPTED, Outcome.ACCEPTED),
        ("#print axioms efsq", Outcome.ACCEPTED, Outcome.ACCEPTED),
        ("#print axioms ex1", Outcome.REFUSED, Outcome.ACCEPTED),
        ("#print axioms largeNumber", Outcome.REFUSED, Outcome.ACCEPTED),
        ("#print axioms axiomCheck", Outcome.REFUSED, Outcome.REFUSED),  # sorryAx in it
        ("#print axioms A2", Outcome.REFUSED, Outcome.REFUSED),  # axioms the file declared
        ("#print axioms wilson_5_11_16", Outcome.REFUSED, Outcome.REFUSED),  # 'choice'
    ],
)
def test_lean_s_real_axiom_reports_are_audited(fixtures, command, outcome, native_allowed):
    text = real_axiom_report(fixtures, command)
    name = text[1 : text.index("' ")]
    source = f"theorem {name} : True := by\n  trivial\n"
    code = AuditedCode.around(source, 0, len(source), name)
    assert code.code.endswith(f"#print axioms {name}\n")
    judged = judge(answer(code, text), code, AxiomPolicy())
    assert judged.outcome is outcome, judged.reason
    assert judged.axioms or "does not depend" in text
    allowed = judge(answer(code, text), code, AxiomPolicy(allow_native=True))
    assert allowed.outcome is native_allowed


def test_an_audit_about_another_constant_or_a_second_report_is_refused(fixtures):
    code = audited()
    ok = real_axiom_report(fixtures, "#print axioms efsq").replace("'efsq'", "'Outer.efsq'")
    policy = AxiomPolicy()
    assert judge(answer(code, None), code, policy).outcome is Outcome.REFUSED
    other = real_axiom_report(fixtures, "#print axioms addThree")
    judged = judge(answer(code, other), code, policy)
    assert judged.outcome is Outcome.REFUSED and "Lean named it addThree" in judged.reason
    # Lean placed the declaration elsewhere than leanloop read: the audit would be of another
    wrong = judge(answer(code, ok, named="Outer.X.efsq"), code, policy)
    assert wrong.outcome is Outcome.REFUSED and "Lean named it Outer.X.efsq" in wrong.reason
    # a private declaration prints with its private prefix: still the same declaration
    private = judge(answer(code, ok, named="_private.Demo.Basic.0.Outer.efsq"), code, policy)
    assert private.accepted
    # a report printed by the proof itself next to Lean's: two reports, none is trusted
    fake = LeanMessage("info", "'Outer.efsq' does not depend on any axioms", code.audit_line, 0)
    native = real_axiom_report(fixtures, "#print axioms ex1").replace("'ex1'", "'Outer.efsq'")
    spoofed = judge(answer(code, native, fake), code, policy)
    assert spoofed.outcome is Outcome.REFUSED and "no axiom report" in spoofed.reason


def test_a_protected_declaration_is_named_with_its_namespace():
    assert declared_name("Nat.Foo.t", "t", ("protected",)) == "Foo.t"
    assert declared_name("Nat.Foo.t", "t", ("private",)) == "t"
    assert declared_name("x.«a b»", None) == "«a b»"
    source = "namespace Nat\n\nprotected theorem t : True := trivial\n\nend Nat\n"
    declaration = scan(source).by_name["Nat.t"]
    declared = declared_name("Nat.t", declaration.name, declaration.modifiers)
    code = AuditedCode.around(
        source, declaration.start.offset, declaration.end.offset, "Nat.t", (), declared
    )
    assert code.code.split("\n")[code.name_line - 1] == "#print axioms Nat.t"
    # a private module part that is a number is not the private prefix's number
    assert same_name("_private.Solutions.«2024».P1.0.foo", "foo")
    assert not same_name("_private.Solutions.«2024».P1.0.foo", "P1.foo")
