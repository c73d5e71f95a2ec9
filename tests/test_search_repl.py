"""Search, provers and whole-proof mode against the Lean REPL's real recorded answers: proofs the
REPL completed are found and replayed from a fresh start, tactics it rejected fail, a theorem
record is started from its source file, whole proofs stand or fall by Lean's recorded verdict."""

from __future__ import annotations

import json

import pytest

from leanloop.data.records import AttemptStatus, Pos, Theorem
from leanloop.errors import LeanloopError
from leanloop.lean.errors import ServerCrashed
from leanloop.lean.repl import ReplServer
from leanloop.lean.replay import ReplayMismatch
from leanloop.lean.server import CheckResult, LeanMessage, TheoremSource
from leanloop.lean.transport import Transport
from leanloop.ml.protocols import GeneratedTactic
from leanloop.prover.base import BaseProver
from leanloop.prover.config import ProverConfig


class Recorded(Transport):
    """Answers a request with the answer recorded for an equal request, in any order and as
    often as it is sent (a proof replayed from a fresh start sends its requests again); any
    other request is a ReplayMismatch. ``crash_on`` makes one tactic fail like a dead server."""

    generation = 1

    def __init__(self, *transcripts, crash_on: str | None = None) -> None:
        self.exchanges = [
            (request, answer)
            for transcript in transcripts
            for request, answer in zip(
                transcript["requests"], transcript["responses"], strict=False
            )
        ]
        self.sent: list[dict] = []
        self.crash_on = crash_on

    def exchange(self, request):
        self.sent.append(request)
        if self.crash_on is not None and request.get("tactic") == self.crash_on:
            raise ServerCrashed("the Lean REPL exited with status 139")
        for recorded, answer in self.exchanges:
            if recorded == request:
                return answer
        raise ReplayMismatch(f"no recorded answer for {json.dumps(request, ensure_ascii=False)}")


def script(*transcripts) -> dict[str, list[str]]:
    """The recorded tactics by the state they were sent for (the state's goals as text)."""
    table: dict[str, list[str]] = {}
    for transcript in transcripts:
        states: dict[int, str] = {}
        for request, answer in zip(transcript["requests"], transcript["responses"], strict=False):
            for sorry in answer.get("sorries", []):
                states.setdefault(sorry["proofState"], sorry["goal"])
            if "tactic" in request:
                table.setdefault(states[request["proofState"]], []).append(request["tactic"])
            if "goals" in answer and "proofState" in answer:
                states[answer["proofState"]] = "\n\n".join(answer["goals"])
    return table


class Canned(BaseProver):
    """A prover proposing given tactics (and given whole proofs), best first."""

    def __init__(self, tactics=None, whole=None, **config) -> None:
        super().__init__(ProverConfig(**config))
        self.tactics, self.whole = tactics or {}, whole or []

    @property
    def name(self) -> str:
        return "canned"

    def load_generator(self):
        table = self.tactics

        class Table:
            def generate_batch(self, states, k, **options):
                return [
                    [GeneratedTactic(t, -float(i)) for i, t in enumerate(table.get(s, []))]
                    for s in states
                ]

        return Table()

    def load_whole_proof_generator(self):
        proofs = self.whole

        class Fixed:
            def generate_batch(self, states, k, **options):
                return [[GeneratedTactic(p, -float(i)) for i, p in enumerate(proofs[:k])]]

        return Fixed()


def test_a_proof_the_repl_completed_is_found_and_replayed(transcripts):
    transcript = transcripts["proof_branching2"]
    transport = Recorded(transcript)
    server = ReplServer(transport)
    source = TheoremSource(
        "and_swap", "Swap.lean", prefix="", signature="(p q : Prop) : p ∧ q → q ∧ p"
    )
    prover = Canned(script(transcript), lean_check=False)
    result = prover.search(server, theorem=source)
    recorded = [r["tactic"] for r in transcript["requests"] if "tactic" in r]
    assert result.status is AttemptStatus.PROVED and list(result.proof) == recorded
    assert result.expansions == len(recorded) and result.lean_seconds > 0
    # searched once, then replayed from a fresh start: every request sent twice
    assert transport.sent == transcript["requests"] * 2


def test_each_theorem_of_a_transcript(transcripts):
    transcript = transcripts["proof_transitivity"]
    server = ReplServer(Recorded(transcript))
    prover = Canned(script(transcript), lean_check=False)
    for signature in (
        "(x y z : Nat) (h1 : x = y) (h2 : y = z) : x = z",
        "(f : Nat → Nat) (n : Nat) (h : n = 3) : f n = f 3",
    ):
        result = prover.search(server, theorem=TheoremSource("t", "T.lean", "", signature))
        assert result.status is AttemptStatus.PROVED and len(result.proof) == 1


def test_a_tactic_lean_rejected_fails_and_the_search_ends(transcripts):
    transcript = transcripts["Mathlib/test/20240209"]  # 'unsolved goals' after simpa
    server = ReplServer(Recorded(transcript))
    prover = Canned({"⊢ False": ["simpa using show False by done"]})
    result = prover.search(server, goal="False")
    assert result.status is AttemptStatus.FAILED and result.proof is None
    assert result.expansions == 1 and result.tree_size == 1


