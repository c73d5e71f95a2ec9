"""The screen of whole-proof candidates: every refusal, words in comments and strings not
counting, restated theorems (their statement compared, their proof taken out), plain bodies
passing through, and native code left to the axiom audit."""

from __future__ import annotations

import dataclasses
import json
import re
import textwrap
from pathlib import Path

import pytest

from leanloop.lean.screen import (
    HASH_COMMANDS,
    METAPROGRAM_ATTRIBUTES,
    METAPROGRAM_WORDS,
    RefusalCode,
    Screened,
    forbidden_in,
    forbidden_in_proof,
    screen_candidate,
)

STATEMENT = "theorem foo (n : ℕ) (h : 0 < n) : n + 0 = n"
PROOF = "theorem foo (n : ℕ) (h : 0 < n) : n + 0 = n := by\n  simp\n"


def refused(candidate: str, statement: str | None = STATEMENT) -> RefusalCode:
    screened = screen_candidate(candidate, statement)
    assert screened.body is None and screened.refusal is not None, screened
    assert "\n" not in screened.refusal.reason
    return screened.refusal.code


def passed(candidate: str, statement: str | None = STATEMENT) -> str:
    screened = screen_candidate(candidate, statement)
    assert screened.refusal is None and screened.body is not None, screened.refusal
    return screened.body


@pytest.fixture(scope="module")
def few_shot(fixtures: Path) -> list[dict]:
    """miniF2F statements with real proofs (their bodies open with a comment)."""
    path = fixtures / "minif2f" / "minif2f_valid_few_shot.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# -- refusals ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("candidate", "code"),
    [
        ("axiom cheat : False\n" + PROOF, RefusalCode.DECLARES_AXIOM),
        ("private axiom cheat : 0 < 1\n" + PROOF, RefusalCode.DECLARES_AXIOM),
        ("@[implemented_by g] def f (b : Bool) := b\n" + PROOF, RefusalCode.IMPLEMENTED_BY),
        ("@[simp, implemented_by g] def f (b : Bool) := b\n" + PROOF, RefusalCode.IMPLEMENTED_BY),
        ("attribute [implemented_by g] f\n" + PROOF, RefusalCode.IMPLEMENTED_BY),
        ("attribute [local implemented_by g] f\n" + PROOF, RefusalCode.IMPLEMENTED_BY),
        ('@[extern "lean_f"] opaque f : Bool → Bool\n' + PROOF, RefusalCode.EXTERN),
        ('attribute [extern "lean_f"] f\n' + PROOF, RefusalCode.EXTERN),
        ("set_option debug.skipKernelTC true in\n" + PROOF, RefusalCode.SKIPS_KERNEL_CHECK),
        ("set_option debug.skipKernelTC true\n" + PROOF, RefusalCode.SKIPS_KERNEL_CHECK),
        ("set_option debug.skipKernelTC true in\nsimp", RefusalCode.SKIPS_KERNEL_CHECK),
        ('macro "cheat" : tactic => `(tactic| simp)\n' + PROOF, RefusalCode.METAPROGRAM),
        ('notation "ℕ" => Unit\n' + PROOF, RefusalCode.METAPROGRAM),
        ('local notation "n" => 0\n' + PROOF, RefusalCode.METAPROGRAM),
        ('infixl:65 " + " => HSub.hSub\n' + PROOF, RefusalCode.METAPROGRAM),
        ("elab \"cheat\" : tactic => pure ()\n" + PROOF, RefusalCode.METAPROGRAM),
        ("run_cmd Lean.logInfo \"hi\"\n" + PROOF, RefusalCode.METAPROGRAM),
        ("#eval IO.println \"'foo' does not depend on any axioms\"\n" + PROOF,
         RefusalCode.METAPROGRAM),
        (PROOF + "#print axioms foo\n", RefusalCode.METAPROGRAM),
        (PROOF + "#exit\n", RefusalCode.METAPROGRAM),
        ("#guard_msgs in\n" + PROOF, RefusalCode.METAPROGRAM),
        ("@[command_elab Lean.Parser.Command.declaration] def e : Nat := 0\n" + PROOF,
         RefusalCode.METAPROGRAM),
        ("@[builtin_tactic Lean.Parser.Tactic.simp] def e : Nat := 0\n" + PROOF,
         RefusalCode.METAPROGRAM),
        ("run_tac Lean.Elab.Tactic.evalTactic (← `(tactic| simp))", RefusalCode.METAPROGRAM),
        ("simp\nsorry", RefusalCode.SORRY),
        ("theorem foo (n : ℕ) (h : 0 < n) : n + 0 = n := by\n  admit", RefusalCode.SORRY),
        ("exact sorryAx _ false", RefusalCode.SORRY),
        ("theorem foo (n : ℕ) (h : 1 < n) : n + 0 = n := by simp", RefusalCode.CHANGED_STATEMENT),
        ("theorem foo (n : ℕ) (h : 0 < n) : n = n := by simp", RefusalCode.CHANGED_STATEMENT),
        ("theorem bar (n : ℕ) (h : 0 < n) : n + 0 = n := by simp", RefusalCode.CHANGED_STATEMENT),
        ("def foo := 1", RefusalCode.CHANGED_STATEMENT),
        ("", RefusalCode.EMPTY),
        ("  \n\t\n", RefusalCode.EMPTY),
        ("-- nothing but a comment\n/- and another -/", RefusalCode.EMPTY),
        ("theorem foo (n : ℕ) (h : 0 < n) : n + 0 = n := by\n", RefusalCode.EMPTY),
        ("theorem foo (n : ℕ) (h : 0 < n) : n + 0 = n\n  | 0, h => rfl", RefusalCode.NO_PROOF),
    ],
)  # fmt: skip
def test_refusals(candidate, code):
    assert refused(candidate) is code


