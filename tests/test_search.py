"""Proof search: on the real LeanDojo sample through the replay environment (every recorded proof
is found, every proof returned replays, outcomes are 'replayed', budgets hold, failures of the
generator or the server end one theorem as 'error'), and its order of expansion on a toy
environment whose scores are chosen by hand."""

from __future__ import annotations

import itertools
import time

import pytest

from leanloop.data.prompt import collapse_whitespace
from leanloop.data.records import AttemptStatus
from leanloop.database import DynamicDatabase
from leanloop.errors import LeanloopError
from leanloop.lean.errors import LeanRequestError, ServerCrashed
from leanloop.lean.server import (
    LeanMessage,
    LeanServer,
    ProofFinished,
    ProofState,
    TacticFailed,
    TheoremSource,
)
from leanloop.ml.protocols import GeneratedTactic
from leanloop.prover import proof_search
from leanloop.prover.config import ProverConfig
from leanloop.prover.proof_search import search
from leanloop.prover.recorded import RecordedGenerator
from leanloop.prover.replay import ReplayServer
from leanloop.prover.strategy import BestFirst, DepthFirst, Node
from leanloop.prover.target import Target
from tests.audit_standin import audit_request, audited_answer
from tests.helpers import sample_theorems
from tests.test_replay_server import UNREPLAYABLE


@pytest.fixture(scope="module")
def traced(sample_dir):
    return [t for t in sample_theorems(sample_dir) if t.traced_tactics]


@pytest.fixture(scope="module")
def recorded(traced):
    return RecordedGenerator(traced)


def replays(theorem, proof) -> bool:
    """Whether ``proof`` goes from the theorem's first state to no goals on a fresh replay."""
    server = ReplayServer([theorem])
    state = server.start_recorded(theorem)
    for index, tactic in enumerate(proof, 1):
        state = server.run_tactic(state, tactic)
        if isinstance(state, TacticFailed) or isinstance(state, ProofFinished) != (
            index == len(proof)
        ):
            return False
    return True


def run(server, theorem, generator, **config):
    return search(server, Target.of(theorem=theorem), generator, ProverConfig(**config))


# -- the real sample through the replay environment ----------------------------------------------


@pytest.mark.parametrize("strategy", ["best_first", "depth_first"])
def test_the_recorded_generator_finds_every_recorded_proof(traced, recorded, strategy):
    server = ReplayServer(traced)
    outcomes = {}
    for theorem in traced:
        result = run(server, theorem, recorded, strategy=strategy, debug=True)
        assert not server._states  # every proof state was released
        outcomes[theorem.full_name] = result.status
        assert result.status is not AttemptStatus.PROVED  # no Lean checked anything here
        if result.status is AttemptStatus.REPLAYED:
            assert result.error is None and replays(theorem, result.proof)
            steps = {collapse_whitespace(s.tactic) for s in theorem.traced_tactics}
            assert {collapse_whitespace(t) for t in result.proof} <= steps
            assert result.expansions >= 1 and result.tree_size >= 1
            assert result.seconds >= result.lean_seconds + result.model_seconds
        else:
            assert result.proof is None and result.error == "the search space is exhausted"
    failed = {name for name, status in outcomes.items() if status is AttemptStatus.FAILED}
    assert failed == set(UNREPLAYABLE)
    assert list(outcomes.values()).count(AttemptStatus.REPLAYED) == 81


def test_a_goal_search_and_the_database_record(traced, recorded, tmp_path):
    theorem = traced[0]
    server = ReplayServer(traced)
    result = search(
        server, Target.of(goal=theorem.traced_tactics[0].state_before), recorded, ProverConfig()
    )
    assert result.status is AttemptStatus.REPLAYED and result.proof == (
        "dsimp [invFunIdAssoc]",
        "aesop_cat",
    )
    assert "replayed (recorded proof found)" in str(result)
    database = DynamicDatabase(tmp_path / "a.db")
    database.record_attempt(result.to_attempt(theorem, run="r", prover="recorded"))
    (stored,) = database.get_attempts("r")
    assert stored.status is AttemptStatus.REPLAYED and stored.proof == result.proof
    assert stored.expansions == result.expansions and stored.tree_size == result.tree_size


