"""The state after each traced step. Lean's REPL reports the state *before* each tactic; the state
after is derived from the tactic blocks of the source (``states_after``), as LeanDojo records it:
the state before the next step of the same block, and ``no goals`` after the last step of a block
that must close its goal (a ``by`` block, a ``·`` block, a ``case ... =>``).

LeanDojo Benchmark 4 records the rule: in ``IsGroupHom.inv_ker_one'`` the last tactic of a
``have ... := by`` block leaves ``no goals`` while the proof goes on, and in
``CancelDenoms.cancel_factors_lt`` a step followed by two ``·`` blocks leaves both their goals.
Checked here on real REPL answers replayed through the tracer, and on leanloop's own step
records for each kind of block."""

from __future__ import annotations

import pytest

from leanloop.data.records import NO_GOALS
from leanloop.lean.elaboration import TacticStep
from leanloop.tracing.records import steps_of
from leanloop.tracing.states import states_after
from leanloop.tracing.tracer import Tracer
from tests.test_tracing import demo_project, replaying


@pytest.fixture
def traced(tmp_path, transcripts):
    """File name -> the file as traced from the REPL's recorded answers."""
    project, exchanges = demo_project(tmp_path, transcripts)
    trace = Tracer(project, server_factory=replaying(exchanges)).trace()
    return {f.path: f for f in trace.files}


def traced_states(file):
    (declaration,) = file.scan.declarations
    steps = steps_of(declaration, file.tactics)
    after = states_after(steps, file.source)
    return [(s.tactic, s.goals_before, a) for s, a in zip(steps, after, strict=True)]


# -- real REPL answers -----------------------------------------------------------------------------


def test_the_last_tactic_of_a_calc_steps_by_block_closes_that_block(traced):
    file = traced["Calc.lean"]
    # Lean's own account: each `sorry` closes the goal of its own calc step
    assert [(s.goal, s.line, s.column) for s in file.sorries] == [
        ("⊢ 3 = 4", 2, 14),
        ("⊢ 4 = 5", 3, 14),
    ]
    calc = file.tactics[0].tactic
    assert calc.startswith("calc\n")
    assert traced_states(file) == [
        (calc, "⊢ 3 = 5", NO_GOALS),
        ("sorry", "⊢ 3 = 4", NO_GOALS),  # not '⊢ 4 = 5', the goal of the next calc step
        ("sorry", "⊢ 4 = 5", NO_GOALS),
    ]


def test_steps_of_one_tactic_sequence_lead_into_each_other(traced):
    # `def f : Nat := by have t := 37; exact t`
    assert traced_states(traced["Def.lean"]) == [
        ("have t := 37", "⊢ Nat", "t : Nat\n⊢ Nat"),
        ("exact t", "t : Nat\n⊢ Nat", NO_GOALS),
    ]


def test_a_lone_tactic_closes_the_proof(traced):
    assert traced_states(traced["Ex.lean"]) == [("sorry", "⊢ False", NO_GOALS)]


def position(source: str, offset: int) -> tuple[int, int]:
    """Lean's (line, column) of an offset."""
    return source.count("\n", 0, offset) + 1, offset - source.rfind("\n", 0, offset) - 1


# -- the rule on leanloop's own step records (the states are labels, not Lean's output) ----------


def steps_in(source: str, *tactics: tuple[str, str]) -> list[TacticStep]:
    """Steps for (tactic text, label of the state before), each found at its first place in
    ``source`` after the previous one's start."""
    steps, start = [], 0
    for text, before in tactics:
        at = source.index(text, start)
        line, column = position(source, at)
        end_line, end_column = position(source, at + len(text))
        steps.append(
            TacticStep(
                tactic=text,
                goals_before=before,
                line=line,
                column=column,
                end_line=end_line,
                end_column=end_column,
                used_constants=(),
                proof_state=0,
            )
        )
        start = at + 1
    return sorted(steps, key=lambda s: (s.line, s.column, -s.end_line, -s.end_column))


def after_of(source: str, *tactics: tuple[str, str]) -> list[tuple[str, str]]:
    steps = steps_in(source, *tactics)
    after = states_after(steps, source)
    return [(s.tactic.split("\n")[0], a) for s, a in zip(steps, after, strict=True)]


def test_a_block_that_may_leave_goals_leaves_those_of_its_enclosing_step():
    source = "example : P := by\n  try simp at h\n  exact h\n"
    assert after_of(
        source, ("try simp at h", "state 0"), ("simp at h", "state 0"), ("exact h", "state 1")
    ) == [("try simp at h", "state 1"), ("simp at h", "state 1"), ("exact h", NO_GOALS)]


def test_case_blocks_close_their_goal():
    source = (
        "example : P ∧ Q := by\n  constructor\n  case left => exact a\n  case right => exact b\n"
    )
    assert after_of(
        source,
        ("constructor", "state 0"),
        ("case left => exact a", "state 1"),
        ("exact a", "state 1 left"),
        ("case right => exact b", "state 2"),
        ("exact b", "state 2 right"),
    ) == [
        ("constructor", "state 1"),
        ("case left => exact a", "state 2"),
        ("exact a", NO_GOALS),
        ("case right => exact b", NO_GOALS),
        ("exact b", NO_GOALS),
    ]


def test_a_dedent_after_a_cdot_block_continues_the_block_around_it():
    source = (
        "example : Q := by\n"
        "  have h : P := by\n"
        "    constructor\n"
        "    · exact a\n"
        "    exact b\n"
        "  exact h\n"
    )
    have = "have h : P := by\n    constructor\n    · exact a\n    exact b"
    assert after_of(
        source,
        (have, "state 0"),
        ("constructor", "state 1"),
        ("exact a", "goal a"),
        ("exact b", "goal b"),
        ("exact h", "state 2"),
    ) == [
        ("have h : P := by", "state 2"),
        ("constructor", "goal a\n\ngoal b"),
        ("exact a", NO_GOALS),
        ("exact b", NO_GOALS),  # the last of the `have`'s block, not 'state 2'
        ("exact h", NO_GOALS),
    ]


def test_a_parenthesized_sequence_leads_to_the_next_step():
    source = "example : P := by\n  (simp; ring_nf)\n  exact h\n"
    assert after_of(
        source, ("simp", "state 0"), ("ring_nf", "state 1"), ("exact h", "state 2")
    ) == [("simp", "state 1"), ("ring_nf", "state 2"), ("exact h", NO_GOALS)]