@pytest.mark.parametrize("word", sorted(METAPROGRAM_WORDS))
def test_every_metaprogram_command_is_refused(word):
    assert refused(f"{word} x\n{PROOF}") is RefusalCode.METAPROGRAM
    reason = screen_candidate(f"{word} x\n{PROOF}", STATEMENT).refusal.reason
    assert reason.startswith(f"line 1: {word} ")


@pytest.mark.parametrize("command", sorted(HASH_COMMANDS))
def test_every_hash_command_is_refused(command):
    assert refused(f"{PROOF}\n#{command} foo") is RefusalCode.METAPROGRAM
    # `#` apart from the word is not the command
    assert passed(f"{PROOF}\n-- # {command}") == "simp"


@pytest.mark.parametrize("attribute", sorted(METAPROGRAM_ATTRIBUTES))
def test_every_metaprogram_attribute_is_refused(attribute):
    assert refused(f"@[{attribute} x] def d := 1\n{PROOF}") is RefusalCode.METAPROGRAM
    assert refused(f"attribute [{attribute} x] d\n{PROOF}") is RefusalCode.METAPROGRAM


def test_the_refusal_says_where_and_the_worst_comes_first():
    candidate = "theorem foo (n : ℕ) (h : 0 < n) : n + 0 = n := by\n  sorry\naxiom cheat : False"
    refusal = screen_candidate(candidate, STATEMENT).refusal
    assert refusal is not None and refusal.code is RefusalCode.DECLARES_AXIOM
    assert refusal.line == 3 and refusal.reason == "line 3: declares axiom cheat"
    refusal = screen_candidate("simp\n\n  sorry", STATEMENT).refusal
    assert refusal is not None and refusal.reason == "line 3: uses sorry"


def test_a_changed_statement_shows_both():
    refusal = screen_candidate(
        "theorem foo (n : ℕ) (h : 1 < n) : n + 0 = n := by\n  simp", STATEMENT
    ).refusal
    assert refusal is not None
    assert "(h : 1 < n)" in refusal.reason and "(h : 0 < n)" in refusal.reason
    refusal = screen_candidate("lemma bar : True := trivial", STATEMENT).refusal
    assert refusal is not None and refusal.reason.startswith("restates no theorem foo")