def test_expansion_budget(traced, recorded):
    long = next(t for t in traced if t.full_name == "FractionalIdeal.count_mul")
    result = run(ReplayServer(traced), long, recorded, max_expansions=3)
    assert result.status is AttemptStatus.BUDGET and result.expansions == 3
    assert result.proof is None and "3 expansions" in result.error
    batched = run(ReplayServer(traced), long, recorded, max_expansions=3, batch_size=2)
    assert batched.expansions == 3


def test_time_budget(traced, recorded):
    class Slow:
        def generate_batch(self, states, k, **options):
            time.sleep(0.05)
            return recorded.generate_batch(states, k)

    long = next(t for t in traced if t.full_name == "FractionalIdeal.count_mul")
    result = run(ReplayServer(traced), long, Slow(), timeout=0.12)
    assert result.status is AttemptStatus.TIMEOUT and result.proof is None
    assert 0.12 <= result.seconds < 0.12 + 0.2 and result.expansions <= 3
    assert result.model_seconds >= 0.1


def test_depth_budget(traced, recorded):
    theorem = next(t for t in traced if t.full_name == "Order.pred_eq_iff_covBy")
    assert run(ReplayServer(traced), theorem, recorded, max_depth=1).status is AttemptStatus.FAILED
    found = run(ReplayServer(traced), theorem, recorded, max_depth=2)
    assert found.status is AttemptStatus.REPLAYED and len(found.proof) == 2


RAISE = object()


class Raising:
    """Fails on the states of one theorem only."""

    def __init__(self, inner, poisoned: str, result) -> None:
        self.inner, self.poisoned, self.result = inner, poisoned, result

    def generate_batch(self, states, k, **options):
        if any(self.poisoned in s for s in states):
            if self.result is RAISE:
                raise RuntimeError("model crashed")
            return self.result
        return self.inner.generate_batch(states, k, **options)


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (RAISE, "the tactic generator failed: RuntimeError: model crashed"),
        (None, "the tactic generator returned None for 1 state "),
        ([], "the tactic generator returned 0 for 1 state "),
        ([["simp"]], "returned 'simp' (expected (tactic, score))"),
        ([[("simp", "high")]], "(expected (tactic, score))"),
    ],
)
def test_a_failing_generator_ends_its_theorem_as_error(traced, recorded, answer, message):
    poisoned = traced[1].traced_tactics[0].state_before
    generator = Raising(recorded, poisoned, answer)
    server = ReplayServer(traced)
    outcomes = [run(server, t, generator) for t in traced[:4]]
    assert [o.status for o in outcomes] == [
        AttemptStatus.REPLAYED,
        AttemptStatus.ERROR,
        AttemptStatus.REPLAYED,
        AttemptStatus.REPLAYED,
    ]
    assert message in outcomes[1].error and outcomes[1].proof is None


def test_a_generator_proposing_nothing_exhausts_the_search(traced):
    class Empty:
        def generate_batch(self, states, k, **options):
            return [[] for _ in states]

    result = run(ReplayServer(traced), traced[0], Empty())
    assert result.status is AttemptStatus.FAILED and result.expansions == 1


