"""The replay environment on the real LeanDojo sample: recorded states and tactics give the
recorded next states (a step recorded inside a focusing block applies to the first goals and
leaves the others), everything else is rejected with a message saying so, and nothing is ever
called proved. Also: which theorems can be replayed, and why the others cannot."""

from __future__ import annotations

import pytest

from leanloop.data.records import NO_GOALS
from leanloop.database import DynamicDatabase
from leanloop.lean.errors import LeanRequestError, StaleStateError
from leanloop.lean.server import ProofFinished, ProofState, TacticFailed, TheoremSource
from leanloop.prover.replay import ReplayServer, StepIndex, goals_of, recorded_steps
from tests.helpers import sample_theorems, with_sorry

#: Theorems of the sample with traced tactics whose recorded steps do not chain from the first
#: state to 'no goals', and the state where the chain breaks (checked below).
UNREPLAYABLE = {
    # 'constructor <;> · exact ...' was not recorded (nor its run on 'case h.mp'); only the
    # inner exact on 'case h.mpr' was
    "NFA.toDFA_correct": "⊢ M.toDFA.evalFrom M.toDFA.start x ∈ M.toDFA.accept ↔",
    # after the goal refine_1 is closed, the goal refine_2 mentions its metavariable
    # ?refine_1; Lean prints it assigned (and wrapped anew) in the recorded step that follows
    "Cardinal.mk_bounded_subset_le": "?refine_1 a ∈",
    # the top-level 'calc' step of the proof was not recorded, only the steps inside it
    "AkraBazziRecurrence.eventually_atTop_sumTransform_ge": "g_nonneg : 0 ≤ g ↑n\n⊢ min",
    # the step 'have hU1 : U = (⋃ x, ↑x)ᶜ := by ...' was not recorded, only steps inside it
    "TopologicalSpace.NoetherianSpace.exists_open_ne_empty_le_irreducibleComponent": (
        "hU0 : U ≠ ∅\n⊢ ∃ o, IsOpen o ∧ o ≠ ∅ ∧ o ≤ Z"
    ),
}


@pytest.fixture(scope="module")
def traced(sample_dir):
    return [t for t in sample_theorems(sample_dir) if t.traced_tactics]


@pytest.fixture(scope="module")
def by_name(traced):
    return {t.full_name: t for t in traced}


def reachable(theorem, *, focused: bool = True) -> tuple[bool, set[tuple[str, ...]]]:
    """Whether recorded steps chain from the first state to no goals, and the states reached
    (by the replay's rule, or by whole states only with ``focused=False``)."""
    index = StepIndex(recorded_steps(theorem))
    start = goals_of(theorem.traced_tactics[0].state_before)
    seen, todo, done = {start}, [start], False
    while todo:
        goals = todo.pop()
        for step in index.applicable(goals):
            if not focused and step.before != goals:
                continue
            after = step.after + goals[len(step.before) :]
            done |= not after
            if after and after not in seen:
                seen.add(after)
                todo.append(after)
    return done, seen


def test_sample_replayability(traced):
    """85 theorems have traced tactics; 71 chain by whole states alone, 81 with the steps of
    focusing blocks applied to the first goals; the other 4 miss a step (see UNREPLAYABLE)."""
    assert len(traced) == 85
    assert sum(reachable(t, focused=False)[0] for t in traced) == 71
    replayable = {t.full_name for t in traced if reachable(t)[0]}
    assert len(replayable) == 81
    assert {t.full_name for t in traced} - replayable == set(UNREPLAYABLE)


@pytest.mark.parametrize("name", sorted(UNREPLAYABLE))
def test_why_a_theorem_cannot_be_replayed(by_name, name):
    theorem = by_name[name]
    _, seen = reachable(theorem)
    index = StepIndex(recorded_steps(theorem))
    dead_ends = ["\n\n".join(goals) for goals in seen if not index.applicable(goals)]
    assert any(UNREPLAYABLE[name] in state for state in dead_ends), dead_ends
    # and some recorded step applies to no state reached
    used = {step for goals in seen for step in index.applicable(goals)}
    assert set(recorded_steps(theorem)) - used


def test_recorded_steps_give_recorded_states(traced):
    server = ReplayServer(traced)
    assert not server.checks_with_lean and server.backend == "replay" and len(server) == 85
    theorem = traced[0]
    first, second = theorem.traced_tactics
    state = server.start_recorded(theorem)
    assert state.pretty == first.state_before
    # whitespace does not matter, the whole tactic does
    after = server.run_tactic(state, "  dsimp   [invFunIdAssoc] ")
    assert isinstance(after, ProofState) and after.pretty == first.state_after
    assert isinstance(server.run_tactic(after, second.tactic), ProofFinished)
    rejected = server.run_tactic(state, "simp")
    assert isinstance(rejected, TacticFailed)
    assert "not a recorded step" in rejected.error and theorem.full_name in rejected.error
    # a recorded tactic of another state is no step from this one
    assert isinstance(server.run_tactic(state, second.tactic), TacticFailed)


