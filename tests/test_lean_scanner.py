"""The Lean 4 source scanner: on every statement of the benchmark fixtures and every Lean file of
the recorded verdicts, and on the Lean 4 syntax it must handle."""

from __future__ import annotations

import json
import re

import pytest

from leanloop.lean.lexer import Kind, tokenize
from leanloop.lean.scanner import scan


def jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def statement_files(fixtures):
    for path in sorted((fixtures / "minif2f").glob("*.jsonl")):
        for row in jsonl(path):
            yield path.name, row


def test_every_benchmark_statement(fixtures):
    count = 0
    for file_name, row in statement_files(fixtures):
        header = row.get("header", "import Mathlib\n\n")
        statement = row["formal_statement"]
        proof = "  sorry\n" if statement.rstrip().endswith("by") else " by sorry\n"
        text = header + row["informal_prefix"] + statement + proof
        start = len(header) + len(row["informal_prefix"])
        expected = statement[: statement.rindex(":=")].rstrip()
        found = [d for d in scan(text).declarations if d.name == row["name"]]
        assert len(found) == 1, (file_name, row["name"])
        declaration = found[0]
        assert declaration.full_name == row["name"]
        assert declaration.statement == expected, (file_name, row["name"])
        assert declaration.start.offset == start
        line = text[:start].count("\n") + 1
        assert (declaration.start.line, declaration.start.column) == (line, 0)
        assert declaration.doc is not None and declaration.doc in row["informal_prefix"]
        assert len(declaration.sorries) == 1
        count += 1
    assert count >= 900


def test_every_verdict_file(fixtures):
    rows = jsonl(fixtures / "kimina_verdicts" / "verdicts.jsonl")
    assert len(rows) >= 70
    for row in rows:
        code = row["code"]
        match = re.search(r"theorem\s+(\S+)", code)
        expected = code[match.start() : code.index(":=", match.start())].rstrip()
        result = scan(code)
        found = [d for d in result.declarations if d.full_name == match.group(1)]
        assert len(found) == 1, row["name"]
        assert found[0].statement == expected, row["name"]
        assert found[0].kind == "theorem" and not found[0].has_sorry
        assert found[0].code.startswith(code[found[0].code_start.offset :][:20])
        assert "Mathlib" in result.imports


SOURCE = """\
import Mathlib.Data.Nat.Basic
import Aesop

/-! # Module doc: theorem fake : False := sorry -/

open Nat

namespace Outer.Inner

/-- Doc of `add_zero'`. Mentions theorem and sorry. -/
@[simp, norm_cast]
protected theorem add_zero' (n : ℕ) : n + 0 = n := by
  -- a comment with theorem inside
  simp

section Helpers
variable {α : Type*} [Inhabited α]

private lemma helper₁ (x : α) : x = x := rfl

def «weird name» : Nat := 3

theorem with_string : "sorry" = "sorry" := rfl

end Helpers

instance : Inhabited Nat := ⟨0⟩

instance (priority := 100) instNamed : Inhabited Bool := ⟨true⟩

structure Point where
  x : ℕ
  y : ℕ
deriving Repr

class inductive Good : Prop
  | ok

def fib : ℕ → ℕ
  | 0 => 0
  | 1 => 1
  | n + 2 => fib n + fib (n + 1)

def ack : ℕ → ℕ → ℕ
  | 0, n => n + 1
  | m + 1, 0 => ack m 1
  | m + 1, n + 1 => ack m (ack (m + 1) n)
termination_by m n => (m, n)

theorem uses_abs (x : ℤ) :
  |x| ≥ 0 := by
  sorry

theorem _root_.top_level : True := trivial

mutual
  def isEven : ℕ → Bool
    | 0 => true
    | n + 1 => isOdd n
  def isOdd : ℕ → Bool
    | 0 => false
    | n + 1 => isEven n
end

noncomputable section
def noncomp : ℕ := Classical.choice ⟨0⟩
end

set_option maxHeartbeats 400000 in
theorem heavy.{u} {β : Sort u} (b : β) : b = b := by
  admit

open Finset in
theorem local_open : True := trivial

example : 1 + 1 = 2 := by decide

end Outer.Inner

theorem after_namespace : True := by
  exact trivial
"""


@pytest.fixture(scope="module")
def scanned():
    return scan(SOURCE)