@pytest.mark.parametrize(
    "candidate",
    [
        # a hypothesis added, dropped, renamed, or its type changed
        "theorem foo (n : ℕ) (h : 0 < n) (h' : n < 5) : n + 0 = n := by simp",
        "theorem foo (n : ℕ) : n + 0 = n := by simp",
        "theorem foo (m : ℕ) (h : 0 < m) : m + 0 = m := by simp",
        "theorem foo (n : ℤ) (h : 0 < n) : n + 0 = n := by simp",
        # the conclusion changed
        "theorem foo (n : ℕ) (h : 0 < n) : n + 0 = n + 0 := by simp",
        "theorem foo (n : ℕ) (h : 0 < n) : n + 0 ≤ n := by simp",
        # stated as an example, which has no name
        "example (n : ℕ) (h : 0 < n) : n + 0 = n := by simp",
    ],
)
def test_changed_statements_are_refused(candidate):
    assert refused(candidate) is RefusalCode.CHANGED_STATEMENT


def test_changed_real_statements_are_refused(few_shot):
    changed = 0
    for row in few_shot:
        statement = row["formal_statement"]
        # change the first number of the conclusion (after the last ' : ')
        head, sep, conclusion = statement.rpartition(" : ")
        new = re.sub(r"\d+", lambda m: str(int(m.group()) + 1), conclusion, count=1)
        if new == conclusion:
            continue
        changed += 1
        assert refused(head + sep + new + row["formal_proof"], statement) is (
            RefusalCode.CHANGED_STATEMENT
        )
    assert changed >= 30


# -- what does not count ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "candidate",
    [
        "-- this is not an axiom, and no sorry either: macro #eval implemented_by\nsimp",
        "/- axiom sorry admit elab run_cmd #print debug.skipKernelTC\n /- nested sorry -/ -/\nsimp",
        "/-- a doc comment naming sorry -/\nsimp",
        'have : "axiom sorry #eval @[extern]".length = 27 := by rfl\nsimp',
        "have h := my_sorry_lemma\nexact axiom_free h",  # words inside identifiers
        "exact Nat.lt_irrefl _ (by simp : ¬ (0 < 0)).elim",
        "simp [foo] at h ⊢ -- sorry for the long proof",
    ],
)
def test_comments_strings_and_longer_names_do_not_count(candidate):
    assert passed(candidate) == candidate


def test_a_comment_naming_axiom_in_full_code_is_fine():
    candidate = (
        "/- no axiom is declared here -/\n"
        "theorem foo (n : ℕ) (h : 0 < n) : n + 0 = n := by\n"
        "  -- sorry, this is simple\n"
        "  simp\n"
    )
    assert passed(candidate) == "-- sorry, this is simple\nsimp"


# -- restated theorems ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "candidate",
    [
        "theorem foo (n : ℕ) (h : 0 < n) : n + 0 = n := by\n  simp\n  omega",
        "theorem  foo\n    (n : ℕ)\n    (h : 0 < n) :\n    n + 0 = n := by\n  simp\n  omega",
        "lemma foo (n:ℕ) (h:0<n) : n+0 = n := by\n    simp\n    omega",
        "theorem foo (n : ℕ) -- the number\n  (h : 0 < n) : n + 0 = n := by\n  simp\n  omega\n",
        "import Mathlib\nopen Nat\n\ntheorem foo (n : ℕ) (h : 0 < n) : n + 0 = n := by\n  simp\n"
        "  omega\n\n#check foo",
        "lemma helper : True := trivial\n\ntheorem foo (n : ℕ) (h : 0 < n) : n + 0 = n := by\n"
        "  simp\n  omega",
        "namespace X\nend X\nset_option maxHeartbeats 400000 in\n"
        "theorem foo (n : ℕ) (h : 0 < n) : n + 0 = n := by\n  simp\n  omega",
    ],
)
def test_restated_statement_differing_in_layout_gives_its_body(candidate):
    assert passed(candidate) == "simp\nomega"
    assert passed(candidate, STATEMENT + " := by") == "simp\nomega"
    assert passed(candidate, "set_option maxHeartbeats 400000 in\n" + STATEMENT) == "simp\nomega"


