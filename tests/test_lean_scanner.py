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


# -- where a proof ends: commands at any column, on the proof's line, `... in` --------------------

from leanloop.lean.keywords import COMMAND_WORDS, HASH_BOTH, HASH_COMMANDS  # noqa: E402

# A command of each family after a proof, as it would follow one (each word with what it takes).
COMMANDS = {
    "open in": "open Nat in\ntheorem b : True := trivial",
    "set_option in": "set_option maxHeartbeats 400 in\n#check Nat",
    "run_meta": "run_meta pure ()",
    "run_elab": "run_elab pure ()",
    "run_cmd": "run_cmd pure ()",
    "binder_predicate": 'binder_predicate x " > " y:term => `($x > $y)',
    "#eval": "#eval 1 + 1",
    "elab_rules": "elab_rules : tactic | `(tactic| done) => pure ()",
    "initialize": "initialize pure ()",
    "declare_syntax_cat": "declare_syntax_cat myterm",
    "syntax": 'syntax "mine" : tactic',
    "notation3": 'notation3 "∑ " x => x',
    "add_decl_doc": "/-- The doc. -/\nadd_decl_doc Nat.succ",
    "compile_inductive": "compile_inductive% Nat",
    "assert_not_exists": "assert_not_exists Real",
    "suppress_compilation": "suppress_compilation",
    "unseal": "unseal Nat.add in\nexample : True := trivial",
    "irreducible_def": "irreducible_def k : ℕ := 1",
    "alias": "alias b := Nat.succ",
    "lemma": "lemma b : True := trivial",
    "proof_wanted": "proof_wanted b : 1 = 1",
    "attribute": "@[simp] lemma b : True := trivial",
    "doc comment": "/-- The next one. -/\ntheorem b : True := trivial",
    "modifiers": "private noncomputable def b : ℕ := 1",
    "scoped notation": 'scoped[Demo] notation "ε" => 0',
    "attribute in": "attribute [local simp] Nat.add_comm in\ntheorem b : True := trivial",
    "include in": "include h in\ntheorem b : True := trivial",
    "variable": "variable (n : ℕ)",
    "end": "end Demo",
    "#guard_msgs in": "#guard_msgs in\n#check Nat",
    "#print axioms": "#print axioms Nat.succ",
}


def _indented(command: str, column: int) -> str:
    return "\n".join(" " * column + line for line in command.split("\n"))


def _tactic_column(proof: str) -> int | None:
    if "by\n" not in proof:
        return None
    line = proof.split("by\n", 1)[1]
    return len(line) - len(line.lstrip())


def _span(source: str, name: str = "a"):
    declaration = next(d for d in scan(source).declarations if d.name == name)
    start, end = declaration.proof_span
    return source[start:end], declaration


@pytest.mark.parametrize("command", list(COMMANDS.values()), ids=list(COMMANDS))
@pytest.mark.parametrize(
    ("proof", "column"),
    [
        (":= by\n  sorry", 2),  # a command at the tactics' column
        (":= by\n    sorry", 2),  # left of the tactics' column (a command Lean starts there)
        (":= by\n  intro h\n  sorry", 0),
        (":=\n  by\n    sorry", 4),  # at the tactics' column of a `by` on its own line
        (":= sorry", 2),  # after a term, indented
        (":= sorry", 0),
    ],
    ids=["tactic column", "left of tactics", "column 0", "own-line by", "after term", "term 0"],
)
def test_a_command_after_a_proof_ends_it_at_any_column(proof, column, command):
    source = f"namespace Demo\ntheorem a : True {proof}\n{_indented(command, column)}\nend Demo\n"
    span, declaration = _span(source)
    if command.startswith(("open", "set_option")) and _tactic_column(proof) == column:
        # at the tactics' column `open Nat in` reads as a tactic, yet a command follows
        assert span == proof and "… in' " in declaration.proof_unclear
        return
    assert span == proof, span
    assert not declaration.proof_unclear
    after = source[declaration.proof_span[1] :]
    assert after.startswith("\n" + _indented(command, column))
    assert not declaration.code.endswith(command.split("\n")[-1])  # the declaration ends too