def test_imports_and_names(scanned):
    assert scanned.imports == ("Mathlib.Data.Nat.Basic", "Aesop")
    names = [(d.kind, d.full_name) for d in scanned.declarations]
    assert names == [
        ("theorem", "Outer.Inner.add_zero'"),
        ("lemma", "Outer.Inner.helper₁"),
        ("def", "Outer.Inner.«weird name»"),  # as Lean prints the name
        ("theorem", "Outer.Inner.with_string"),
        ("instance", None),
        ("instance", "Outer.Inner.instNamed"),
        ("structure", "Outer.Inner.Point"),
        ("class inductive", "Outer.Inner.Good"),
        ("def", "Outer.Inner.fib"),
        ("def", "Outer.Inner.ack"),
        ("theorem", "Outer.Inner.uses_abs"),
        ("theorem", "top_level"),
        ("def", "Outer.Inner.isEven"),
        ("def", "Outer.Inner.isOdd"),
        ("def", "Outer.Inner.noncomp"),
        ("theorem", "Outer.Inner.heavy"),
        ("theorem", "Outer.Inner.local_open"),
        ("example", None),
        ("theorem", "after_namespace"),
    ]


def test_attributes_modifiers_doc(scanned):
    first = scanned.by_name["Outer.Inner.add_zero'"]
    assert first.attributes == ("simp", "norm_cast")
    assert first.modifiers == ("protected",)
    assert first.doc == "Doc of `add_zero'`. Mentions theorem and sorry."
    assert first.statement == "protected theorem add_zero' (n : ℕ) : n + 0 = n"
    assert first.signature == "(n : ℕ) : n + 0 = n"
    assert first.code.startswith("/-- Doc of") and first.code.endswith("simp")
    assert first.opens == ("Nat",)
    assert not first.has_sorry  # 'sorry' in the doc comment does not count
    helper = scanned.by_name["Outer.Inner.helper₁"]
    assert helper.modifiers == ("private",) and helper.namespace == ("Outer", "Inner")
    assert helper.variables == ("{α : Type*} [Inhabited α]",)
    assert scanned.by_name["Outer.Inner.Point"].variables == ()  # the section has ended


def test_headers_end_where_bodies_start(scanned):
    by = scanned.by_name
    assert by["Outer.Inner.Point"].statement == "structure Point"
    assert by["Outer.Inner.fib"].statement == "def fib : ℕ → ℕ"
    assert by["Outer.Inner.ack"].code.endswith("termination_by m n => (m, n)")
    assert by["Outer.Inner.uses_abs"].statement == "theorem uses_abs (x : ℤ) :\n  |x| ≥ 0"
    assert by["Outer.Inner.heavy"].signature == "{β : Sort u} (b : β) : b = b"
    assert by["Outer.Inner.instNamed"].signature == ": Inhabited Bool"
    assert by["Outer.Inner.with_string"].statement.endswith('"sorry" = "sorry"')


def test_sorry_positions(scanned):
    lines = SOURCE.splitlines()
    positions = [(s.line, s.column) for s in scanned.sorries]
    assert len(positions) == 2
    for line, column in positions:
        assert lines[line - 1][column:].startswith(("sorry", "admit"))
    assert scanned.by_name["Outer.Inner.uses_abs"].has_sorry
    assert scanned.by_name["Outer.Inner.heavy"].has_sorry
    assert not scanned.by_name["Outer.Inner.with_string"].has_sorry


def test_enclosing_and_prefix(scanned):
    heavy = scanned.by_name["Outer.Inner.heavy"]
    inside = scanned.enclosing(heavy.start.line + 1, 2)
    assert inside is heavy
    prefix = scanned.prefix_before(heavy)
    assert prefix.endswith(
        "noncomputable section\ndef noncomp : ℕ := Classical.choice ⟨0⟩\nend\n\n"
    )
    assert heavy.local_context == "set_option maxHeartbeats 400000 in\n"
    assert scanned.by_name["Outer.Inner.local_open"].local_context == "open Finset in\n"
    assert scanned.enclosing(1, 0) is None


def test_lexer_positions_and_unicode():
    tokens = tokenize("theorem h₀' : ∀ x ∈ S, x ≤ ‖y‖ := by\n  exact 'a'\n/- a /- nested -/ b -/ z")
    idents = [t.text for t in tokens if t.kind is Kind.IDENT]
    assert idents[:3] == ["theorem", "h₀'", "x"]
    assert "S" in idents and "z" in idents
    char = next(t for t in tokens if t.kind is Kind.CHAR)
    assert (char.text, char.line, char.column) == ("'a'", 2, 8)
    comment = next(t for t in tokens if t.kind is Kind.COMMENT)
    assert comment.text == "/- a /- nested -/ b -/"
    assert tokens[-1].text == "z" and tokens[-1].line == 3


