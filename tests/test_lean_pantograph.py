"""The Pantograph backend: the requests it sends, exactly as Pantograph's protocol documents them,
and how it reads Pantograph's answers.

No recording of a Pantograph process is at hand, so the answers read here are the ones Pantograph's
own repositories record:

- leanprover/Pantograph, ``Test/Integration.lean``: its integration test sends each command to the
  REPL and checks that the JSON it prints equals ``Lean.toJson`` of the expected result. Those
  results are written there as Lean structures; here they are written out as that JSON, with the
  field names and defaults of ``Pantograph/Protocol.lean`` and the rules of Lean's derived
  ``ToJson`` (an ``x?`` field is left out when ``none``, every other field is always printed).
- stanford-centaur/PyPantograph, ``docs/data.ipynb``: the recorded output of a notebook that ran
  Pantograph (an ``env.inspect`` answer as PyPantograph returns it, unchanged, and a
  ``frontend.process`` answer as PyPantograph parsed it).

Answers that carry Lean's messages (failed tactics, ``sorry`` warnings, rejected files) are not
tested here: their JSON form (``Lean.SerialMessage``) depends on the Lean release and is not
recorded verbatim in those repositories.
"""

from __future__ import annotations

import pytest

from leanloop.lean.account import place
from leanloop.lean.audit import Outcome
from leanloop.lean.errors import LeanRequestError, ProtocolError, ServerCrashed, Unsupported
from leanloop.lean.pantograph import PantographServer
from leanloop.lean.protocol import pantograph as proto
from leanloop.lean.server import ProofFinished, ProofState, TacticFailed, TheoremSource
from leanloop.lean.transcript import TranscriptTransport
from leanloop.lean.transport import Transport


class Capture(Transport):
    """Answers with the recorded exchanges (each request must equal the recorded one), then keeps
    every further request and fails as a dead process would."""

    def __init__(self, recorded=()):
        self.recorded = TranscriptTransport(list(recorded), name="Pantograph")
        self.requests = []
        self.generation = 1

    def exchange(self, request):
        self.requests.append(request)
        if not self.recorded.finished:
            return self.recorded.exchange(request)
        raise ServerCrashed("captured (no Lean here)")


