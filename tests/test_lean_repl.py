"""The Lean REPL client and backend against the REPL's own recorded exchanges (real Lean output).

Every request the client sends is compared with the recorded request; every answer is the
recorded answer.
"""

from __future__ import annotations

import pytest

from leanloop.lean.audit import Outcome
from leanloop.lean.errors import LeanRequestError, ProtocolError, StaleStateError
from leanloop.lean.protocol import repl as proto
from leanloop.lean.repl import ReplClient, ReplServer, split_header
from leanloop.lean.server import ProofFinished, ProofState, TacticFailed
from leanloop.lean.transcript import TranscriptMismatch, TranscriptTransport


def replay(transcript) -> TranscriptTransport:
    return TranscriptTransport(
        list(zip(transcript["requests"], transcript["responses"], strict=False)),
        name=transcript["name"],
        ignore=("infotree",),  # recorded without it: check() asks for it, these answers lack it
    )


def server_for(transcript) -> ReplServer:
    return ReplServer(replay(transcript))


#: Requests that save or restore environments and proof states, which leanloop does not send.
PICKLING = frozenset({"pickleTo", "unpickleEnvFrom", "unpickleProofStateFrom"})


def test_every_transcript_passes_through_the_client(transcripts):
    assert len(transcripts) >= 50
    answers = pickling = 0
    for transcript in transcripts.values():
        exchanges = []
        for raw_request, raw_answer in zip(
            transcript["requests"], transcript["responses"], strict=False
        ):
            if PICKLING & set(raw_request):
                with pytest.raises(ProtocolError, match="not a Lean REPL request"):
                    proto.parse_request(raw_request)
                pickling += 1
            else:
                exchanges.append((raw_request, raw_answer))
        transport = TranscriptTransport(exchanges, name=transcript["name"])
        client = ReplClient(transport)
        for raw_request, raw_answer in exchanges:
            request = proto.parse_request(raw_request)
            assert request.to_json() == raw_request, transcript["name"]
            answer = client.send(request)  # the replay fails if the request differs
            # every field Lean sent is exposed by the typed answer, nothing is lost or added
            assert answer.to_json() == raw_answer, transcript["name"]
            assert not answer.model_extra, (transcript["name"], answer.model_extra)
            answers += 1
        assert transport.finished
    assert answers >= 155 and pickling == 18


def test_typed_fields_are_reachable(transcripts):
    answer = proto.parse_answer(
        proto.CommandRequest(cmd="x", all_tactics=True), transcripts["all_tactics"]["responses"][0]
    )
    step = answer.tactics[0]
    assert (step.tactic, step.goals, step.proof_state) == ("have t := 37", "⊢ Nat", 0)
    assert step.used_constants == ["instOfNatNat", "Nat", "OfNat.ofNat"]
    assert (step.pos.line, step.pos.column, step.end_pos.column) == (1, 18, 30)
    traced = transcripts["trace_simp"]["responses"][5]
    step_answer = proto.parse_answer(proto.TacticRequest(tactic="t", proof_state=0), traced)
    assert step_answer.traces == ["37"] and step_answer.proof_status.startswith("Incomplete")


def test_replay_rejects_a_different_request(transcripts):
    transport = replay(transcripts["proof_branching"])
    client = ReplClient(transport)
    with pytest.raises(TranscriptMismatch, match="differs from the recording"):
        client.command("theorem other : True := by sorry")


def test_proof_search_flow_until_completed(transcripts):
    server = server_for(transcripts["proof_branching"])
    (state,) = server.open_sorries(
        "theorem complex_and (p q r : Prop) (h1 : p ∧ q) (h2 : q → r) : p ∧ r := by sorry"
    )
    assert state.goals == ("p q r : Prop\nh1 : p ∧ q\nh2 : q → r\n⊢ p ∧ r",)
    state = server.run_tactic(state, "apply And.intro")
    assert isinstance(state, ProofState) and len(state.goals) == 2
    assert state.pretty.startswith("case left") and "\n\ncase right" in state.pretty
    state = server.run_tactic(state, "exact h1.left")
    state = server.run_tactic(state, "apply h2")
    done = server.run_tactic(state, "exact h1.right")
    assert isinstance(done, ProofFinished)


@pytest.mark.parametrize(
    ("name", "code", "tactic", "error"),
    [
        # an error message makes the step fail although Lean reports no goals left
        (
            "invalid_tactic",
            "theorem my_theorem (x : Nat) : x = x := by sorry",
            "exact my_fake_premise",
            "Unknown identifier `my_fake_premise`",
        ),
        ("unknown_tactic", "def f : Nat := by sorry", "exat 42", "unknown tactic"),
        ("tactic_mode_sorry", "def f : Nat := by sorry", "sorry", "leaves a sorry"),
    ],
)
def test_failed_tactics(transcripts, name, code, tactic, error):
    server = server_for(transcripts[name])
    (state,) = server.open_sorries(code)
    result = server.run_tactic(state, tactic)
    assert isinstance(result, TacticFailed)
    assert error in result.error


