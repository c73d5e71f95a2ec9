"""The Lean-checked GRPO reward, with the Lean side replayed from the REPL's recorded answers,
and the reading of proof states back into Lean source."""

from __future__ import annotations

import pytest

from leanloop.errors import LeanloopError
from leanloop.lean.goals import goal_to_source, parse_goal
from leanloop.lean.repl import ReplServer
from leanloop.lean.server import ProofState
from leanloop.lean.transcript import TranscriptTransport
from leanloop.trainer.lean_reward import LeanCheckedReward
from tests.audit_standin import audit_request, audited_answer


class Audited(ReplServer):
    """The REPL's recorded answers to the reward's own requests; the audited check of a goal
    closed is answered with leanloop's own verdict object (``tests/audit_standin.py``) reporting
    ``axioms`` — what the reward does with the audit's verdict."""

    def __init__(self, transport, axioms=("propext",)) -> None:
        super().__init__(transport)
        self.axioms, self.checked = list(axioms), []

    def check(self, code):
        self.checked.append(code)
        name, _ = audit_request(code)
        return audited_answer(code, axioms={name: self.axioms})


def replayed(transcript, count=None, axioms=("propext",)):
    pairs = list(zip(transcript["requests"], transcript["responses"], strict=False))
    return Audited(TranscriptTransport(pairs[:count], name=transcript["name"]), axioms)


def chat(text):
    return [{"role": "assistant", "content": text}]


def test_closed_beats_error(transcripts):
    """Two prompts: `exact?` closes `0 < 1`, and fails on `3 = 7` (real Lean answers)."""
    server = replayed(transcripts["Mathlib/test/exact"])
    reward = LeanCheckedReward(server, header="import Mathlib", declaration="theorem test")
    rewards = reward(
        [chat("exact?"), chat("exact?")],
        state=["⊢ 0 < 1", "⊢ 3 = 7"],
        tactic=["norm_num", "norm_num"],
    )
    assert rewards == [1.0, 0.0]
    assert server.client.transport.finished  # exactly the recorded requests were sent
    assert (reward.stats.closed, reward.stats.failed) == (1, 1)
    # the goal closed was judged as a theorem of its own, with its axioms audited
    (code,) = server.checked
    assert code.startswith("import Mathlib\n\ntheorem leanloop_reward : 0 < 1 := by\n  exact?")


def test_a_goal_closed_only_by_native_code_or_a_refused_tactic_earns_nothing(transcripts):
    server = replayed(transcripts["Mathlib/test/exact"], axioms=["Lean.ofReduceBool"])
    reward = LeanCheckedReward(server, header="import Mathlib", declaration="theorem test")
    assert reward([chat("exact?")], state=["⊢ 0 < 1"]) == [0.0]
    assert reward.stats.refused == 1 and reward.stats.closed == 0
    silent = replayed(transcripts["proof_branching"], count=0)  # any request would fail
    meta = LeanCheckedReward(silent)
    assert meta([chat("run_tac Lean.Elab.admitGoal")], state=["⊢ False"]) == [0.0]
    assert meta.stats.refused == 1 and silent.checked == []


def test_accepted_progress(transcripts):
    server = replayed(transcripts["proof_branching"], count=2)
    reward = LeanCheckedReward(server, declaration="theorem complex_and")
    state = "p q r : Prop\nh1 : p ∧ q\nh2 : q → r\n⊢ p ∧ r"
    assert reward([chat("apply And.intro")], state=[state]) == [0.5]


