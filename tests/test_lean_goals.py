"""Reading pretty-printed proof states back into Lean source (leanloop.lean.goals).

The states come from the real LeanDojo sample (``state_before``, Lean's pretty-printed goals).
Where a case does not occur there, the input is built from real pieces or written out by hand,
and says so: those inputs are test data, not a record of Lean's output."""

from __future__ import annotations

import re

import pytest

from leanloop.lean.goals import (
    Goal,
    Hypothesis,
    goal_binders,
    goal_statement,
    goal_to_source,
    parse_goal,
    split_value,
    with_intros,
)
from tests.helpers import sample_theorems

_PAIRS = {"(": ")", "[": "]", "{": "}", "⟨": "⟩", "⦃": "⦄"}
_CLOSERS = set(_PAIRS.values())
_IDENT = re.compile(r"^[^\s:()\[\]{}⟨⟩⦃⦄,✝]+$")
_NAME_LINE = re.compile(r"^[^\s:()\[\]{}⟨⟩,]+(?: [^\s:()\[\]{}⟨⟩,]+)* :$")
_PROOF = re.compile(r" := by (?:intro ([^;]*); )?sorry$")


@pytest.fixture(scope="module")
def states(sample_dir) -> list[str]:
    found = [
        step.state_before
        for theorem in sample_theorems(sample_dir)
        for step in theorem.traced_tactics
    ]
    assert len(found) == 435
    return found


def collapse(text: str) -> str:
    return " ".join(text.split())


def balanced(text: str) -> bool:
    stack = []
    for char in text:
        if char in _PAIRS:
            stack.append(_PAIRS[char])
        elif char in _CLOSERS and (not stack or stack.pop() != char):
            return False
    return not stack


def group_end(text: str, start: int) -> int:
    """Index just past the bracket group opening at ``text[start]``."""
    depth = 0
    for index in range(start, len(text)):
        if text[index] in _PAIRS:
            depth += 1
        elif text[index] in _CLOSERS:
            depth -= 1
            if depth == 0:
                return index + 1
    raise AssertionError(f"unclosed group in {text[start:]!r}")


def top_level(text: str, separator: str) -> list[int]:
    """Positions of ``separator`` outside any bracket in ``text``."""
    found, depth = [], 0
    for index, char in enumerate(text):
        if char in _PAIRS:
            depth += 1
        elif char in _CLOSERS:
            depth -= 1
        elif depth == 0 and text.startswith(separator, index):
            found.append(index)
    return found


def read_binder(group: str) -> list[tuple[str | None, str]]:
    """``(a b : T)`` / ``{a : T}`` / ``[T]`` as (name, type) per name (None for ``[T]``)."""
    inner = group[1:-1]
    if group[0] == "[":
        return [(None, inner)]
    colon = top_level(inner, " : ")[0]
    return [(name, inner[colon + 3 :]) for name in inner[:colon].split()]


def read_source(source: str):
    """Read ``goal_to_source``'s output back: the binders (raw), hypotheses as (name, type,
    value) per name in order, the target, and the proof's intros."""
    assert source.startswith("example")
    proof = _PROOF.search(source)
    assert proof, source[-200:]
    intros = proof.group(1).split() if proof.group(1) else []
    rest = source[len("example") : proof.start()]
    binders = []
    while not rest.startswith(" : "):
        assert rest[0] == " " and rest[1] in "([{", rest[:80]
        end = group_end(rest, 1)
        binders.append(rest[1:end])
        rest = rest[end:]
    rest = rest[len(" : ") :]
    hypotheses = [(n, t, None) for b in binders for n, t in read_binder(b)]
    telescope = 0
    while telescope < len(intros):
        if rest.startswith("let "):
            name, _, rest = rest[len("let ") :].partition(" : ")
            assign = top_level(rest, " := ")[0]
            typ, rest = rest[:assign], rest[assign + len(" := ") :]
            end = group_end(rest, 0)
            hypotheses.append((name, typ, rest[1 : end - 1]))
            assert rest[end : end + 2] == "; "
            rest = rest[end + 2 :]
            telescope += 1
        else:
            assert rest.startswith("∀ "), rest[:80]
            rest = rest[len("∀ ") :]
            while not rest.startswith(","):
                end = group_end(rest, 0)
                hypotheses.extend((n, t, None) for n, t in read_binder(rest[:end]))
                telescope += len(read_binder(rest[:end]))
                rest = rest[end:].removeprefix(" ")
            rest = rest[len(", ") :]
    assert telescope == len(intros)
    return binders, hypotheses, rest, intros


def rename(text: str, renames: dict[str, str]) -> str:
    for old, new in renames.items():
        text = re.sub(rf"(?<![\w.']){re.escape(old)}(?![\w'⁰¹²³⁴⁵⁶⁷⁸⁹])", new, text)
    return text


