"""A candidate proof that hides commands from leanloop's screen is refused in every mode by Lean's
own account of what it elaborated: a ``macro_rules`` that rewrites the audit's ``#print axioms``
(so that a ``native_decide`` proof reports only ``propext``), and code that tries to reach the
machine (``#eval IO.Process.run``). The same stand-in accepts the honest proof.

The screen is made blind here (``blind_screen``) to stand for text a Python reading of Lean
misses: the account is the check that does not depend on that reading. The stand-in Lean
(``tests/lean_reading.py``) answers with leanloop's own objects, reading commands as Lean's
parser reads these inputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from leanloop.agent.sorry_filling import FillStatus, SorryFiller
from leanloop.data.benchmark import BenchmarkFile
from leanloop.data.records import AttemptStatus, Pos, Theorem
from leanloop.lean.screen import Screened
from leanloop.lean.server import ProofFinished, ProofState
from leanloop.lean.verification import PoolVerifier
from leanloop.ml.protocols import GeneratedTactic
from leanloop.prover.benchmark_config import BenchmarkConfig
from leanloop.prover.config import ProverConfig
from leanloop.prover.proof_search import search
from leanloop.prover.samplers import Sample
from leanloop.prover.sampling import run_benchmark
from leanloop.prover.target import Target
from leanloop.prover.whole import check_whole_proofs
from leanloop.trainer.lean_reward import LeanCheckedReward
from tests.lean_reading import ReadingLean

MACRO = "macro_rules | `(#print axioms $x) => `(#check $x)"
ESCAPE = '#eval IO.Process.run { cmd := "touch", args := #["/tmp/leanloop-escaped"] }'
#: (proof body, the word the refusal names)
HIDDEN = {
    "rewritten audit": (f"  native_decide\n{MACRO}", "macro_rules"),
    "escape": (f"  decide\n{ESCAPE}", "eval"),
    "indented escape": (f"  decide\n  {ESCAPE}", "eval"),
}
HONEST = "  decide"


@pytest.fixture
def blind_screen(monkeypatch):
    """Every screen of model output lets the candidate through, as if it missed the hidden
    text."""
    import leanloop.agent.sorry_filling as filling
    import leanloop.lean.statement as statement
    import leanloop.prover.proof_search as proof_search
    import leanloop.prover.whole as whole
    import leanloop.trainer.lean_reward as lean_reward

    passes = lambda *args, **kwargs: None  # noqa: E731
    for module in (filling, statement, proof_search, whole, lean_reward):
        monkeypatch.setattr(module, "forbidden_in_proof", passes)
    monkeypatch.setattr(statement, "forbidden_in", passes)
    monkeypatch.setattr(
        whole, "screen_candidate", lambda candidate, statement=None: Screened(candidate)
    )


class Interactive(ReadingLean):
    """``ReadingLean`` that also runs tactics: any tactic closes the goal it is given (what a
    check of the whole declaration then makes of it is the subject)."""

    def __init__(self) -> None:
        super().__init__()
        self.states = 0

    def _state(self, goal: str) -> ProofState:
        self.states += 1
        return ProofState(self.states, (goal,), 0, id(self))

    def start_proof(self, goal, *, header=""):
        return self._state(f"⊢ {goal}")

    def open_sorries(self, code):
        return [self._state("⊢ 2 + 2 = 4")]

    def run_tactic(self, state, tactic, *, goal=None):
        return ProofFinished(state.id + 1000)

    def release(self, *states):
        pass

    def close(self):
        pass


# -- whole proofs --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(HIDDEN))
def test_whole_proof_mode(blind_screen, name):
    body, word = HIDDEN[name]
    lean = ReadingLean()
    result = check_whole_proofs(lean, Target.of(goal="2 + 2 = 4"), [body], timeout=60)
    assert result.status is AttemptStatus.REFUSED and result.proof is None
    assert word in result.error and "Lean's account refuses it" in result.error
    honest = check_whole_proofs(lean, Target.of(goal="2 + 2 = 4"), [HONEST], timeout=60)
    assert honest.status is AttemptStatus.PROVED and honest.axioms == ("propext",)


def test_the_rewritten_audit_would_have_passed_without_the_account(blind_screen):
    """What the attack does: the audit's answer is forged; only the account sees through it."""
    import dataclasses

    lean = ReadingLean()
    target = Target.of(goal="2 + 2 = 4")
    audited = target.audited(HIDDEN["rewritten audit"][0])
    answer = lean.check(audited.code)
    assert [m.text for m in answer.messages] == ["'leanloop_goal' depends on axioms: [propext]"] * 2
    from leanloop.lean.audit import judge
    from leanloop.lean.axioms import AxiomPolicy

    unaccounted = dataclasses.replace(answer, commands=None)
    assert not judge(unaccounted, audited, AxiomPolicy()).accepted  # no account: no proof
    judged = judge(answer, audited, AxiomPolicy())
    assert not judged.accepted and "'macro_rules' at line 3" in judged.reason