def test_scanner_never_fails_on_broken_source():
    result = scan('theorem broken (x : Nat : x = x := by\n  "unterminated\n/- open comment')
    assert [d.name for d in result.declarations] == ["broken"]
    assert scan("").declarations == []


def test_module_system_header():
    result = scan(
        "module\n\npublic import Mathlib.Data.Nat\nimport Aesop\n\npublic section\n\n"
        "@[expose] public def f : Nat := 1\n\npublic theorem x : f = 1 := rfl\n\nend\n"
    )
    assert result.imports == ("Mathlib.Data.Nat", "Aesop")
    assert [(d.full_name, d.modifiers) for d in result.declarations] == [
        ("f", ("public",)),
        ("x", ("public",)),
    ]
    assert result.declarations[0].attributes == ("expose",)


def test_a_declaration_after_in_on_the_same_line_and_lets_in_statements():
    source = (
        "open Nat in theorem a (n : ℕ) : n + 0 = n := by simp\n"
        "theorem j : let x := 1; x = 1 := by intro x; rfl\n"
        "theorem k : have h : 1 = 1 := rfl; True := by sorry\n"
        "set_option maxHeartbeats 400 in theorem m : True := trivial\n"
    )
    found = scan(source)
    assert [d.name for d in found.declarations] == ["a", "j", "k", "m"]
    statements = {d.name: d.statement for d in found.declarations}
    assert statements["a"] == "theorem a (n : ℕ) : n + 0 = n"
    assert statements["j"] == "theorem j : let x := 1; x = 1"
    assert statements["k"] == "theorem k : have h : 1 = 1 := rfl; True"
    assert statements["m"] == "theorem m : True"
    assert len(found.sorries) == 1


@pytest.mark.parametrize(
    ("after", "kept"),
    [
        ("\nproof_wanted later : 1 = 1\n", "proof_wanted"),
        ('\nnotation3 "∑ " x => x\n', "notation3"),
        ("\ndeclare_syntax_cat myterm\n", "declare_syntax_cat"),
        ("\nregister_simp_attr my_simps\n", "register_simp_attr"),
        ('\nscoped[Demo] notation "ε" => 0\n', "scoped[Demo]"),
        ("\nwhere\n  helper : True := trivial\n", "where"),
        ("\ntermination_by 0\n", "termination_by"),
        ("\ndecreasing_by simp\n", "decreasing_by"),
        ("\n  end Demo\n", "end Demo"),
        ("\n/-- doc -/\n@[simp] theorem b : True := trivial\n", "/-- doc -/"),
        ("\n#check Nat\n", "#check"),
        ("\nopen Nat\n", "open Nat"),
        ("\nsome_new_command x\n", "some_new_command"),
    ],
)
def test_a_proof_ends_before_whatever_follows_it(after, kept):
    source = f"namespace Demo\ntheorem a : True := by\n  open Classical in\n  sorry{after}"
    declaration = scan(source).by_name["Demo.a"]
    start, end = declaration.proof_span
    assert source[start:end] == ":= by\n  open Classical in\n  sorry"
    assert kept in source[end:]
    assert declaration.scopes == (("namespace", "Demo"),)


def test_scopes_open_around_declarations_and_at_the_end():
    source = "namespace A.B\nsection s\ntheorem t : True := trivial\nend s\n  end A.B\nsection\n"
    scanned = scan(source)
    assert scanned.by_name["A.B.t"].scopes == (("namespace", "A.B"), ("section", "s"))
    assert scanned.open_scopes == (("section", ""),)  # the indented 'end A.B' closed A.B
    term = scan("theorem t : 1 = 1 :=\ncalc 1 = 1 := rfl\n  _ = 1 := rfl\n").declarations[0]
    start, end = term.proof_span
    assert term.source[start:end] == ":=\ncalc 1 = 1 := rfl\n  _ = 1 := rfl"
    matching = scan("def f : ℕ → ℕ\n  | _ => sorry\n").declarations[0]
    assert matching.proof_span is None


def test_a_command_after_a_comment_on_its_line_is_read():
    source = "/-! Part two -/ namespace X\n\n/- a -/ theorem bar : True := trivial\n\nend X\n"
    scanned = scan(source)
    assert [d.full_name for d in scanned.declarations] == ["X.bar"]
    assert scanned.open_scopes == ()