@pytest.mark.parametrize("command", list(COMMANDS.values()), ids=list(COMMANDS))
@pytest.mark.parametrize("proof", [":= sorry", ":= by sorry", ":= by simp; sorry", ":= id sorry"])
def test_a_command_on_the_proof_s_own_line_ends_it(proof, command):
    first, *rest = command.split("\n")
    source = f"theorem a : True {proof} {first}\n" + "".join(f"{line}\n" for line in rest)
    span, declaration = _span(source)
    assert span == proof and not declaration.proof_unclear
    assert source[declaration.end.offset :].startswith(f" {first}")


@pytest.mark.parametrize("word", sorted(COMMAND_WORDS))
def test_every_command_word_ends_a_proof_wherever_it_stands(word):
    for proof, before in (
        (":= by\n  sorry", "\n  "),
        (":= sorry", " "),
        (":= by\n    sorry", "\n  "),
    ):
        source = f"theorem a : True {proof}{before}{word} x\n"
        span, declaration = _span(source)
        assert span == proof, (word, proof)
        assert not declaration.proof_unclear


@pytest.mark.parametrize("word", sorted(HASH_COMMANDS))
def test_every_hash_command_ends_a_proof_or_is_unclear_where_it_is_a_tactic_too(word):
    after_term, _ = _span(f"theorem a : True := sorry #{word} x\n")
    assert after_term == ":= sorry"
    span, declaration = _span(f"theorem a : True := by\n  simp\n  #{word} x\n  sorry\n")
    assert span == ":= by\n  simp"
    if word in HASH_BOTH:  # Mathlib's `#check` tactic, where Mathlib is imported
        assert f"'#{word}' is a tactic" in declaration.proof_unclear
    else:
        assert not declaration.proof_unclear
    left, declaration = _span(f"theorem a : True := by\n    sorry\n  #{word} x\n")
    assert left == ":= by\n    sorry" and not declaration.proof_unclear


@pytest.mark.parametrize(
    ("source", "span"),
    [
        # tactics: `open`/`set_option ... in` at the block's column, after `by`, `;`, `<;>`,
        # a combinator, in a nested block
        ("theorem a : True := by\n  open Nat in\n  sorry\n  set_option x 1 in simp\n", None),
        ("theorem a : True := by open Nat in sorry\n", None),
        ("theorem a : True := by\n  simp; open Nat in sorry\n", None),
        ("theorem a : True := by\n  all_goals\n    open Nat in\n    sorry\n", None),
        ("theorem a : True := by\n  · simp\n    open Nat in simp\n  sorry\n", None),
        ("theorem a : True := by\n  open Nat in\n  set_option x 1 in\n  sorry\n", None),
        # terms: after ':=', after an operator, a term that goes on left of the tactics
        ("theorem a : True :=\n  open Nat in\n  sorry\n", None),
        ("theorem a : True := id <|\n  open Nat in sorry\n", None),
        ("theorem a : True := by simpa using\n  sorry\n", None),
        ("theorem a (s : Finset ℕ) : True := by\n  have : #s = #s := rfl\n  sorry\n", None),
        # a command: without `in`, after a finished term or tactic, left of the tactics
        ("theorem a : True := by\n  sorry\n  open Nat\n", ":= by\n  sorry"),
        ("theorem a : True := by\n    sorry\n  open Nat in\n  simp\n", ":= by\n    sorry"),
        ("theorem a : True := sorry\n  open Nat in\ntheorem b : True := trivial\n", ":= sorry"),
        ("theorem a : True := by\n    sorry\n  exact foo\n", ":= by\n    sorry"),
        ("theorem a : True := by intro h\n  sorry\n", ":= by intro h"),
    ],
)
def test_open_in_and_the_tactic_block_s_column(source, span):
    found, declaration = _span(source)
    start = source.index(":=")
    expected = span if span is not None else source[start:].rstrip("\n")
    assert found == expected
    assert not declaration.proof_unclear