def test_no_goals_but_incomplete_is_a_failure(transcripts):
    server = server_for(transcripts["app_type_mismatch"])
    assert server.check("example : 1 = 0 := by\n  cases 1\n  rfl\n  apply ?succ").verdict is (
        Outcome.REJECTED
    )
    (state,) = server.open_sorries("example : 1 = 0 := sorry")
    state = server.run_tactic(state, "cases 1")
    state = server.run_tactic(state, "rfl")
    result = server.run_tactic(state, "apply ?succ")
    assert isinstance(result, TacticFailed) and "metavariable" in result.error


def test_imports_are_elaborated_once(transcripts):
    server = server_for(transcripts["Mathlib/test/exact"])
    (state,) = server.open_sorries("import Mathlib\n\ntheorem test : 0 < 1 := by sorry")
    done = server.run_tactic(state, "exact?")
    assert isinstance(done, ProofFinished)
    assert any("Try this" in m.text for m in done.messages)  # infos do not make it fail
    (state,) = server.open_sorries("import Mathlib\ntheorem test : 3 = 7 := by sorry")
    failed = server.run_tactic(state, "exact?")
    assert isinstance(failed, TacticFailed) and "could not close the goal" in failed.error


def test_unknown_proof_state_is_a_request_error(transcripts):
    server = server_for(transcripts["unknown_proof_state"])
    (state,) = server.open_sorries("def f : Nat := by sorry")
    forged = ProofState(1, state.goals, state.generation, state.owner)
    with pytest.raises(LeanRequestError, match="Unknown proof state"):
        server.run_tactic(forged, "exact 42")


def test_states_of_another_server_are_refused(transcripts):
    server = server_for(transcripts["tactic_mode_sorry"])
    (state,) = server.open_sorries("def f : Nat := by sorry")
    other = server_for(transcripts["tactic_mode_sorry"])
    with pytest.raises(StaleStateError):
        other.run_tactic(state, "sorry")


@pytest.mark.parametrize(
    ("name", "index", "verdict"),
    [
        ("have_by_sorry", 0, Outcome.REJECTED),  # unsolved goals
        ("have_by_sorry", 1, Outcome.SORRY),
        ("incomplete", 0, Outcome.REJECTED),
        ("tactic_sorry", 0, Outcome.SORRY),
        ("term_sorry", 0, Outcome.SORRY),
        ("line_breaks", 2, Outcome.ACCEPTED),
        ("synthesize_placeholder", 0, Outcome.REJECTED),
        ("invalid_line_break", 0, Outcome.REJECTED),
    ],
)
def test_check_verdicts_on_recorded_answers(transcripts, name, index, verdict):
    transcript = transcripts[name]
    request = transcript["requests"][index]
    assert set(request) == {"cmd"}
    recording = [(request, transcript["responses"][index])]
    server = ReplServer(TranscriptTransport(recording, ignore=("infotree",)))
    result = server.check(request["cmd"])
    assert result.verdict is verdict
    assert result.commands is None  # recorded without an infotree: no account of the commands


def test_split_header_keeps_line_numbers():
    header, body, skipped = split_header(
        "import Mathlib\nimport Aesop\n\n-- note\ntheorem x : True"
    )
    assert header == "import Mathlib\nimport Aesop"
    assert body == "-- note\ntheorem x : True" and skipped == 3
    assert split_header("theorem x : True") == ("", "theorem x : True", 0)


def test_start_theorem_in_its_file_context(transcripts):
    from leanloop.lean.scanner import scan
    from leanloop.lean.server import TheoremSource

    source = "import Mathlib.Tactic.Cases\n\ntheorem succ_gt {x : Nat} : x + 1 > x := by\n  omega\n"
    scanned = scan(source)
    theorem = TheoremSource.from_scan(scanned, scanned.by_name["succ_gt"], "Succ.lean")
    assert theorem.prefix == "import Mathlib.Tactic.Cases\n\n"
    server = server_for(transcripts["Mathlib/test/H20231115"])
    state = server.start_theorem(theorem)
    assert state.goals == ("x : Nat\n⊢ x + 1 > x",)
    after = server.run_tactic(state, "induction' x with x hx")
    assert isinstance(after, ProofState) and len(after.goals) == 2
    assert after.goals[0].startswith("case zero")