def test_a_server_dying_mid_search_ends_its_theorem_as_error(traced, recorded):
    class Dying(ReplayServer):
        def __init__(self, theorems, victim) -> None:
            super().__init__(theorems)
            self.victim, self.calls = victim, 0

        def run_tactic(self, state, tactic, *, goal=None):
            if self._states[state.id][0].full_name == self.victim:
                self.calls += 1
                if self.calls == 3:
                    raise ServerCrashed("the Lean REPL exited with status 137")
            return super().run_tactic(state, tactic, goal=goal)

    long = next(t for t in traced if t.full_name == "FractionalIdeal.count_mul")
    server = Dying(traced, long.full_name)
    results = [run(server, t, recorded) for t in (traced[0], long, traced[2])]
    assert [r.status for r in results] == ["replayed", "error", "replayed"]
    assert "exited with status 137" in results[1].error and results[1].expansions >= 1


def test_bad_arguments_are_one_line_errors(traced):
    with pytest.raises(LeanloopError, match="either a goal or a theorem"):
        Target.of()
    with pytest.raises(LeanloopError, match="needs its source file"):
        Target.of(theorem=traced[0]).start(Toy({}))
    with pytest.raises(LeanloopError, match="field 'timeout'"):
        ProverConfig(timeout=-1)


# -- the order of expansions, on a toy environment -------------------------------------------------


class Toy(LeanServer):
    """A toy environment for checking the order of the search (not Lean): a state is a name,
    ``edges[(state, tactic)]`` is the next state, 'done' finishes, anything else fails."""

    backend = "toy"
    checks_with_lean = False

    def __init__(self, edges: dict[tuple[str, str], str]) -> None:
        super().__init__()
        self.edges = edges
        self.calls: list[tuple[str, str]] = []
        self.live: set[int] = set()  # proof states made and not released
        self._ids = itertools.count()

    def _state(self, name: str) -> ProofState:
        state = ProofState(next(self._ids), (name,), 1, id(self))
        self.live.add(state.id)
        return state

    def release(self, *states):
        for state in states:
            assert state.id in self.live, f"proof state {state.id} released twice"
            self.live.discard(state.id)

    def start_proof(self, goal):
        return self._state(goal)

    def start_theorem(self, theorem):
        raise NotImplementedError

    def open_sorries(self, code):
        raise NotImplementedError

    def check(self, code):
        raise NotImplementedError

    def run_tactic(self, state, tactic, *, goal=None):
        self._own(state)
        assert state.id in self.live, f"proof state {state.id} used after its release"
        self.calls.append((state.goals[0], tactic))
        after = self.edges.get((state.goals[0], tactic))
        if after is None:
            return TacticFailed(f"no edge {tactic!r} from {state.goals[0]}")
        return ProofFinished(next(self._ids)) if after == "done" else self._state(after)

    @property
    def generation(self):
        return 1

    def close(self):
        pass


class Scripted:
    """Proposes fixed tactics and scores for each state; records the states it was asked."""

    def __init__(self, table: dict[str, list[tuple[str, float]]]) -> None:
        self.table = table
        self.asked: list[str] = []

    def generate_batch(self, states, k, **options):
        self.asked.extend(states)
        return [[GeneratedTactic(t, s) for t, s in self.table.get(x, [])][:k] for x in states]


# root -> a (-1), b (-2); a -> a1 (-5); b -> b1 (-0.5); nothing finishes
TREE = {("root", "ta"): "a", ("root", "tb"): "b", ("a", "ta1"): "a1", ("b", "tb1"): "b1"}
SCORES = {
    "root": [("ta", -1.0), ("tb", -2.0)],
    "a": [("ta1", -5.0)],
    "b": [("tb1", -0.5)],
}


def toy_search(edges, table, progress=None, **config):
    generator = Scripted(table)
    server = Toy(edges)
    result = search(
        server, Target.of(goal="root"), generator, ProverConfig(**config), progress=progress
    )
    return result, generator, server


def test_best_first_expands_the_highest_cumulative_log_probability():
    result, generator, _ = toy_search(TREE, SCORES)
    # priorities: a -1, b -2, b1 -2.5, a1 -6
    assert generator.asked == ["root", "a", "b", "b1", "a1"]
    assert result.status is AttemptStatus.FAILED and result.tree_size == 5