class Answering(Transport):
    """Answers each request with the next recorded answer, whatever the request (for answers
    recorded for a request that differs from leanloop's only in ways that do not change it)."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.requests = []
        self.generation = 1

    def exchange(self, request):
        self.requests.append(request)
        return self.answers.pop(0)


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
    """Code whose imports the process did not start with is sent whole, for Pantograph to
    elaborate its header (without ``readHeader`` an ``import`` there is an error)."""
    with pytest.raises(ServerCrashed):
        server.check("import Mathlib\ntheorem t : 1 = 1 := rfl")
    assert sent(server) == (
        "frontend.process",
        {"file": "import Mathlib\ntheorem t : 1 = 1 := rfl", "readHeader": True},
    )
    source = TheoremSource("Foo.t", "Foo.lean", "import Foo.Base\n", "(n : Nat) : n = n")
    with pytest.raises(ServerCrashed):
        server.start_theorem(source)
    assert sent(server) == (
        "frontend.process",
        {
            "file": "import Foo.Base\n\nexample (n : Nat) : n = n := by sorry\n",
            "readHeader": True,
            "sorrys": True,
        },
    )
    with pytest.raises(ServerCrashed):
        server.check("theorem t : 1 = 1 := rfl")  # no imports: the process's environment
    assert sent(server) == ("frontend.process", {"file": "theorem t : 1 = 1 := rfl"})


def test_code_whose_imports_the_process_holds_is_sent_without_them():
    server = PantographServer(Capture(), modules=("Mathlib", "Foo.Base"))
    with pytest.raises(ServerCrashed):
        server.check("import Mathlib\nimport Foo.Base\n\ntheorem t : 1 = 1 := rfl")
    assert sent(server) == ("frontend.process", {"file": "theorem t : 1 = 1 := rfl"})


def test_tactics_and_an_infotree_are_refused_before_anything_is_sent(server):
    for asked in ({"all_tactics": True}, {"infotree": "full"}):
        with pytest.raises(Unsupported) as refused:
            server.elaborate("theorem t : 1 = 1 := rfl", **asked)
        assert "pantograph backend cannot give" in refused.value.message
        assert "\n" not in refused.value.message and "--lean repl" in refused.value.hint
    assert server.transport.requests == []


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


# -- answers Pantograph printed --------------------------------------------------------------------
# leanprover/Pantograph, Test/Integration.lean (test_tactic, test_tactic_timeout,
# test_automatic_mode, test_import_open), written out as JSON (see the module docstring).


def variable(name, user_name, type_, *, inaccessible=False):
    return {
        "name": name,
        "userName": user_name,
        "isInaccessible": inaccessible,
        "type": {"pp": type_},
    }


def goal(name, target, variables, user_name=None):
    found = {"name": name, "fragment": "tactic", "target": {"pp": target}, "vars": variables}
    if user_name is not None:
        found["userName"] = user_name
    return found


def tactic_result(next_state_id, goals, *, has_sorry=False):
    return {
        "nextStateId": next_state_id,
        "goals": goals,
        "messages": [],
        "hasSorry": has_sorry,
        "hasUnsafe": False,
    }


X = variable("_uniq.10", "x", "Prop")
P, Q = variable("_uniq.10", "p", "Prop"), variable("_uniq.13", "q", "Prop")
INTRO_X = (
    ("goal.tactic", {"stateId": 0, "tactic": "intro x"}),
    tactic_result(1, [goal("_uniq.11", "∀ (q : Prop), x ∨ q → q ∨ x", [X])]),
)
INTRO_Y = (
    ("goal.tactic", {"stateId": 1, "tactic": "intro y"}),
    tactic_result(2, [goal("_uniq.14", "x ∨ y → y ∨ x", [X, variable("_uniq.13", "y", "Prop")])]),
)
SORRY = (
    ("goal.tactic", {"stateId": 0, "tactic": "sorry"}),
    tactic_result(3, [], has_sorry=True),
)
INL = goal("_uniq.61", "q ∨ p", [P, Q, variable("_uniq.49", "h✝", "p", inaccessible=True)], "inl")
INR = goal("_uniq.74", "q ∨ p", [P, Q, variable("_uniq.62", "h✝", "q", inaccessible=True)], "inr")
INL_H = goal("_uniq.80", "p", [P, Q, variable("_uniq.49", "h✝", "p", inaccessible=True)], "inl.h")


def state(server, state_id, *goals):
    """A state of ``server`` (the goals of the states a test starts from are left out: only
    Pantograph's number for the state is sent)."""
    return ProofState(state_id, goals, server.generation, id(server))


def test_tactic_steps_become_proof_states():
    server = PantographServer(Capture([INTRO_X, INTRO_Y]))
    start = state(server, 0)
    first = server.run_tactic(start, "intro x")
    assert first == state(server, 1, "x : Prop\n⊢ ∀ (q : Prop), x ∨ q → q ∨ x")
    second = server.run_tactic(first, "intro y")
    assert isinstance(second, ProofState) and second.id == 2
    assert second.goals == ("x : Prop\ny : Prop\n⊢ x ∨ y → y ∨ x",)
    assert server.transport.recorded.finished and server.stats.failures == 0


def test_a_step_that_leaves_a_sorry_fails():
    server = PantographServer(Capture([SORRY]))
    result = server.run_tactic(state(server, 0), "sorry")
    assert result == TacticFailed("the tactic leaves a sorry")
    assert server.stats.failures == 1


def test_no_goals_left_finishes_the_proof_and_options_are_set_first():
    server = PantographServer(
        Capture(
            [
                (("options.set", {"timeout": 0}), {}),
                (("goal.tactic", {"stateId": 0, "tactic": "simp"}), tactic_result(1, [])),
            ]
        ),
        options={"timeout": 0},
    )
    assert server.run_tactic(state(server, 0), "simp") == ProofFinished(1)


@pytest.mark.parametrize("automatic", [False, True])
def test_case_names_inaccessible_names_and_goals_left_aside(automatic):
    intro = tactic_result(
        1, [goal("_uniq.17", "q ∨ p", [P, Q, variable("_uniq.16", "h", "p ∨ q")])]
    )
    applied = tactic_result(3, [INL_H, INR] if automatic else [INL_H])
    server = PantographServer(
        Capture(
            [
                (("options.set", {"automaticMode": automatic}), {}),
                (("goal.tactic", {"stateId": 0, "tactic": "intro p q h"}), intro),
                (
                    ("goal.tactic", {"stateId": 1, "tactic": "cases h"}),
                    tactic_result(2, [INL, INR]),
                ),
                (("goal.tactic", {"stateId": 2, "tactic": "apply Or.inr"}), applied),
            ]
        ),
        options={"automaticMode": automatic},
    )
    introduced = server.run_tactic(state(server, 0), "intro p q h")
    assert introduced.goals == ("p : Prop\nq : Prop\nh : p ∨ q\n⊢ q ∨ p",)
    cases = server.run_tactic(introduced, "cases h")
    assert cases.goals == (
        "case inl\np : Prop\nq : Prop\nh✝ : p\n⊢ q ∨ p",
        "case inr\np : Prop\nq : Prop\nh✝ : q\n⊢ q ∨ p",
    )
    after = server.run_tactic(cases, "apply Or.inr")
    assert after.id == 3
    assert after.goals[0] == "case inl.h\np : Prop\nq : Prop\nh✝ : p\n⊢ p"
    assert len(after.goals) == (2 if automatic else 1)


def test_start_proof_continues_from_the_state_pantograph_numbered():
    recorded = (
        ("goal.start", {"expr": "∀ (x : Sort u), Sort (u + 1)"}),
        {"stateId": 3, "root": "_uniq.5"},
    )
    server = PantographServer(Capture([recorded]))
    with pytest.raises(ServerCrashed):
        server.start_proof("∀ (x : Sort u), Sort (u + 1)")
    # Lean's rendering of the goal comes with a first empty step on the state just started
    assert sent(server) == ("goal.tactic", {"stateId": 3, "tactic": "skip"})


def test_an_interaction_error_is_a_request_error():
    # Pantograph's answer to a goal.tactic that ran past the timeout set with options.set
    # (the recorded request assigned an expression, leanloop sends a tactic: same answer shape)
    server = PantographServer(Answering({"error": "internal", "desc": "interrupt"}))
    with pytest.raises(LeanRequestError, match=r"refused goal.tactic \(internal\): interrupt"):
        server.run_tactic(state(server, 0), "simp")
    assert server.stats.failures == 1


# stanford-centaur/PyPantograph, docs/data.ipynb (see the module docstring)


def test_inspect_reads_the_type_and_keeps_the_source_position():
    # PyPantograph asked with "value": false, "dependency": false, Pantograph's defaults
    answer = {
        "type": {"pp": "Nat → Nat"},
        "sourceStart": {"line": 2, "column": 0},
        "sourceEnd": {"line": 2, "column": 42},
        "isUnsafe": False,
    }
    server = PantographServer(Answering(answer))
    found = server.inspect("mystery")
    assert server.transport.requests == [("env.inspect", {"name": "mystery", "source": True})]
    assert found.type.pp == "Nat → Nat" and found.is_unsafe is False
    assert found.model_extra["sourceEnd"] == {"line": 2, "column": 42}


def test_check_of_a_file_without_messages_is_accepted():
    # PyPantograph's check_compile printed CompilationUnit(i_begin=0, i_end=31, messages=[],
    # ...) for this code: a frontend.process answer with one unit, its boundary and no messages
    # (PyPantograph sent "readHeader", "inheritEnv" and "newConstants" false, Pantograph's
    # defaults)
    code = "\nexample : 1 + 1 = 2 := by rfl\n"
    server = PantographServer(Answering({"units": [{"boundary": [0, 31], "messages": []}]}))
    result = server.check(code)
    assert server.transport.requests == [("frontend.process", {"file": code})]
    assert result.verdict is Outcome.ACCEPTED and result.messages == ()


# leanprover/Pantograph, Test/Integration.lean: the compilation units' boundaries


def test_the_units_boundaries_are_lean_s_account_of_the_commands():
    # test_import_open: frontend.process of this header with readHeader (and inheritEnv, which
    # changes the environment kept afterwards, not the answer): the imports are no unit
    code = "import Init\nopen Nat\nuniverse u"
    assert len(code.encode("utf-8")) == 31  # the header's utf8ByteSize there: the last end
    server = PantographServer(
        Answering({"units": [{"boundary": [12, 21]}, {"boundary": [21, 31]}]}), modules=()
    )
    result = server.check(code)
    assert server.transport.requests == [("frontend.process", {"file": code, "readHeader": True})]
    assert result.verdict is Outcome.ACCEPTED
    assert [(c.kind, c.line, c.column, c.end_line, c.end_column) for c in result.commands] == [
        (None, 2, 0, 2, 8),
        (None, 3, 0, 3, 10),
    ]
    placed = place(result.commands, code)
    assert [code[p.start : p.end] for p in placed] == ["open Nat", "universe u"]


def test_the_boundaries_count_bytes():
    # test_frontend_process: one unit spanning the file, its end at the file's utf8ByteSize (the
    # answer as Pantograph gives it without the invocations file that test also asked for)
    code = "example : ∀ (p q: Prop), p → p ∨ q := by\n  intro p q h\n  exact Or.inl h"
    size = len(code.encode("utf-8"))
    assert size == len(code) + 6  # ∀, → and ∨: three bytes each
    server = PantographServer(Answering({"units": [{"boundary": [0, size]}]}))
    (command,) = server.check(code).commands
    assert (command.line, command.column) == (1, 0)
    assert (command.end_line, command.end_column) == (3, len("  exact Or.inl h"))
    with pytest.raises(ProtocolError, match="not in the code"):
        PantographServer(Answering({"units": [{"boundary": [0, size + 1]}]})).check(code)
    with pytest.raises(ProtocolError, match="splits a character"):
        PantographServer(Answering({"units": [{"boundary": [0, 11]}]})).check(code)
