"""Search, provers and whole-proof mode against the Lean REPL's real recorded answers: proofs the
REPL completed are found and replayed from a fresh start, tactics it rejected fail, a theorem
record is started from its source file, whole proofs stand or fall by Lean's recorded verdict."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from leanloop.data.records import AttemptStatus, Pos, Theorem
from leanloop.errors import LeanloopError
from leanloop.lean.errors import ServerCrashed
from leanloop.lean.repl import ReplServer
from leanloop.lean.server import LeanMessage, TheoremSource
from leanloop.lean.transcript import TranscriptMismatch
from leanloop.lean.transport import Transport
from leanloop.ml.protocols import GeneratedTactic
from leanloop.prover.base import BaseProver
from leanloop.prover.config import ProverConfig
from tests.audit_standin import (
    audit_request,
    audit_requests,
    audited_answer,
    axiom_report_text,
    standin_account,
    without_audit,
)


class Recorded(Transport):
    """Answers a request with the answer recorded for an equal request, in any order and as
    often as it is sent (a proof replayed from a fresh start sends its requests again); any
    other request is a TranscriptMismatch. ``crash_on`` makes one tactic fail like a dead server."""

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
        asked = {k: v for k, v in request.items() if k != "infotree"}  # recorded without it
        for recorded, answer in self.exchanges:
            if recorded == asked:
                return answer
        raise TranscriptMismatch(
            f"no recorded answer for {json.dumps(request, ensure_ascii=False)}"
        )


class Audited(Recorded):
    """``Recorded``, for code leanloop sends to be judged: Lean's recorded answer on the same
    proof stated as an ``example`` (how earlier checks sent it; the proof elaborates the same),
    and, for its ``#print axioms``, leanloop's own stand-in answer reporting ``axioms``
    (default none) — Lean's real axiom reports are read in test_lean_axioms."""

    def __init__(self, *transcripts, axioms=(), crash_on: str | None = None) -> None:
        super().__init__(*transcripts, crash_on=crash_on)
        self.axioms = list(axioms)

    def exchange(self, request):
        code = request.get("cmd", "")
        requests = audit_requests(code)
        if not requests:
            return super().exchange(request)
        name = requests[-1][0]
        example = re.sub(
            rf"^theorem {re.escape(name.rsplit('.', 1)[-1])}\b",
            "example",
            without_audit(code).rstrip("\n"),
            count=1,
            flags=re.M,
        )
        answer = dict(super().exchange({**request, "cmd": example}))
        reports = [
            {
                "severity": "info",
                "pos": {"line": line, "column": 0},
                "endPos": {"line": line, "column": 13},
                "data": axiom_report_text(name, self.axioms),
            }
            for _asked, line in requests
        ]
        answer["messages"] = [*answer.get("messages", []), *reports]
        return answer


class Accounted(ReplServer):
    """A ``ReplServer`` over ``Audited``: the recordings hold no infotree, so each check's
    answer gets leanloop's own account object of the commands the honest code holds
    (``tests.audit_standin.standin_account``)."""

    def check(self, code):
        return dataclasses.replace(super().check(code), commands=standin_account(code))


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


class Judged(ReplServer):
    """The recorded REPL for the search's steps, and for the check of the proof assembled from
    them leanloop's own verdict object (no such check was recorded): accepted with ``axioms``,
    or rejected with an error in the declaration — what the search does with a verdict."""

    def __init__(self, transport, accept: bool = True, axioms=("propext",)) -> None:
        super().__init__(transport)
        self.accept, self.axioms, self.checked = accept, list(axioms), []

    def check(self, code):
        self.checked.append(code)
        errors = [] if self.accept else [LeanMessage("error", "unsolved goals", 2, 2)]
        name, _ = audit_request(code)
        return audited_answer(code, errors, {name: self.axioms})


def test_a_proof_the_repl_completed_is_found_and_replayed(transcripts):
    transcript = transcripts["proof_branching2"]
    transport = Recorded(transcript)
    server = Judged(transport)
    source = TheoremSource(
        "and_swap", "Swap.lean", prefix="", signature="(p q : Prop) : p ∧ q → q ∧ p"
    )
    prover = Canned(script(transcript))
    result = prover.search(server, theorem=source)
    recorded = [r["tactic"] for r in transcript["requests"] if "tactic" in r]
    assert result.status is AttemptStatus.PROVED and list(result.proof) == recorded
    assert result.expansions == len(recorded) and result.lean_seconds > 0
    assert result.axioms == ("propext",)
    # searched once, then replayed from a fresh start: every request sent twice
    assert transport.sent == transcript["requests"] * 2
    assert len(server.checked) == 1  # and checked whole, with its axioms audited