def test_depth_first_goes_deep_first():
    _, generator, _ = toy_search(TREE, SCORES, strategy="depth_first")
    assert generator.asked == ["root", "a", "a1", "b", "b1"]


def test_progress_guidance_mixes_predicted_steps_into_the_priority():
    class Steps:
        def __init__(self) -> None:
            self.items = []

        def predict_batch(self, items):
            self.items.extend(items)
            return [{"ta": 10.0, "tb": 0.0, "ta1": 0.0, "tb1": 0.0}[t] for _, _, t in items]

    progress = Steps()
    _, generator, _ = toy_search(TREE, SCORES, progress, progress_weight=0.5)
    # priorities: a -1 - 0.5 * 10 = -6, b -2, b1 -2.5, a1 -6 - 5 = -11
    assert generator.asked == ["root", "b", "b1", "a", "a1"]
    assert ("root", None, "ta") in progress.items and ("b", "tb", "tb1") in progress.items
    with pytest.raises(ValueError, match="progress model"):
        toy_search(TREE, SCORES, progress_weight=0.5)


def test_best_first_pops_in_non_increasing_priority(traced, recorded):
    """With log-probabilities (never positive) as scores, best-first expands nodes in order
    of non-increasing priority: checked on the real sample."""

    class Spy(ReplayServer):
        def __init__(self, theorems) -> None:
            super().__init__(theorems)
            self.made: dict[str, tuple[str, str]] = {}

        def run_tactic(self, state, tactic, *, goal=None):
            result = super().run_tactic(state, tactic, goal=goal)
            if isinstance(result, ProofState):
                self.made.setdefault(result.pretty, (state.pretty, tactic))
            return result

    class Asked:
        def __init__(self) -> None:
            self.states, self.scores = [], {}

        def generate_batch(self, states, k, **options):
            self.states.extend(states)
            out = recorded.generate_batch(states, k)
            for state, ranked in zip(states, out, strict=True):
                for g in ranked:
                    self.scores[(state, g.tactic)] = g.score
            return out

    for theorem in traced[:40]:
        server, asked = Spy([theorem]), Asked()
        search(server, Target.of(theorem=theorem), asked, ProverConfig(num_sampled_tactics=8))

        def priority(state: str, server=server, asked=asked) -> float:
            if state not in server.made:
                return 0.0
            parent, tactic = server.made[state]
            return priority(parent) + asked.scores[(parent, tactic)]

        popped = [priority(s) for s in asked.states]
        assert popped == sorted(popped, reverse=True), theorem.full_name
        assert len(set(asked.states)) == len(asked.states)  # no state expanded twice


def test_repeated_states_and_tactics_are_not_expanded_twice():
    edges = {("root", "t1"): "a", ("root", "t2"): "a", ("a", "t3"): "done"}
    table = {
        "root": [("t1", -1.0), ("t1 ", -1.5), ("  t1", -2.0), ("t2", -3.0)],
        "a": [("t3", -1.0)],
    }
    result, generator, server = toy_search(edges, table)
    assert result.status is AttemptStatus.REPLAYED and result.proof == ("t1", "t3")
    assert server.calls == [
        ("root", "t1"),
        ("root", "t2"),
        ("a", "t3"),
        ("root", "t1"),
        ("a", "t3"),
    ]
    # (the last two: the proof replayed from a fresh start before it is reported)
    assert generator.asked == ["root", "a"] and result.tree_size == 2
    unchecked, _, server = toy_search(edges, table, recheck=False)
    assert unchecked.proof == result.proof and len(server.calls) == 3