def test_the_name_is_compared_as_a_full_name():
    statement = "theorem Nat.foo (n : ℕ) : n + 0 = n"
    assert passed("namespace Nat\ntheorem foo (n : ℕ) : n + 0 = n := by simp\nend Nat", statement)
    assert passed("theorem Nat.foo (n : ℕ) : n + 0 = n := by simp", statement) == "simp"
    assert refused("theorem foo (n : ℕ) : n + 0 = n := by simp", statement) is (
        RefusalCode.CHANGED_STATEMENT
    )


def test_proof_layouts():
    head = "theorem foo (n : ℕ) (h : 0 < n) : n + 0 = n"
    assert passed(f"{head} := by simp") == "simp"
    assert passed(f"{head} := by simp; omega") == "simp; omega"
    assert passed(f"{head} := by -- easy\n  simp\n  omega") == "simp\nomega"
    nested = f"{head} := by\n  cases n with\n  | zero => simp\n  | succ m =>\n    simp"
    assert passed(nested) == "cases n with\n| zero => simp\n| succ m =>\n  simp"
    # a term proof is checked as `exact` of the term
    assert passed(f"{head} :=\n  Nat.add_zero n") == "exact\n  Nat.add_zero n"
    assert passed(f"{head} := Nat.add_zero n") == "exact\n  Nat.add_zero n"
    term = f"{head} := fun_proof n\n  (by simp)"  # the term's own layout is kept
    assert passed(term) == "exact\n" + " " * 47 + "fun_proof n\n  (by simp)"
    # what follows the proof is not part of it
    assert passed(f"{head} := by\n  simp\ntermination_by n") == "simp"
    assert passed(f"{head} := by\n  simp\n\ntheorem other : True := trivial") == "simp"


def test_goals_are_stated_as_examples():
    statement = "example : 2 + 2 = 4"
    assert passed("example : 2 + 2 = 4 := by\n  norm_num", statement) == "norm_num"
    assert passed("theorem t : 2 + 2 = 4 := by norm_num", statement) == "norm_num"
    assert refused("example : 2 + 2 = 5 := by norm_num", statement) is (
        RefusalCode.CHANGED_STATEMENT
    )


def test_without_a_statement_the_last_theorem_is_taken():
    candidate = "lemma a : True := trivial\ntheorem b : 1 = 1 := by\n  rfl"
    assert passed(candidate, None) == "rfl"
    # a goal state is no statement either
    assert passed(candidate, "n : ℕ\n⊢ n + 0 = n") == "rfl"


def test_real_restatements_give_the_real_proofs(few_shot):
    """miniF2F statements with their proofs: restated as written, or with every binder on a
    line of its own, the body is the proof, dedented."""
    assert len(few_shot) == 67
    for row in few_shot:
        statement, proof = row["formal_statement"], row["formal_proof"]
        expected = textwrap.dedent(proof).strip("\n")
        assert passed(statement + proof, statement) == expected, row["name"]
        reflowed = statement.replace(" (", "\n    (").replace(" :\n", "\n  :\n")
        assert passed(reflowed + proof, statement) == expected, row["name"]
        assert passed(reflowed + proof, statement.removesuffix(" := by\n")) == expected


def test_real_model_outputs_pass_the_screen(fixtures):
    """Goedel-Prover's whole files (imports, options, opens, comments and the theorem) give the
    proof after their theorem's ':= by'."""
    path = fixtures / "kimina_verdicts" / "verdicts.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 78
    for row in rows:
        code = row["code"]
        match = re.search(r"^theorem .*?(?= *:= by)", code, re.M | re.S)
        assert match is not None, row["name"]
        body = passed(code, match.group())
        after = code[match.end() :].split(":= by", 1)[1]
        first = next(line.strip() for line in after.splitlines() if line.strip())
        assert body.splitlines()[0] == first, row["name"]


# -- plain bodies and native code -------------------------------------------------------------


def test_a_plain_body_passes_unchanged(few_shot):
    for row in few_shot:
        proof = row["formal_proof"]
        assert passed(proof, row["formal_statement"]) == proof
    odd = "  intro n\n    simp\n\n"
    assert passed(odd) == odd


@pytest.mark.parametrize(
    "candidate",
    [
        "native_decide",
        "decide +native",
        "bv_decide",
        "norm_num\nnative_decide",
        "theorem foo (n : ℕ) (h : 0 < n) : n + 0 = n := by\n  decide +native",
    ],
)
def test_native_code_is_left_to_the_axiom_audit(candidate):
    body = passed(candidate)
    assert "native" in body or "bv_decide" in body