def assert_reads_back(state: str) -> None:
    """The source states the same hypotheses (names, types, let-values, in order) and target
    as ``state``, up to fresh names for inaccessible ones and whitespace."""
    goal = parse_goal(state)
    source = goal_to_source(state)
    _, read, target, intros = read_source(source)
    expected = [(n, h.type, h.value) for h in goal.hypotheses for n in h.names]
    assert len(read) == len(expected), source
    renames = {}
    for (old, _, value), (new, _, _) in zip(expected, read, strict=True):
        if new is None:  # an anonymous instance
            assert old.startswith("inst✝") and value is None
        elif "✝" in old:
            renames[old] = new
        else:
            assert new == old
    telescope_names = [name or "_" for name, _, _ in read[len(read) - len(intros) :]]
    assert intros == telescope_names
    for (_, typ, value), (name, read_type, read_value) in zip(expected, read, strict=True):
        assert name is None or _IDENT.match(name), name
        assert collapse(rename(typ, renames)) == collapse(read_type)
        assert (value is None) == (read_value is None)
        if value is not None:
            assert collapse(rename(value, renames)) == collapse(read_value)
    assert collapse(rename(goal.target, renames)) == collapse(target)
    assert bool(intros) == any(h.value is not None for h in goal.hypotheses)


# --- 1. hypotheses whose type wraps right after ``name :`` -----------------------------------


def wrapped(states: list[str]) -> list[str]:
    return [s for s in states if any(_NAME_LINE.match(line) for line in parse_lines(s))]


def parse_lines(state: str) -> list[str]:
    return state.strip().split("\n\n")[0].split("\n")


def test_wrapped_name_lines_start_new_hypotheses(states):
    affected = wrapped(states)
    assert len(affected) == 18
    for state in affected:
        goal = parse_goal(state)
        lines = parse_lines(state)
        starts = [
            line.partition(" :")[0].split()
            for line in lines
            if line and not line[0].isspace() and not line.startswith(("⊢", "case "))
        ]
        assert [list(h.names) for h in goal.hypotheses] == starts
        for hypothesis in goal.hypotheses:
            assert hypothesis.type and ":" not in " ".join(hypothesis.names)
        binders, _ = goal_binders(goal)
        names_out = []
        for binder in binders:
            assert balanced(binder), binder
            if binder.startswith("["):
                continue
            assert len(top_level(binder[1:-1], " : ")) == 1, binder
            names = binder[1:-1].partition(" : ")[0].split()
            assert all(_IDENT.match(n) for n in names), binder
            names_out.extend(names)
        # no hypothesis swallowed by the one before it
        assert len(names_out) == len(set(names_out))
        for line in lines:
            if _NAME_LINE.match(line):
                assert line[:-2].split()[0] in names_out


def test_wrapped_hypothesis_keeps_its_type(states):
    state = next(s for s in wrapped(states) if "\nhcd :\n" in s)
    goal = parse_goal(state)
    names = [h.names for h in goal.hypotheses]
    assert ("c1", "c2", "d1", "d2") in names and ("hcd",) in names
    hcd = next(h for h in goal.hypotheses if h.names == ("hcd",))
    assert hcd.type.startswith("(((c1, c2), d1, d2).1.1 * ") and hcd.value is None
    assert "\n" not in hcd.type and "  " not in hcd.type
    source = goal_to_source(state)
    assert "(c1 c2 d1 d2 : ℕ) (hcd : (((c1, c2), d1, d2).1.1 * " in source


def test_continuation_lines_still_join():
    goal = parse_goal("f g : ℕ →\n    ℕ\nhx :\n  f 0 =\n    g 0\n⊢ f = g")
    assert goal.hypotheses == (
        Hypothesis(("f", "g"), "ℕ → ℕ"),
        Hypothesis(("hx",), "f 0 = g 0"),
    )


# --- 2. ``:=`` inside brackets is not a let-value -------------------------------------------


def test_split_value_only_at_depth_zero():
    assert split_value("p = { fst := g, snd := k }") == ("p = { fst := g, snd := k }", None)
    assert split_value("ℕ := 5") == ("ℕ", "5")
    assert split_value("f ⟨a, (b := c)⟩ [d := e] := { x := 1 }") == (
        "f ⟨a, (b := c)⟩ [d := e]",
        "{ x := 1 }",
    )
    # a let or have inside the type owns its ``:=``
    assert split_value("let y := 3; y = 3") == ("let y := 3; y = 3", None)
    assert split_value("let y := 3; y = 3 := rfl") == ("let y := 3; y = 3", "rfl")
    assert split_value("have := h; p") == ("have := h; p", None)
    # names that merely contain the keywords are not binders
    assert split_value("outlet x := v") == ("outlet x", "v")


def test_structure_instance_in_hypothesis_type(states):
    # built from a real state: its target, which has a structure instance, moved into a
    # hypothesis (as ``intro`` would put it); not Lean's output
    real = next(s for s in states if "⊢ { proj := b, snd := x } ∈" in s)
    lines = real.split("\n")
    target = lines[-1][len("⊢ ") :]
    state = "\n".join([*lines[:-1], f"h : {target}", "⊢ False"])
    goal = parse_goal(state)
    assert goal.hypotheses[-1] == Hypothesis(("h",), target)
    source = goal_to_source(state)
    assert f"(h : {target}) : False := by sorry" in source
    assert_reads_back(state)