@pytest.mark.parametrize(
    ("source", "unclear", "span"),
    [
        (
            "theorem a : True := by\n  sorry\n  open Nat in\ntheorem b : True := trivial\n",
            "stands where a tactic may but is followed by a command",
            ":= by\n  sorry",
        ),
        (
            "theorem a : True := sorry\n  open Nat in\n  simp\n",
            "follows a finished tactic or term but is followed by no command",
            ":= sorry",
        ),
        ("theorem a : True := foo #s\n", "'#s' after a finished term", ":= foo"),
        (
            "theorem a : True := by\n  simp\n  #my_command\n  sorry\n",
            "'#my_command' where a tactic may start",
            ":= by\n  simp",
        ),
        (
            "theorem a : True := by\n    exact foo\n  |>.trans bar\n",
            "'|>' starts a line left of the proof's tactics",
            ":= by\n    exact foo",
        ),
        (
            "theorem a : True := by\n  sorry; #check Nat\n",
            "'#check' is a tactic where the library declaring it is imported",
            ":= by\n  sorry;",
        ),
    ],
    ids=["open in before theorem", "open in after term", "card or command", "unknown #",
         "continued left of the tactics", "#check after ;"],
)  # fmt: skip
def test_where_both_readings_fit_the_end_is_unclear(source, unclear, span):
    found, declaration = _span(source)
    assert unclear in declaration.proof_unclear
    assert declaration.proof_unclear.startswith("line ")
    assert found == span  # the earlier end


def test_commands_found_where_a_proof_ended_are_read_as_commands():
    source = (
        "namespace Demo\ntheorem a : True := sorry private theorem b : True := trivial\n"
        "theorem c : True := by\n    sorry\n  open Nat in\n  theorem d : True := trivial\n"
        "theorem e : True := sorry open Nat\ntheorem f : True := by\n  sorry\n  run_meta pure ()\n"
        "end Demo\n"
    )
    scanned = scan(source)
    names = [(d.name, d.modifiers) for d in scanned.declarations]
    assert names == [("a", ()), ("b", ("private",)), ("c", ()), ("d", ()), ("e", ()), ("f", ())]
    by = scanned.by_name
    assert by["Demo.d"].local_context == "open Nat in\n  "  # d's, not c's
    assert by["Demo.c"].code.endswith("sorry") and by["Demo.a"].code.endswith("sorry")
    assert by["Demo.f"].code.endswith("sorry") and by["Demo.f"].has_sorry
    assert by["Demo.e"].code == "theorem e : True := sorry"
    assert by["Demo.f"].opens == ("Nat",)  # e's line opened Nat for what follows
    assert scanned.open_scopes == ()


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
@pytest.mark.parametrize("mark", ["", "\ufeff"])
def test_spans_with_crlf_a_byte_order_mark_tabs_and_no_final_newline(newline, mark):
    text = (
        "namespace Demo\n-- a\ttab\ntheorem a : True := by\n    sorry\n  open Nat in\n"
        "theorem b : True := trivial\ntheorem c : True := sorry #check c"
    )
    source = mark + text.replace("\n", newline)
    a, declaration = _span(source)
    assert a == ":= by" + newline + "    sorry" and not declaration.proof_unclear
    c, _ = _span(source, "c")
    assert c == ":= sorry"


def test_every_sorry_lean_reported_lies_in_its_proof_s_span(transcripts):
    """On every file Lean elaborated in the recorded REPL sessions, each ``sorry`` Lean found
    (with its position) is inside the proof span the scanner reads, which it is sure of; so is
    the end of each tactic Lean ran (a ``calc`` whose steps stand left of its column included)."""
    checked = 0
    for transcript in transcripts.values():
        for request, response in zip(transcript["requests"], transcript["responses"], strict=True):
            code = request.get("cmd")
            if code is None or "\n\n" in code:  # (the recorded positions of a text with blank
                continue  # lines skip them: they are not the text's own)
            lines = code.split("\n")

            def offset(position, lines=lines):
                return (
                    sum(len(line) + 1 for line in lines[: position["line"] - 1])
                    + position["column"]
                )

            scanned = scan(code)
            found = [(s["pos"], s["pos"]) for s in response.get("sorries", [])]
            found += [(t["pos"], t["endPos"]) for t in response.get("tactics", [])]
            for start, end in found:
                declaration = scanned.enclosing(start["line"], start["column"])
                assert declaration is not None and declaration.proof_span is not None, code
                span = declaration.proof_span
                assert span[0] <= offset(start) and offset(end) <= span[1], (code, start, end)
                assert not declaration.proof_unclear, (code, declaration.proof_unclear)
                checked += 1
    assert checked >= 20