def test_screened_is_a_frozen_value():
    screened = screen_candidate("simp")
    assert screened == Screened("simp") and screened.passed
    with pytest.raises(dataclasses.FrozenInstanceError):
        screened.body = "ring"  # type: ignore[misc]
    assert RefusalCode.EMPTY == "empty" and not screen_candidate("").passed


def test_a_raw_string_or_an_open_string_hides_nothing_from_the_screen():
    plain = "run_tac do\n  Lean.Elab.Tactic.closeMainGoal `x (Lean.mkConst `evil)"
    # a raw string ends at its first quote: what follows is read, and refused
    hidden = 'have _h : r"\\" = "\\\\" := rfl\n' + plain + '\n-- "'
    assert screen_candidate(hidden, "theorem t : False").refusal.code is RefusalCode.METAPROGRAM
    hashed = 'have _h : r#"a"b"# = "a\\"b" := rfl\naxiom cheat : False'
    assert screen_candidate(hashed).refusal.code is RefusalCode.DECLARES_AXIOM
    # a string or comment never closed would hide the rest: refused as such
    for text in ['exact "abc\n' + plain, "trivial /- " + plain]:
        refused = screen_candidate(text).refusal
        assert refused.code is RefusalCode.UNTERMINATED and "never closed" in refused.reason
    assert forbidden_in("simp [foo] at h ⊢") is None
    assert forbidden_in("run_tac pure ()").code is RefusalCode.METAPROGRAM


@pytest.mark.parametrize(
    "hidden",
    [
        's!"{(by run_tac (pure ()); exact 0 : Nat)}"',  # code in an interpolation hole
        "let rec /--/ -- -/ g : Nat := by run_tac (pure ())",  # '/--' opens a doc comment
        'have «\n"» : True := trivial\nrun_tac (pure ())',  # «...» spans lines
    ],
)
def test_what_lean_reads_as_code_the_screen_reads_too(hidden):
    refusal = forbidden_in(hidden)
    assert refusal is not None and refusal.code is RefusalCode.METAPROGRAM, hidden


@pytest.mark.parametrize(
    ("proof", "word"),
    [
        ("trivial\nend X", "end"),
        ("trivial\nvariable (hf : False)", "variable"),
        ("trivial\ninclude hf", "include"),
        ("open Nat\nsimp", "open without 'in'"),
        ("set_option maxHeartbeats 0\nsimp", "set_option without 'in'"),
        ("trivial\n#eval 1", "#eval"),
        ("trivial\ntheorem cheat : True := trivial", "theorem"),
    ],
)
def test_a_proof_may_not_hold_a_command(proof, word):
    refusal = forbidden_in_proof(proof)
    assert refusal is not None and word in refusal.reason, proof


@pytest.mark.parametrize(
    "proof",
    [
        "open Nat in simp",
        "open scoped Classical in\n  exact em _",
        "set_option maxRecDepth 2000 in\n  decide",
        "calc #s = 2 := by simp\n  _ = 2 := rfl",  # #s: a finset's card, not a command
        "exact (#[1, 2] : Array ℕ).size_pos",
        "#adaptation_note /-- a note -/\nsimp",
        "cases h with\n| inl a => exact a\n| inr b => exact b",
        "exact fun ⟨a, b⟩ => ⟨b, a⟩",
    ],
)
def test_ordinary_proofs_pass(proof):
    assert forbidden_in_proof(proof) is None, proof


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("exact eval% (2 + 2 : Nat)", RefusalCode.METAPROGRAM),
        ("exact unsafe (fun _ => trivial) ()", RefusalCode.METAPROGRAM),
        ("#guard 1 = 1", RefusalCode.METAPROGRAM),
        ("@[norm_num Nat.succ _] def ext := 0", RefusalCode.METAPROGRAM),
        ("exact (`debug.skipKernelTC).isAnonymous", RefusalCode.SKIPS_KERNEL_CHECK),
    ],
)
def test_more_ways_to_run_code(text, code):
    assert forbidden_in(text).code is code