# -- benchmark sampling ---------------------------------------------------------------------------


class Fixed:
    name = "fixed"

    def __init__(self, answer: str) -> None:
        self.answer = answer

    def sample(self, problem, n, first):
        return [Sample(self.answer, tokens=1, seconds=0.0) for _ in range(n)]


def bench(tmp_path: Path) -> BenchmarkFile:
    path = tmp_path / "b.jsonl"
    row = {
        "name": "four",
        "header": "import Mathlib\n\n",
        "formal_statement": "theorem four : 2 + 2 = 4 := by\n",
    }
    path.write_text(json.dumps(row) + "\n")
    return BenchmarkFile(path)


@pytest.mark.parametrize("name", list(HIDDEN))
def test_benchmark_mode_on_a_pool(blind_screen, tmp_path, name):
    body, word = HIDDEN[name]
    benchmark = bench(tmp_path)
    verifier = PoolVerifier(lambda key: ReadingLean(), max_servers=1)
    config = BenchmarkConfig(samples=1)
    run = run_benchmark(benchmark, benchmark.problems(), Fixed(body), verifier, config=config)
    (attempt,) = run.new
    assert attempt.status is AttemptStatus.REFUSED and word in attempt.error
    honest = run_benchmark(
        benchmark, benchmark.problems(), Fixed(HONEST), verifier, config=config, run="honest"
    )
    verifier.close()
    assert [a.status for a in honest.new] == [AttemptStatus.PROVED]


# -- sorry filling --------------------------------------------------------------------------------


def sorry_file(tmp_path: Path) -> tuple[Path, Theorem, bytes]:
    root = tmp_path / "project"
    (root / "Demo").mkdir(parents=True)
    original = b"theorem four : 2 + 2 = 4 := by\n  sorry\n\ntheorem five : 5 = 5 := rfl\n"
    (root / "Demo" / "Basic.lean").write_bytes(original)
    theorem = Theorem(
        url="https://example.com/demo",
        commit="0" * 40,
        file_path="Demo/Basic.lean",
        full_name="four",
        start=Pos(line=1, column=1),
        end=Pos(line=2, column=7),
    )
    return root, theorem, original


@pytest.mark.parametrize("name", list(HIDDEN))
def test_sorry_filling(blind_screen, tmp_path, name):
    body, word = HIDDEN[name]
    root, theorem, original = sorry_file(tmp_path)
    result = SorryFiller(root, ReadingLean()).fill(theorem, "by\n" + body)
    assert result.status is FillStatus.NOT_ACCEPTED and word in result.reason
    assert result.judgement is not None and result.judgement.outcome == "refused"
    assert (root / "Demo" / "Basic.lean").read_bytes() == original
    assert not (root / ".leanloop-backups").exists()
    honest = SorryFiller(root, ReadingLean()).fill(theorem, "by\n" + HONEST)
    assert honest.status is FillStatus.WRITTEN, honest.reason
    assert (root / "Demo" / "Basic.lean").read_bytes() == original.replace(b"sorry", b"decide")