def test_failed_tactics_are_kept_and_given_to_a_generator_that_takes_feedback():
    class Learner(Scripted):
        accepts_feedback = True

        def __init__(self) -> None:
            super().__init__({})
            self.feedback = []

        def generate_batch(self, states, k, *, feedback, **options):
            self.asked.extend(states)
            self.feedback.append(feedback)
            tried = {f.tactic for f in feedback[0]}
            return [[("good", -1.0)] if "bad" in tried else [("bad", -0.1)]]

    edges = {("root", "good"): "done"}
    server, learner = Toy(edges), Learner()
    config = ProverConfig(feedback_retries=1)
    result = search(server, Target.of(goal="root"), learner, config)
    assert result.status is AttemptStatus.REPLAYED and result.proof == ("good",)
    assert learner.feedback[0] == [[]]
    ((failure,),) = learner.feedback[1]
    assert failure.tactic == "bad" and "no edge 'bad'" in failure.error
    assert result.expansions == 2
    no_retry = search(Toy(edges), Target.of(goal="root"), Learner(), ProverConfig())
    assert no_retry.status is AttemptStatus.FAILED


def test_depth_limit_and_late_proofs_on_the_toy():
    chain = {("root", "t"): "a", ("a", "t"): "b", ("b", "t"): "done"}
    table = {name: [("t", -1.0)] for name in ("root", "a", "b")}
    assert toy_search(chain, table, max_depth=2)[0].status is AttemptStatus.FAILED
    assert toy_search(chain, table, max_depth=3)[0].proof == ("t", "t", "t")


def test_a_state_cut_at_the_depth_limit_is_still_reached_by_a_shorter_path():
    # root -a-> a -b-> b -c-> c (cut at depth 3), and the worse-scored root -x-> x -c-> c -done
    edges = {
        ("root", "a"): "a",
        ("a", "b"): "b",
        ("b", "c"): "c",
        ("root", "x"): "x",
        ("x", "c"): "c",
        ("c", "done"): "done",
    }
    table = {
        "root": [("a", -0.1), ("x", -3.0)],
        "a": [("b", -0.1)],
        "b": [("c", -0.1)],
        "x": [("c", -0.1)],
        "c": [("done", -0.1)],
    }
    result, _, server = toy_search(edges, table, max_depth=3)
    assert result.status is AttemptStatus.REPLAYED and result.proof == ("x", "c", "done")
    assert not server.live


def test_every_proof_state_is_released_however_the_search_ends():
    # root has two children; the second tactic of the second one finishes
    edges = {("root", "a"): "a", ("root", "b"): "b", ("a", "done"): "done", ("a", "s"): "s"}
    table = {"root": [("a", -0.1), ("b", -0.2)], "a": [("s", -0.1), ("done", -0.2)]}
    for recheck in (True, False):
        result, _, server = toy_search(edges, table, recheck=recheck)
        assert result.status is AttemptStatus.REPLAYED and not server.live, recheck

    class Failing:
        def predict_batch(self, items):
            raise RuntimeError("out of memory")

    result, _, server = toy_search(edges, table, progress=Failing(), progress_weight=0.5)
    assert result.status is AttemptStatus.ERROR and "progress model" in result.error
    assert not server.live


def test_a_state_reached_again_by_a_shorter_path_after_its_expansion_is_expanded_again():
    # c is first reached and expanded at depth 3 (its child d cut at the limit of 4), then
    # reached at depth 2 through the worse-scored x: expanded again, d is kept and finishes
    edges = {
        ("root", "a"): "a",
        ("a", "b"): "b",
        ("b", "c"): "c",
        ("root", "x"): "x",
        ("x", "c"): "c",
        ("c", "d"): "d",
        ("d", "done"): "done",
    }
    table = {
        "root": [("a", -0.1), ("x", -3.0)],
        "a": [("b", -0.1)],
        "b": [("c", -0.1)],
        "x": [("c", -0.1)],
        "c": [("d", -0.1)],
        "d": [("done", -0.1)],
    }
    result, generator, server = toy_search(edges, table, max_depth=4, debug=True)
    assert result.status is AttemptStatus.REPLAYED and result.proof == ("x", "c", "d", "done")
    assert generator.asked == ["root", "a", "b", "c", "x", "c", "d"]
    assert result.tree_size == 6 and not server.live


