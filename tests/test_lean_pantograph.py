"""The Pantograph backend's requests, exactly as its protocol documents them.

No recording of real Pantograph answers is available, so its answers are not faked here: a
transport captures each request and then fails as a dead process would. Process handling of the
Pantograph framing is tested with a stand-in in test_lean_process.py; answers are exercised by
the tests marked `lean`, which run where a toolchain is installed.
"""

from __future__ import annotations

import pytest

from leanloop.lean.errors import ServerCrashed
from leanloop.lean.pantograph import PantographServer
from leanloop.lean.protocol import pantograph as proto
from leanloop.lean.server import ProofState, TheoremSource
from leanloop.lean.transport import Transport


class Capture(Transport):
    def __init__(self):
        self.requests = []
        self.generation = 1

    def exchange(self, request):
        self.requests.append(request)
        raise ServerCrashed("captured (no Lean here)")


@pytest.fixture
def server():
    return PantographServer(Capture())


def sent(server):
    return server.transport.requests[-1]


def test_goal_start(server):
    with pytest.raises(ServerCrashed):
        server.start_proof("∀ (p q : Prop), p ∧ q → q ∧ p")
    assert sent(server) == ("goal.start", {"expr": "∀ (p q : Prop), p ∧ q → q ∧ p"})


def test_goal_tactic_on_one_goal(server):
    state = ProofState(7, ("⊢ p", "⊢ q"), server.generation, id(server))
    with pytest.raises(ServerCrashed):
        server.run_tactic(state, "exact h.1", goal=1)
    assert sent(server) == ("goal.tactic", {"stateId": 7, "goalId": 1, "tactic": "exact h.1"})


def test_frontend_for_check_and_theorems(server):
    with pytest.raises(ServerCrashed):
        server.check("import Mathlib\ntheorem t : 1 = 1 := rfl")
    assert sent(server) == (
        "frontend.process",
        {"file": "import Mathlib\ntheorem t : 1 = 1 := rfl"},
    )
    source = TheoremSource("Foo.t", "Foo.lean", "import Foo.Base\n", "(n : Nat) : n = n")
    with pytest.raises(ServerCrashed):
        server.start_theorem(source)
    assert sent(server) == (
        "frontend.process",
        {"file": "import Foo.Base\n\nexample (n : Nat) : n = n := by sorry\n", "sorrys": True},
    )


def test_release_and_options(server):
    state = ProofState(3, ("⊢ p",), server.generation, id(server))
    with pytest.raises(ServerCrashed):
        server.release(state)
    assert sent(server) == ("goal.delete", {"stateIds": [3]})
    configured = PantographServer(Capture(), options={"automaticMode": True, "timeout": 5000})
    with pytest.raises(ServerCrashed):
        configured.start_proof("True")
    assert configured.transport.requests[0] == (
        "options.set",
        {"automaticMode": True, "timeout": 5000},
    )


def test_encoding_matches_the_documented_line_format():
    line = proto.encode(proto.EnvInspect(name="Nat.add_comm", value=False))
    assert line == 'env.inspect {"name":"Nat.add_comm","value":false}'


def test_stale_generation_is_refused(server):
    from leanloop.lean.errors import StaleStateError

    old = ProofState(1, ("⊢ p",), generation=0, owner=id(server))
    with pytest.raises(StaleStateError, match="process that is gone"):
        server.run_tactic(old, "simp")