# -- search's final check and the GRPO reward ---------------------------------------------------


class Propose:
    def __init__(self, tactic: str) -> None:
        self.tactic = tactic

    def generate_batch(self, states, k, **options):
        return [[GeneratedTactic(self.tactic, -0.1)] for _ in states]


@pytest.mark.parametrize("name", list(HIDDEN))
def test_search_final_check(blind_screen, name):
    body, word = HIDDEN[name]
    tactic = body.strip()
    result = search(Interactive(), Target.of(goal="2 + 2 = 4"), Propose(tactic), ProverConfig())
    assert result.status is AttemptStatus.REFUSED and word in result.error
    honest = search(Interactive(), Target.of(goal="2 + 2 = 4"), Propose("decide"), ProverConfig())
    assert honest.status is AttemptStatus.PROVED


@pytest.mark.parametrize("name", list(HIDDEN))
def test_lean_reward(blind_screen, name):
    body, _word = HIDDEN[name]
    reward = LeanCheckedReward(Interactive(), closed=1.0, failed=0.0)
    assert reward([body.strip()], state=["⊢ 2 + 2 = 4"]) == [0.0]
    assert reward.stats.refused == 1
    assert reward(["decide"], state=["⊢ 2 + 2 = 4"]) == [1.0]


# -- with the screen on, the same candidates never reach Lean ------------------------------------


@pytest.mark.parametrize("name", list(HIDDEN))
def test_the_screen_refuses_them_first(name):
    body, _word = HIDDEN[name]
    lean = ReadingLean()
    result = check_whole_proofs(lean, Target.of(goal="2 + 2 = 4"), [body], timeout=60)
    assert result.status is AttemptStatus.REFUSED and not lean.checked


# -- benchmark sampling through a Kimina Lean Server ----------------------------------------------


def kimina_app():
    """A loopback server speaking Kimina Lean Server's ``/verify`` in its current convention:
    the stand-in's answers (``lean_reading``) as its wire JSON — message lines counted in the
    whole code, the infotree's after the imports, as Kimina gives them."""
    from fastapi import FastAPI

    from leanloop.lean.kimina_positions import Convention, uncounted_lines
    from tests.audit_standin import infotree_json
    from tests.lean_reading import lean_reading

    app = FastAPI()

    @app.post("/verify")
    def verify(body: dict) -> dict:
        assert body.get("infotree_type") == "full"
        results = []
        for item in body["codes"]:
            code = item["proof"]
            answer = lean_reading(code)
            cut = uncounted_lines(code, Convention.AFTER_HEADER)
            messages = [
                {
                    "severity": m.severity,
                    "pos": {"line": m.line, "column": m.column},
                    "data": m.text,
                }
                for m in answer.messages
            ]
            tree = infotree_json(answer.commands, -cut)
            response = {"messages": messages, "infotree": tree}
            results.append({"custom_id": item["custom_id"], "error": None, "response": response})
        return {"results": results}

    return app


@pytest.mark.parametrize("name", list(HIDDEN))
def test_benchmark_mode_on_kimina(blind_screen, tmp_path, name):
    from leanloop.lean.kimina import KiminaVerifier
    from tests.serve_support import live_server

    body, word = HIDDEN[name]
    benchmark = bench(tmp_path)
    config = BenchmarkConfig(samples=1)
    with live_server(kimina_app()) as url:
        verifier = KiminaVerifier(url, retries=0)
        run = run_benchmark(benchmark, benchmark.problems(), Fixed(body), verifier, config=config)
        honest = run_benchmark(
            benchmark, benchmark.problems(), Fixed(HONEST), verifier, config=config, run="honest"
        )
        verifier.close()
    (attempt,) = run.new
    assert attempt.status is AttemptStatus.REFUSED and word in attempt.error
    assert [a.status for a in honest.new] == [AttemptStatus.PROVED]