def test_a_state_reached_again_by_a_shorter_path_while_in_the_frontier_takes_that_path():
    # c waits in the frontier at depth 3 (priority -0.3) when x reaches it at depth 2
    # (priority -0.26): it is expanded there, before y (-0.28), and its child d is kept
    edges = {
        ("root", "a"): "a",
        ("a", "b"): "b",
        ("b", "c"): "c",
        ("root", "x"): "x",
        ("x", "c"): "c",
        ("root", "y"): "y",
        ("c", "d"): "d",
        ("d", "done"): "done",
    }
    table = {
        "root": [("a", -0.1), ("x", -0.25), ("y", -0.28)],
        "a": [("b", -0.1)],
        "b": [("c", -0.1)],
        "x": [("c", -0.01)],
        "c": [("d", -0.01)],
        "d": [("done", -0.1)],
    }
    for batch_size in (1, 2):
        result, generator, server = toy_search(
            edges, table, max_depth=4, batch_size=batch_size, debug=True
        )
        assert result.status is AttemptStatus.REPLAYED, batch_size
        assert result.proof == ("x", "c", "d", "done") and not server.live
        if batch_size == 1:
            assert generator.asked == ["root", "a", "b", "x", "c", "d"]


def test_a_state_popped_with_the_batch_that_reaches_it_by_a_shorter_path_takes_that_path():
    # x and c (depth 3) are expanded together; x, first, reaches c at depth 2 before c's turn
    edges = {
        ("root", "a"): "a",
        ("root", "y"): "y",
        ("root", "z"): "z",
        ("a", "b"): "b",
        ("b", "c"): "c",
        ("root", "x"): "x",
        ("x", "c"): "c",
        ("c", "d"): "d",
        ("d", "done"): "done",
    }
    table = {
        "root": [("a", -0.1), ("y", -0.15), ("z", -0.22), ("x", -0.25)],
        "a": [("b", -0.1)],
        "b": [("c", -0.1)],
        "x": [("c", -0.01)],
        "c": [("d", -0.01)],
        "d": [("done", -0.1)],
    }
    result, generator, server = toy_search(edges, table, max_depth=4, batch_size=2, debug=True)
    # batches: [root], [a, y], [b, z], [x, c]: c is expanded once, after x, at depth 2
    assert result.status is AttemptStatus.REPLAYED and result.proof == ("x", "c", "d", "done")
    assert generator.asked.count("c") == 1 and not server.live


def test_an_exhausted_frontier_is_failed_even_when_the_budget_is_used_up():
    # the toy tree takes exactly 5 expansions to exhaust
    exhausted, _, server = toy_search(TREE, SCORES, max_expansions=5)
    assert exhausted.status is AttemptStatus.FAILED and exhausted.expansions == 5
    assert exhausted.error == "the search space is exhausted" and not server.live
    stopped, _, server = toy_search(TREE, SCORES, max_expansions=4)
    assert stopped.status is AttemptStatus.BUDGET and stopped.expansions == 4
    assert not server.live