def test_a_focused_step_leaves_the_other_goals(by_name):
    theorem = by_name["CancelDenoms.cancel_factors_lt"]
    server = ReplayServer([theorem])
    rewrite, first, second = theorem.traced_tactics
    state = server.run_tactic(server.start_recorded(theorem), rewrite.tactic)
    assert isinstance(state, ProofState) and len(state.goals) == 2
    # recorded inside a focusing block from the first goal only: the second goal waits
    assert first.state_before == state.goals[0]
    rest = server.run_tactic(state, first.tactic)
    assert isinstance(rest, ProofState) and rest.goals == (second.state_before,)
    # the second goal's step does not apply while it is not first; on_goal-style it does
    assert isinstance(server.run_tactic(state, second.tactic), TacticFailed)
    other = server.run_tactic(state, second.tactic, goal=1)
    assert isinstance(other, ProofState) and other.goals == (first.state_before,)
    assert isinstance(server.run_tactic(rest, second.tactic), ProofFinished)


def test_steps_of_other_theorems_and_sorry_steps_are_not_replayed(traced):
    theorem, other = traced[0], traced[1]
    server = ReplayServer([theorem, with_sorry(other)])
    state = server.start_recorded(theorem)
    assert isinstance(server.run_tactic(state, other.traced_tactics[0].tactic), TacticFailed)
    sorry_state = server.start_recorded(with_sorry(other))
    assert isinstance(server.run_tactic(sorry_state, "sorry"), TacticFailed)


def test_starting_by_source_goal_or_record_and_refusing_code(traced, sample_dir):
    server = ReplayServer(traced)
    theorem = traced[3]
    first = theorem.traced_tactics[0].state_before
    by_source = server.start_theorem(
        TheoremSource(theorem.full_name, theorem.file_path, prefix="", signature="")
    )
    assert by_source.pretty == first == server.start_proof(first).pretty
    with pytest.raises(LeanRequestError, match="no recorded proof starting from this goal"):
        server.start_proof("1 = 2")
    with pytest.raises(LeanRequestError, match="is not in the replayed data"):
        server.start_theorem(TheoremSource("Nope.nope", "Nope.lean", prefix="", signature=""))
    with pytest.raises(LeanRequestError, match="cannot check Lean code"):
        server.check("example : True := trivial")
    with pytest.raises(LeanRequestError, match="cannot elaborate"):
        server.open_sorries("example : True := sorry")
    term_mode = next(t for t in sample_theorems(sample_dir) if not t.traced_tactics)
    with pytest.raises(LeanRequestError, match="no traced tactics"):
        ReplayServer([term_mode]).start_recorded(term_mode)


def test_states_are_owned_and_released(traced):
    server, other = ReplayServer(traced), ReplayServer(traced)
    state = server.start_recorded(traced[0])
    with pytest.raises(StaleStateError):
        other.run_tactic(state, traced[0].traced_tactics[0].tactic)
    server.release(state)
    with pytest.raises(LeanRequestError, match="released"):
        server.run_tactic(state, traced[0].traced_tactics[0].tactic)


def test_from_database_replays_the_same_steps(tmp_path, sample_dir, traced):
    database = DynamicDatabase(tmp_path / "replay.db")
    database.import_leandojo(sample_dir)
    from_db = ReplayServer.from_database(database)
    from_files = ReplayServer.from_dataset(sample_dir)
    assert len(from_db) == len(from_files) == 177
    for theorem in traced[:10]:
        a, b = from_db.start_recorded(theorem), from_files.start_recorded(theorem)
        assert a.goals == b.goals
        step = theorem.traced_tactics[0]
        after = from_db.run_tactic(a, step.tactic)
        expected = () if step.state_after == NO_GOALS else goals_of(step.state_after)
        assert (after.goals if isinstance(after, ProofState) else ()) == expected


def replay_mix(sample_dir, replayable: int) -> list:
    """``replayable`` theorems the replay finishes, one it cannot and a term-mode one."""
    everything = sample_theorems(sample_dir)
    traced = [t for t in everything if t.traced_tactics and t.full_name not in UNREPLAYABLE]
    unreplayable = next(t for t in everything if t.full_name in UNREPLAYABLE)
    term_mode = next(t for t in everything if not t.traced_tactics)
    return [*traced[:replayable], unreplayable, term_mode]