def test_a_tactic_that_changes_nothing_earns_nothing(transcripts):
    """Lean accepts `trace "37"` but leaves the goal as it was; `simp` closes it (Lean's recorded
    answers). Only a change of state is progress."""
    recording = transcripts["trace_simp"]
    exchanges = list(zip(recording["requests"], recording["responses"], strict=True))
    statement, opened = exchanges[4]  # `example : f = 37 := by sorry`, after `def f := 37`
    (sorry,) = opened["sorries"]

    class Recorded(Audited):
        """The REPL's answers to the two tactics; the statement's sorry as the recording
        opened it (in an environment that defines f, which a bare statement cannot rebuild)."""

        def open_sorries(self, code):
            assert code == statement["cmd"]
            return [ProofState(sorry["proofState"], (sorry["goal"],), self.generation, id(self))]

    server = Recorded(TranscriptTransport(exchanges[5:7], name=recording["name"]), axioms=())
    reward = LeanCheckedReward(server, unchanged=-0.25)
    assert reward([chat('trace "37"'), chat("simp")], state=["⊢ f = 37"] * 2) == [-0.25, 1.0]
    assert server.client.transport.finished
    assert (reward.stats.unchanged, reward.stats.progressed, reward.stats.closed) == (1, 0, 1)
    assert LeanCheckedReward(lambda: None).values["unchanged"] == 0.0  # by default: nothing


def test_implicit_binders_and_a_header(transcripts):
    server = replayed(transcripts["Mathlib/test/H20231115"])
    reward = LeanCheckedReward(
        server,
        header="import Mathlib.Tactic.Cases",
        implicit_binders=True,
        closed=2.0,
        progress=0.25,
    )
    assert reward(["induction' x with x hx"], state=["x : Nat\n⊢ x + 1 > x"]) == [0.25]


def test_unparsable_completions_never_reach_lean(transcripts):
    server = replayed(transcripts["proof_branching"], count=0)  # any request would fail
    reward = LeanCheckedReward(server, unparsable=-1.0)
    assert reward([chat("sorry"), chat(""), chat("```\n```")], state=["⊢ True"] * 3) == [-1.0] * 3
    assert reward.stats.unparsable == 3


def test_states_that_cannot_be_checked_are_left_out():
    from leanloop.lean.errors import ServerCrashed
    from leanloop.lean.transport import Transport

    class Dead(Transport):
        generation = 1

        def exchange(self, request):
            raise ServerCrashed("the Lean REPL exited with status 137")

    reward = LeanCheckedReward(ReplServer(Dead()))
    # a state that is not a proof state, and a server that fails: neither blames the completion
    assert reward(["rfl", "rfl"], state=["no goals", "⊢ True"]) == [None, None]
    assert reward.stats.unavailable == 2


def test_missing_state_column():
    reward = LeanCheckedReward(lambda: None)
    with pytest.raises(LeanloopError, match="'state' column"):
        reward(["rfl"], tactic=["rfl"])


def test_reading_states_back():
    goal = parse_goal(
        "case succ\nn✝ : ℕ\nih : n✝ + 0 = n✝\ninst✝ : Fintype α\nf g : ℕ →\n    ℕ\n"
        "⊢ n✝ + 1 + 0 =\n    n✝ + 1\n\ncase zero\n⊢ 0 = 0"
    )
    assert goal.case == "succ"
    assert [h.names for h in goal.hypotheses] == [("n✝",), ("ih",), ("inst✝",), ("f", "g")]
    assert goal.hypotheses[3].type == "ℕ → ℕ"
    assert goal.target == "n✝ + 1 + 0 = n✝ + 1"
    source = goal_to_source("n✝ : ℕ\nih : n✝ + 0 = n✝\ninst✝ : Fintype α\n⊢ n✝ + 1 = n✝ + 1")
    assert source == (
        "example (n_1 : ℕ) (ih : n_1 + 0 = n_1) [Fintype α] : n_1 + 1 = n_1 + 1 := by sorry"
    )
    assert goal_to_source("⊢ True", declaration="theorem t") == "theorem t : True := by sorry"
    with pytest.raises(ValueError, match="no line starts with ⊢"):
        parse_goal("no goals")