class Clock:
    """A clock the search reads instead of the real one, moved on by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


@pytest.mark.parametrize(("late", "status"), [("a1", "failed"), ("b1", "timeout")])
def test_an_exhausted_frontier_is_failed_even_when_the_time_is_up(monkeypatch, late, status):
    clock = Clock()
    monkeypatch.setattr(proof_search, "time", clock)

    class Slow(Scripted):
        def generate_batch(self, states, k, **options):
            if late in states:
                clock.now += 100.0  # the time runs out while the last states are expanded
            return super().generate_batch(states, k, **options)

    server = Toy(TREE)
    result = search(server, Target.of(goal="root"), Slow(SCORES), ProverConfig(timeout=10))
    # a1 is the last state expanded (nothing follows), b1 the one before it
    assert result.status == status and not server.live


def test_every_proof_state_is_released_when_the_server_refuses_a_request_mid_batch():
    class Refusing(Toy):
        def run_tactic(self, state, tactic, *, goal=None):
            if tactic == "boom":
                raise LeanRequestError("unknown proof state")
            return super().run_tactic(state, tactic, goal=goal)

    edges = {
        ("root", "a"): "a",
        ("root", "b"): "b",
        ("a", "a1"): "a1",
        ("a", "a2"): "a2",
        ("b", "b1"): "b1",
    }
    table = {
        "root": [("a", -0.1), ("b", -0.2)],
        "a": [("a1", -0.1), ("a2", -0.2), ("boom", -0.3)],
        "b": [("b1", -0.1)],
    }
    server = Refusing(edges)
    config = ProverConfig(batch_size=2)
    result = search(server, Target.of(goal="root"), Scripted(table), config)
    # a's children a1 and a2 were made before the refusal, b waited its turn in the batch
    assert result.status is AttemptStatus.ERROR and "unknown proof state" in result.error
    assert not server.live


class Fickle(Toy):
    """A toy whose ``later`` edges lead elsewhere from their second use on (a proof found does
    not replay as it was found)."""

    def __init__(self, edges, later) -> None:
        super().__init__(edges)
        self.later = later
        self.used: set[tuple[str, str]] = set()

    def run_tactic(self, state, tactic, *, goal=None):
        edge = (state.goals[0], tactic)
        if edge in self.later and edge in self.used:
            saved, self.edges = self.edges, {**self.edges, edge: self.later[edge]}
            try:
                return super().run_tactic(state, tactic, goal=goal)
            finally:
                self.edges = saved
        self.used.add(edge)
        return super().run_tactic(state, tactic, goal=goal)


class Listening(Scripted):
    """A scripted generator that takes feedback, and records it."""

    accepts_feedback = True

    def __init__(self, table) -> None:
        super().__init__(table)
        self.feedback: dict[str, list] = {}

    def generate_batch(self, states, k, *, feedback, **options):
        for state, failures in zip(states, feedback, strict=True):
            self.feedback.setdefault(state, []).append(list(failures))
        return super().generate_batch(states, k, **options)


def test_a_proof_that_does_not_replay_is_a_failed_tactic_and_the_search_goes_on():
    # a -f-> done when searched, but a -f-> a2 (a state, not the end) when replayed
    edges = {("root", "a"): "a", ("a", "f"): "done", ("root", "b"): "b", ("b", "g"): "done"}
    table = {"root": [("a", -0.1), ("b", -0.2)], "a": [("f", -0.1)], "b": [("g", -0.1)]}
    server, generator = Fickle(edges, {("a", "f"): "a2"}), Listening(table)
    config = ProverConfig(feedback_retries=1, debug=True)
    result = search(server, Target.of(goal="root"), generator, config)
    assert result.status is AttemptStatus.REPLAYED and result.proof == ("b", "g")
    assert result.error is None and not server.live
    # the rejected proof's last tactic was given back on a's retry, with why
    first, retry = generator.feedback["a"]
    assert first == [] and [f.tactic for f in retry] == ["f"]
    assert "does not replay: step 2 ('f') did not end where the search did" in retry[0].error

    alone = {("root", "a"): "a", ("a", "f"): "done"}
    server = Fickle(alone, {("a", "f"): "a2"})
    result = search(server, Target.of(goal="root"), Scripted(table), ProverConfig())
    assert result.status is AttemptStatus.FAILED and result.proof is None
    assert result.error.startswith("the search space is exhausted")
    assert "a; f" in result.error and "did not end where the search did" in result.error
    assert not server.live


def test_a_proof_whose_replay_ends_early_is_not_accepted_and_the_search_goes_on():
    # root -a-> a -f-> done when searched; replayed, root -a-> done already
    edges = {("root", "a"): "a", ("a", "f"): "done", ("root", "b"): "b", ("b", "g"): "done"}
    table = {"root": [("a", -0.1), ("b", -0.2)], "a": [("f", -0.1)], "b": [("g", -0.1)]}
    server = Fickle(edges, {("root", "a"): "done"})
    result = search(server, Target.of(goal="root"), Scripted(table), ProverConfig(debug=True))
    assert result.status is AttemptStatus.REPLAYED and result.proof == ("b", "g")
    assert not server.live


class Audited(Toy):
    """A toy that checks with Lean: the whole proof's verdict is leanloop's own ``CheckResult``
    (``tests/audit_standin.py``), chosen here: a proof using ``cheat`` is accepted with
    ``sorryAx`` among its axioms, one using ``wrong`` is rejected, any other is accepted."""

    checks_with_lean = True

    def __init__(self, edges) -> None:
        super().__init__(edges)
        self.checked: list[str] = []

    def start_theorem(self, theorem):
        return self._state("root")

    def check(self, code):
        self.checked.append(code)
        name, _ = audit_request(code)
        if "cheat" in code:
            return audited_answer(code, axioms={name: ["propext", "sorryAx"]})
        if "wrong" in code:
            return audited_answer(code, [LeanMessage("error", "type mismatch", 2, 2)])
        return audited_answer(code)


SOURCE = TheoremSource("t", "T.lean", prefix="", signature=": True")


def test_proofs_lean_does_not_accept_whole_are_passed_over():
    edges = {("root", "cheat"): "done", ("root", "wrong"): "done", ("root", "trivial"): "done"}
    table = {"root": [("cheat", -0.1), ("wrong", -0.2), ("trivial", -0.3)]}
    server = Audited(edges)
    result = search(server, Target.of(theorem=SOURCE), Scripted(table), ProverConfig())
    assert result.status is AttemptStatus.PROVED and result.proof == ("trivial",)
    assert len(server.checked) == 3 and not server.live


def test_a_search_whose_only_proofs_were_refused_ends_refused():
    edges = {("root", "cheat"): "done", ("root", "wrong"): "done", ("root", "a"): "a"}
    table = {"root": [("cheat", -0.1), ("wrong", -0.2), ("a", -0.3)]}
    server = Audited(edges)
    result = search(server, Target.of(theorem=SOURCE), Scripted(table), ProverConfig())
    assert result.status is AttemptStatus.REFUSED and result.proof is None
    assert "uses sorryAx" in result.error and "cheat" in result.error
    assert "the search space is exhausted" in result.error and not server.live

    rejected = search(
        Audited(edges),
        Target.of(theorem=SOURCE),
        Scripted({"root": table["root"][1:]}),
        ProverConfig(max_expansions=1),
    )
    assert rejected.status is AttemptStatus.BUDGET and rejected.proof is None
    assert "checked by Lean: Lean rejected it: line 2: type mismatch" in rejected.error


def test_frontiers():
    def node(name: str, priority: float) -> Node:
        return Node(ProofState(0, (name,)), name, None, None, 0.0, 0, priority, priority)

    best = BestFirst()
    best.push_children([node("x", -1), node("y", -3)])
    best.push(node("z", -1))
    assert [n.key for n in best.drain()] == ["x", "z", "y"] and len(best) == 0
    x, y = node("x", -1), node("y", -3)
    best.push_children([x, y])
    y.priority = 0.0
    best.update(y)  # reached by a shorter path
    assert len(best) == 2 and [n.key for n in best.drain()] == ["y", "x"] and not best.pop()
    depth = DepthFirst()
    depth.push_children([node("x", -1), node("y", -3)])
    depth.push_children([node("x1", -2), node("x2", -4)])
    assert [n.key for n in depth.pop_many(3)] == ["x1", "x2", "x"]