def test_structure_instance_in_the_example_of_the_report():
    # written by hand, the shape reported in the bug
    source = goal_to_source("g k : ℕ\np : ℕ × ℕ\nh : p = { fst := g, snd := k }\n⊢ p.1 = g")
    assert source == (
        "example (g k : ℕ) (p : ℕ × ℕ) (h : p = { fst := g, snd := k }) : p.1 = g := by sorry"
    )


def test_real_let_values_with_structure_instances(states):
    state = next(s for s in states if "\nthis : CatCommSq H₂ eL.functor" in s)
    goal = parse_goal(state)
    this = next(h for h in goal.hypotheses if h.names == ("this",))
    assert this.type == "CatCommSq H₂ eL.functor eR.functor H₃"
    assert this.value == "{ iso' := w' }"


# --- 3. let-values are kept ------------------------------------------------------------------


def test_let_value_kept_in_a_telescope():
    # written by hand: the case of the report
    assert goal_to_source("x : ℕ := 5\n⊢ x = 5") == (
        "example : let x : ℕ := (5); x = 5 := by intro x; sorry"
    )
    # hypotheses after a let may depend on it: they move into the telescope, in order
    source = goal_to_source(
        "n : ℕ\nx : ℕ := n + 1\nh : 0 < x\nm✝ : ℕ\ninst✝ : NeZero x\n⊢ x ≠ 0",
        declaration="theorem t",
    )
    assert source == (
        "theorem t (n : ℕ) : let x : ℕ := (n + 1); ∀ (h : 0 < x) (m_1 : ℕ) [NeZero x], x ≠ 0"
        " := by intro x h m_1 _; sorry"
    )


def test_real_let_states(states):
    state = next(s for s in states if "\nι : Set (Set α) := irreducibleComponents α \\ {Z}" in s)
    source = goal_to_source(state)
    assert "(H : Z ∈ irreducibleComponents α) : let ι : Set (Set α) := (" in source
    assert "let ι : Set (Set α) := (irreducibleComponents α \\ {Z}); " in source
    assert source.endswith(":= by intro ι; sorry")
    # a let whose value wraps onto the next line after ``name : type :=``
    state = next(s for s in states if "\nα : (L₁ ⋙ eL.functor) ⋙ eL.inverse ≅ L₁ :=\n" in s)
    alpha = next(h for h in parse_goal(state).hypotheses if h.names == ("α",))
    assert alpha.type == "(L₁ ⋙ eL.functor) ⋙ eL.inverse ≅ L₁"
    assert alpha.value is not None and alpha.value.startswith("L₁.associator eL.functor")
    statement = goal_statement(parse_goal(state))
    assert statement.intros == ("this_1", "hw'", "this", "w''", "α")
    assert "(w'_1 : TwoSquare H₂ L₂ R₂ H₃)" in statement.binders
    assert statement.target.startswith("let this_1 : CatCommSq H₂ eL.functor eR.functor H₃")
    assert "∀ (hw' : CatCommSq.iso H₂ eL.functor eR.functor H₃ = w'), let this : " in (
        statement.target
    )
    assert statement.target.endswith("; w.GuitartExact")


def test_proofs_after_intros():
    assert with_intros("by sorry", ()) == "by sorry"
    assert with_intros("by simp", ("x", "_")) == "by intro x _; simp"
    assert with_intros("by\n  simp\n  ring", ("x",)) == "by intro x; exact (by\n  simp\n  ring)"
    assert with_intros("rfl", ("x",)) == "by intro x; exact (rfl)"
    assert goal_to_source("x : ℕ := 5\n⊢ x = 5", proof="rfl").endswith(":= by intro x; exact (rfl)")


def test_ordinary_states_keep_their_shape():
    state = "case succ\nn✝ : ℕ\nih : n✝ + 0 = n✝\ninst✝ : Fintype α\n⊢ n✝ + 1 = n✝ + 1"
    assert goal_to_source(state, implicit=True) == (
        "example {n_1 : ℕ} {ih : n_1 + 0 = n_1} [Fintype α] : n_1 + 1 = n_1 + 1 := by sorry"
    )
    assert goal_statement(parse_goal(state)).intros == ()
    assert goal_binders(Goal(None, (), "True")) == ([], "True")


# --- every state of the sample ---------------------------------------------------------------


def test_every_sample_state_reads_back(states):
    for state in states:
        assert_reads_back(state)


def test_every_sample_binder_is_well_formed(states):
    for state in states:
        binders, _, _, _ = read_source(goal_to_source(state))
        for binder in binders:
            assert balanced(binder), binder
            assert "✝" not in binder.partition(" : ")[0], binder