def lazy_restart_server():
    """leanloop's server interface over a process that is replaced lazily: a tactic that times
    out stops it, and the next request starts a new one whose states are numbered afresh."""
    from leanloop.lean.errors import RequestTimeout
    from leanloop.lean.server import LeanServer, ProofFinished, ProofState

    class Server(LeanServer):
        backend = "lazy"

        def __init__(self):
            super().__init__()
            self.process, self.stopped, self.opened = 1, False, 0

        @property
        def generation(self):
            return self.process

        def _request(self):
            if self.stopped:
                self.process, self.stopped = self.process + 1, False

        def open_sorries(self, code):
            self._request()
            self.opened += 1
            return [ProofState(self.opened, ("⊢ x",), self.process, id(self))]

        def run_tactic(self, state, tactic, *, goal=None):
            self._own(state)
            self._request()
            if tactic == "loop":
                self.stopped = True
                raise RequestTimeout("the Lean REPL did not answer within 1 s")
            return ProofFinished(state.id)

        def start_proof(self, goal): ...
        def start_theorem(self, theorem): ...
        def close(self): ...

        def check(self, code):  # leanloop's own verdict object: accepted, standard axioms
            return audited_answer(code)

    return Server()


def test_states_of_a_replaced_process_are_recreated():
    server = lazy_restart_server()
    reward = LeanCheckedReward(server, failed=0.0)
    assert reward(["exact trivial", "loop"], state=["⊢ True", "⊢ True"]) == [1.0, 0.0]
    assert reward(["exact trivial"], state=["⊢ 1 = 1"]) == [1.0]  # the process is replaced here
    # the cached state of "⊢ True" came from the old process: it is made again, not given up on
    assert reward(["exact trivial"] * 3, state=["⊢ True"] * 3) == [1.0, 1.0, 1.0]
    assert reward.stats.unavailable == 0 and server.opened == 3


def test_a_pool_of_servers_checks_a_batch_concurrently():
    """With ``servers=3`` three servers check one batch at once: each server's first tactic
    waits until all three are running one (a sequential check would never get there), and each
    server recreates a state once, whatever the number of its completions."""
    import threading

    from leanloop.lean.server import LeanServer, ProofFinished, ProofState, TacticFailed

    together = threading.Barrier(3, timeout=120)
    made = []

    class Pooled(LeanServer):
        backend = "pooled"

        def __init__(self):
            super().__init__()
            self.opened, self.ran = [], 0
            made.append(self)

        @property
        def generation(self):
            return 1

        def open_sorries(self, code):
            self.opened.append(code)
            return [ProofState(len(self.opened), ("⊢ x",), 1, id(self))]

        def run_tactic(self, state, tactic, *, goal=None):
            self._own(state)
            self.ran += 1
            if self.ran == 1:
                together.wait()  # every server holds a tactic at this point
            if tactic == "exact trivial":
                return ProofFinished(state.id)
            return TacticFailed(f"unknown tactic {tactic}")

        def start_proof(self, goal): ...
        def start_theorem(self, theorem): ...
        def close(self): ...

        def check(self, code):  # leanloop's own verdict object: accepted, standard axioms
            return audited_answer(code)

    reward = LeanCheckedReward(Pooled, servers=3)
    assert reward.servers == 3 and made == []  # made on first use
    completions = ["exact trivial", "nope", "exact trivial", "nope"] * 3
    states = ["⊢ True", "⊢ True", "⊢ 1 = 1", "⊢ 1 = 1"] * 3
    assert reward(completions, state=states) == [1.0, 0.0, 1.0, 0.0] * 3
    assert len(made) == 3 and all(server.ran >= 1 for server in made)
    assert sum(server.ran for server in made) == 12
    for server in made:  # a state is recreated once per server at most
        assert len(server.opened) == len(set(server.opened)) <= 2
    stats = reward.stats
    assert (stats.checked, stats.closed, stats.failed) == (12, 6, 6)


def test_a_pool_needs_a_way_to_make_servers(transcripts):
    server = replayed(transcripts["proof_branching"], count=0)
    with pytest.raises(LeanloopError, match="servers=2 needs a function that makes a server"):
        LeanCheckedReward(server, servers=2)
    with pytest.raises(LeanloopError, match="servers=0"):
        LeanCheckedReward(lambda: server, servers=0)