def test_each_theorem_of_a_transcript(transcripts):
    transcript = transcripts["proof_transitivity"]
    server = Judged(Recorded(transcript))
    prover = Canned(script(transcript))
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
    server = ReplServer(Recorded(transcript))
    result = prover.search(server, theorem=theorem, project_root=tmp_path)
    # the REPL's recorded induction' leaves two goals, for which nothing is proposed
    assert result.status is AttemptStatus.FAILED and result.tree_size == 2
    with pytest.raises(LeanloopError, match="is not in"):
        prover.search(server, theorem=theorem, project_root=tmp_path / "elsewhere")


@pytest.mark.parametrize(
    ("accept", "axioms", "status"),
    [
        (True, ["propext"], AttemptStatus.PROVED),
        (False, ["propext"], AttemptStatus.FAILED),
        (True, ["Lean.ofReduceBool"], AttemptStatus.REFUSED),
        (True, ["propext", "sorryAx"], AttemptStatus.REFUSED),
    ],
)
def test_a_proof_found_is_checked_whole_by_lean_and_audited(transcripts, accept, axioms, status):
    transcript = transcripts["proof_branching2"]
    server = Judged(Recorded(transcript), accept, axioms)
    source = TheoremSource(
        "and_swap", "Swap.lean", prefix="", signature="(p q : Prop) : p ∧ q → q ∧ p"
    )
    result = Canned(script(transcript)).search(server, theorem=source)
    (code, *_) = server.checked
    assert code.startswith("theorem and_swap (p q : Prop) : p ∧ q → q ∧ p := by\n  intro h\n")
    assert without_audit(code).endswith("\n  exact hq\n  exact hp\n")
    assert code.endswith("set_option pp.fullNames true\n#print axioms and_swap\n")
    assert result.status is status, result.error
    if status is AttemptStatus.PROVED:
        assert result.proof[-1] == "exact hp" and result.axioms == ("propext",)
    else:  # not accepted: the search went on, and ended without a proof
        assert result.proof is None
        why = "unsolved goals" if not accept else axioms[-1]
        assert why in result.error


def test_whole_proofs_stand_or_fall_by_lean_s_verdict(transcripts):
    server = Accounted(Audited(transcripts["trace_simp"], transcripts["app_type_mismatch"]))
    accepted = Canned(whole=['trace "!"\ntrivial']).prove_whole(server, goal="True")
    assert accepted.status is AttemptStatus.PROVED and accepted.axioms == ()
    assert accepted.proof == ('trace "!"\ntrivial',) and accepted.expansions == 1
    rejected = Canned(whole=["cases 1\nrfl\napply ?succ"]).prove_whole(server, goal="1 = 0")
    assert rejected.status is AttemptStatus.FAILED and rejected.proof is None
    assert "declaration has metavariables" in rejected.error
    # screened before Lean sees it: a candidate declaring an axiom is refused, with its reason
    cheat = Canned(whole=["theorem leanloop_goal : True := cheat\naxiom cheat : True"])
    refused = cheat.prove_whole(server, goal="True")
    assert refused.status is AttemptStatus.REFUSED and "axiom" in refused.error


def test_a_server_dying_mid_search_is_an_error(transcripts):
    transcript = transcripts["proof_branching2"]
    server = Judged(Recorded(transcript, crash_on="apply And.intro"))
    source = TheoremSource("s", "S.lean", "", "(p q : Prop) : p ∧ q → q ∧ p")
    result = Canned(script(transcript)).search(server, theorem=source)
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
        name="bar",
        scopes=(("namespace", "Foo"),),
    )
    tactics = ["induction n with", "| zero => rfl\n| succ n ih => simp"]
    audited = Target.of(theorem=source).audited_tactics(tactics)
    assert audited.code == (
        "import Mathlib\n\nnamespace Foo\n\nset_option maxHeartbeats 400000 in\n"
        "theorem bar (n : ℕ) : n + 0 = n := by\n  induction n with\n  | zero => rfl\n"
        "  | succ n ih => simp\n\n#print axioms bar\n\nend Foo\n"
        "set_option pp.fullNames true\n#print axioms Foo.bar\n"
    )
    assert (audited.first_line, audited.last_line, audited.name_line) == (5, 9, 11)
    assert audited.audit_line == 15
    assert Target.of(theorem=source).statement() == (
        "set_option maxHeartbeats 400000 in\ntheorem Foo.bar (n : ℕ) : n + 0 = n := by"
    )
    protected = Target.of(
        theorem=TheoremSource(
            "Foo.bar",
            "Foo.lean",
            "namespace Foo\n",
            ": True",
            name="bar",
            modifiers=("protected",),
            scopes=(("namespace", "Foo"),),
        )
    ).audited("trivial")
    assert "protected theorem bar : True := by" in protected.code
    assert protected.code.split("\n")[protected.name_line - 1] == "#print axioms Foo.bar"
    goal = Target.of(goal="True").audited("trivial")
    assert goal.code == (
        "theorem leanloop_goal : True := by\n  trivial\n\n#print axioms leanloop_goal\n\n"
        "set_option pp.fullNames true\n#print axioms leanloop_goal\n"
    )
