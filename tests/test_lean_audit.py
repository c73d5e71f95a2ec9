"""Judging one declaration by Lean: the code leanloop sends (the declaration, the scopes around it
closed, ``#print axioms`` at top level) and the judgement on the answer — only messages located
in the declaration count, and its axioms must pass the policy.

The axiom reports are Lean's real messages from ``fixtures/axioms`` (tests name their theorems
after them); the other messages are leanloop's own objects (see ``tests/audit_standin.py``)."""

from __future__ import annotations

import pytest

from leanloop.lean.audit import AuditedCode, Outcome, closing_commands, judge
from leanloop.lean.axioms import AxiomPolicy
from leanloop.lean.scanner import scan
from leanloop.lean.server import CheckResult, LeanMessage
from tests.audit_standin import real_axiom_report

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
        text, declaration.code_start.offset, declaration.end.offset, name, scanned.open_scopes
    )


def answer(code: AuditedCode, report: str | None, *others: LeanMessage) -> CheckResult:
    messages = list(others)
    if report is not None:
        messages.append(LeanMessage("info", report, code.audit_line, 0))
    return CheckResult.from_messages(messages)


def test_the_audit_runs_at_top_level_after_the_declaration():
    code = audited()
    lines = code.code.split("\n")
    assert lines[code.first_line - 1] == "theorem efsq (n : ℕ) : n + 0 = n := by"
    assert lines[code.last_line - 1] == "  simp"
    # the section closed at the end of the file, the namespace still open is closed, then audit
    assert lines[code.audit_line - 2 : code.audit_line] == ["end Outer", "#print axioms Outer.efsq"]
    assert code.code.startswith(FILE.rstrip())
    assert closing_commands([("namespace", "A.B"), ("section", ""), ("section", "s")]) == [
        "end s",
        "end",
        "end A.B",
    ]
    weird = AuditedCode.around("theorem «my thm» : True := trivial", 0, 34, "my thm")
    assert weird.code.endswith("#print axioms «my thm»\n")


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
    # a sorry left in it (the REPL's sorries, by line)
    holes = CheckResult.from_messages(
        [LeanMessage("info", ok, code.audit_line, 0)], ["⊢ False"], [code.last_line]
    )
    assert judge(holes, code, policy).outcome is Outcome.SORRY
    elsewhere = CheckResult.from_messages(
        [LeanMessage("info", ok, code.audit_line, 0)], ["⊢ 1 = 1"], [7]
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


def test_no_report_or_another_declaration_s_report_is_refused(fixtures):
    code = audited()
    assert judge(answer(code, None), code, AxiomPolicy()).outcome is Outcome.REFUSED
    other = real_axiom_report(fixtures, "#print axioms addThree")
    judged = judge(answer(code, other), code, AxiomPolicy())
    assert judged.outcome is Outcome.REFUSED and "no axiom report" in judged.reason