def test_a_theorem_record_starts_from_its_source_file(transcripts, tmp_path):
    transcript = transcripts["Mathlib/test/H20231115"]
    (tmp_path / "Succ.lean").write_text(
        "import Mathlib.Tactic.Cases\n\ntheorem succ_gt {x : Nat} : x + 1 > x := by\n  omega\n"
    )
    theorem = Theorem(
        url="https://github.com/leanloop-tests/succ",
        commit="0" * 40,
        file_path="Succ.lean",
        full_name="succ_gt",
        start=Pos(3, 1),
        end=Pos(4, 7),
    )
    prover = Canned(script(transcript))
    with pytest.raises(LeanloopError, match="needs its source file"):
        prover.search(ReplServer(Recorded(transcript)), theorem=theorem)
    prover.project_root = tmp_path
    result = prover.search(ReplServer(Recorded(transcript)), theorem=theorem)
    # the REPL's recorded induction' leaves two goals, for which nothing is proposed
    assert result.status is AttemptStatus.FAILED and result.tree_size == 2
    prover.project_root = tmp_path / "elsewhere"
    with pytest.raises(LeanloopError, match="is not in"):
        prover.search(ReplServer(Recorded(transcript)), theorem=theorem)


class Judged(ReplServer):
    """The recorded REPL for the search, and for the check of the proof assembled from it a
    verdict built here (no such check was recorded): what the search does with a verdict."""

    def __init__(self, transport, accept: bool) -> None:
        super().__init__(transport)
        self.accept, self.checked = accept, []

    def check(self, code):
        self.checked.append(code)
        errors = [] if self.accept else [LeanMessage("error", "unsolved goals")]
        return CheckResult.from_messages(errors)


@pytest.mark.parametrize("accept", [True, False])
def test_a_proof_found_is_checked_whole_by_lean(transcripts, accept):
    transcript = transcripts["proof_branching2"]
    server = Judged(Recorded(transcript), accept)
    source = TheoremSource(
        "and_swap", "Swap.lean", prefix="", signature="(p q : Prop) : p ∧ q → q ∧ p"
    )
    result = Canned(script(transcript)).search(server, theorem=source)
    (code,) = server.checked
    assert code.startswith("example (p q : Prop) : p ∧ q → q ∧ p := by\n  intro h\n")
    assert code.endswith("\n  exact hq\n  exact hp")
    if accept:
        assert result.status is AttemptStatus.PROVED and result.proof[-1] == "exact hp"
    else:
        assert result.status is AttemptStatus.ERROR and result.proof is None
        assert "Lean rejected the proof found, checked as a whole: unsolved goals" in result.error


def test_whole_proofs_stand_or_fall_by_lean_s_verdict(transcripts):
    server = ReplServer(Recorded(transcripts["trace_simp"], transcripts["app_type_mismatch"]))
    accepted = Canned(whole=['trace "!"\ntrivial']).prove_whole(server, goal="True")
    assert accepted.status is AttemptStatus.PROVED
    assert accepted.proof == ('trace "!"\ntrivial',) and accepted.expansions == 1
    rejected = Canned(whole=["cases 1\nrfl\napply ?succ"]).prove_whole(server, goal="1 = 0")
    assert rejected.status is AttemptStatus.FAILED and rejected.proof is None
    assert "declaration has metavariables" in rejected.error


def test_a_server_dying_mid_search_is_an_error(transcripts):
    transcript = transcripts["proof_branching2"]
    server = ReplServer(Recorded(transcript, crash_on="apply And.intro"))
    source = TheoremSource("s", "S.lean", "", "(p q : Prop) : p ∧ q → q ∧ p")
    result = Canned(script(transcript), lean_check=False).search(server, theorem=source)
    assert result.status is AttemptStatus.ERROR and "exited with status 139" in result.error
    assert result.expansions == 4 and result.proof is None


def test_proof_code_of_each_target():
    from leanloop.prover.target import Target

    source = TheoremSource(
        "Foo.bar",
        "Foo.lean",
        prefix="import Mathlib\n\nnamespace Foo\n",
        signature="(n : ℕ) : n + 0 = n",
        local_context="set_option maxHeartbeats 400000 in\n",
    )
    tactics = ["induction n with", "| zero => rfl\n| succ n ih => simp"]
    assert Target.of(theorem=source).tactics_code(tactics) == (
        "import Mathlib\n\nnamespace Foo\n\nset_option maxHeartbeats 400000 in\n"
        "example (n : ℕ) : n + 0 = n := by\n  induction n with\n  | zero => rfl\n"
        "  | succ n ih => simp"
    )
    assert Target.of(theorem=source).statement() == (
        "set_option maxHeartbeats 400000 in\ntheorem Foo.bar (n : ℕ) : n + 0 = n := by"
    )
    assert Target.of(goal="True").code("trivial") == "example : True := by\n  trivial"
