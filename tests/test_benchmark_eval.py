"""Benchmark evaluation (miniF2F / ProofNet pass@k): the readers on the real files, the statement
check, pass@k, the sampling pipeline with its bounded queue, recorded and live verification under
the soundness policy, resumption after a kill, the report and ``leanloop prove --benchmark``."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import ClassVar

import pytest

from leanloop.data.benchmark import BenchmarkFile, BenchmarkProblem, resolve_benchmark
from leanloop.data.records import AttemptStatus
from leanloop.database import DynamicDatabase
from leanloop.errors import DataFormatError, LeanloopError
from leanloop.lean.scanner import scan
from leanloop.lean.server import LeanMessage
from leanloop.lean.statement import continuation
from leanloop.lean.verdict import is_sorry_warning
from leanloop.lean.verification import RecordedVerifier, Verification
from leanloop.prover.benchmark_config import PROMPTS, BenchmarkConfig, ProofPrompt
from leanloop.prover.benchmark_report import BenchmarkReport, write_report
from leanloop.prover.passk import ks_for, pass_at_k
from leanloop.prover.samplers import EndpointSampler, RecordedSamples, Sample
from leanloop.prover.sampling import prepare, run_benchmark
from tests.audit_standin import audited_answer
from tests.helpers import assert_one_line_error, run_cli

REPO = Path(__file__).resolve().parents[1]


# -- the benchmark files ------------------------------------------------------------------------


def test_minif2f_and_proofnet_are_read_whole(fixtures):
    minif2f = BenchmarkFile(fixtures / "minif2f" / "minif2f.jsonl")
    problems = minif2f.problems()
    assert len(problems) == 488
    assert len(minif2f.problems("test")) == len(minif2f.problems("valid")) == 244
    assert all(p.formal_statement.rstrip().endswith(":= by") for p in problems)
    assert all(p.header.startswith("import Mathlib") for p in problems)
    sources = {p.source for p in problems}
    assert {"mathd_algebra", "mathd_numbertheory", "amc12a", "aime", "imo"} <= sources
    proofnet = BenchmarkFile(fixtures / "minif2f" / "proofnet.jsonl").problems()
    assert len(proofnet) == 371
    ids = [p.id for p in proofnet]
    assert len(set(ids)) == 371  # ProofNet repeats names across textbooks: ids stay distinct
    repeated = [p for p in proofnet if p.id != p.name]
    assert repeated and all(p.id == f"{p.name}@L{p.line}" for p in repeated)
    few_shot = BenchmarkFile(fixtures / "minif2f" / "minif2f_valid_few_shot.jsonl").problems()
    assert len(few_shot) == 67 and all(p.formal_proof for p in few_shot)
    # the statement of every problem starts a proof search (its source is read)
    for problem in problems[:40] + proofnet[:40]:
        assert problem.theorem_source().full_name == problem.name


def test_a_malformed_line_names_file_line_and_field(tmp_path):
    good = {"name": "a", "split": "test", "formal_statement": "theorem a : True := by\n"}
    cases = [
        ({"name": "b", "split": "test"}, "formal_statement"),
        ({**good, "name": "b", "header": 3}, "header"),
        ({**good, "name": "b", "split": "train"}, "split"),
        # no ':=' to end the statement: the answer would be read as part of the statement
        ({**good, "name": "b", "formal_statement": "theorem b : True"}, "formal_statement"),
        (
            {**good, "name": "b", "formal_statement": "theorem b : True := by /- open"},
            "formal_statement",
        ),
    ]
    for row, field in cases:
        path = tmp_path / "bad.jsonl"
        path.write_text(json.dumps(good) + "\n" + json.dumps(row) + "\n")
        with pytest.raises(DataFormatError) as caught:
            BenchmarkFile(path).problems()
        message = str(caught.value)
        assert "bad.jsonl" in message and "line 2" in message and field in message
        assert "\n" not in message
    path.write_text(json.dumps(good) + "\n{not json\n")
    with pytest.raises(DataFormatError, match="line 2"):
        BenchmarkFile(path).problems()


@pytest.mark.parametrize(
    ("statement", "opens"),
    [
        ("theorem a : True := by\n", True),
        ("theorem a : True :=\n", True),
        ("theorem a : True := by -- the proof follows\n", True),
        ("theorem a : True", False),
        ("theorem a : True := by sorry", False),
        ("theorem a (h : x := 1) : True", False),
        ('theorem a : "s" = "s := by"', False),
    ],
)
def test_a_statement_must_end_in_an_assignment(tmp_path, statement, opens):
    path = tmp_path / "bench.jsonl"
    path.write_text(json.dumps({"name": "a", "formal_statement": statement}) + "\n")
    if opens:
        assert BenchmarkFile(path).problems()[0].formal_statement == statement
        return
    with pytest.raises(DataFormatError) as caught:
        BenchmarkFile(path).problems()
    message = str(caught.value)
    assert message.startswith(f"{path}, line 1, field 'formal_statement': expected a statement")
    assert "':=' or ':= by'" in message and "\n" not in message
    with pytest.raises(ValueError, match="ending in ':=' or ':= by'"):
        BenchmarkProblem(name="a", formal_statement=statement)


LEAN_BENCHMARK = """import Mathlib

open Nat

def double (n : ℕ) : ℕ := 2 * n

/-- Doubling adds. -/
theorem double_add (a b : ℕ) : double (a + b) = double a + double b := by
  sorry

theorem proved_already : 1 + 1 = 2 := by norm_num

theorem double_zero : double 0 = 0 := sorry
"""


def test_a_lean_file_gives_a_problem_per_theorem_left_in_sorry(tmp_path):
    path = tmp_path / "mine.lean"
    path.write_text(LEAN_BENCHMARK)
    problems = BenchmarkFile(path).problems()
    assert [p.name for p in problems] == ["double_add", "double_zero"]
    first, second = problems
    assert first.header == second.header  # the file's text before the first target
    assert first.header.startswith("import Mathlib") and "def double" in first.header
    assert first.informal_prefix == "/-- Doubling adds. -/\n"
    assert first.formal_statement.endswith(":= by\n")
    assert second.formal_statement.endswith(":=\n")
    code = first.code("  simp [double]; ring\n")
    assert code.count("theorem double_add") == 1 and code.endswith("ring\n")
    (tmp_path / "none.lean").write_text("theorem t : True := trivial\n")
    with pytest.raises(LeanloopError, match="no theorem ends in sorry"):
        BenchmarkFile(tmp_path / "none.lean").problems()


def test_known_names_resolve_to_a_directory_a_download_or_one_line(tmp_path, fixtures):
    directory = fixtures / "minif2f"
    assert resolve_benchmark("minif2f", directories=[directory]) == directory / "minif2f.jsonl"
    with pytest.raises(LeanloopError) as caught:
        resolve_benchmark("minif2f", directories=[tmp_path], download=False)
    assert "minif2f.jsonl" in str(caught.value) and "\n" not in str(caught.value)
    assert "LEANLOOP_BENCHMARKS" in caught.value.hint
    with pytest.raises(LeanloopError, match="not a known benchmark"):
        resolve_benchmark("putnam-9000", directories=[directory])
    # a download from the official address (here a server on loopback) lands in the cache
    from fastapi import FastAPI
    from fastapi.responses import PlainTextResponse

    from tests.serve_support import live_server

    served = FastAPI()
    body = (directory / "proofnet.jsonl").read_text()
    served.get("/proofnet.jsonl")(lambda: PlainTextResponse(body))
    served.get("/broken.jsonl")(lambda: PlainTextResponse("<html>not here</html>"))
    with live_server(served) as url:
        cache = tmp_path / "cache"
        path = resolve_benchmark(
            "proofnet", cache_dir=cache, urls={"proofnet": f"{url}/proofnet.jsonl"}
        )
        assert path == cache / "proofnet.jsonl"
        assert len(BenchmarkFile(path).problems()) == 371
        with pytest.raises(LeanloopError, match="not JSON"):
            resolve_benchmark("broken", cache_dir=cache, urls={"broken": f"{url}/broken.jsonl"})
        assert not (cache / "broken.jsonl").exists()  # nothing that is not a benchmark is kept


# -- the statement check ------------------------------------------------------------------------

STATEMENT = "theorem t (a b : ℕ) (h : a = b) :\n  b = a := by\n"


def test_a_continuation_is_the_proof_itself():
    read = continuation("  exact h.symm\n", STATEMENT, "t")
    assert read.refusal is None and read.proof == "  exact h.symm\n" and not read.restated


def test_a_restated_file_gives_the_raw_text_after_the_statement():
    candidate = (
        "import Mathlib\n\n-- the model's own comment\ntheorem t (a b : ℕ)\n"
        "    (h : a = b) : b = a := by\n  -- by symmetry\n  exact h.symm\n"
    )
    read = continuation(candidate, STATEMENT, "t")
    assert read.refusal is None and read.restated
    assert read.proof == "  -- by symmetry\n  exact h.symm\n"


@pytest.mark.parametrize(
    ("candidate", "code", "words"),
    [
        ("theorem t (a b : ℕ) (h : a = b) : a = b := by\n  exact h\n", "changed_statement", "'a'"),
        ("theorem t (a b : ℕ) : b = a := by\n  sorry\n", "sorry", "sorry"),
        (
            "theorem t2 (a b : ℕ) (h : a = b) : b = a := by\n  exact h.symm\n",
            "changed_statement",
            "t2",
        ),
        (
            "axiom cheat : False\n"
            "theorem t (a b : ℕ) (h : a = b) : b = a := by\n  exact cheat.elim\n",
            "declares_axiom",
            "axiom",
        ),
        ("  exact h.symm\n\nend Foo\n", "command", "end"),
    ],
)
def test_what_a_candidate_may_not_do(candidate, code, words):
    read = continuation(candidate, STATEMENT, "t")
    assert read.proof is None and read.refusal is not None
    assert read.refusal.code.value == code
    assert words in read.refusal.reason


def test_prompt_formats_are_data():
    problem = BenchmarkProblem(
        name="t",
        header="import Mathlib\n",
        informal_prefix="/-- x -/\n",
        formal_statement=STATEMENT,
    )
    complete = PROMPTS["complete"]
    assert complete.text(problem).endswith("```lean4\nimport Mathlib\n/-- x -/\n" + STATEMENT)
    assert complete.candidate("  simp\n```\nThat is all.") == "  simp\n"
    chat = PROMPTS["chat"]
    messages = chat.messages(problem)
    assert [m["role"] for m in messages] == ["system", "user"]
    answer = "Try:\n```lean\nfirst\n```\nBetter:\n```lean4\ntheorem t ... \n```\n"
    assert chat.candidate(answer) == "theorem t ... \n"
    assert chat.candidate("no code here") is None
    custom = ProofPrompt(style="completion", template="{formal_statement}", extract="completion")
    assert custom.text(problem) == STATEMENT
    with pytest.raises(ValueError, match="unknown field"):
        ProofPrompt(template="{statement}")
    with pytest.raises(LeanloopError, match="prompt"):
        BenchmarkConfig.from_dict({"prompt": "nonsense"}, "bench.yaml")


# -- pass@k -------------------------------------------------------------------------------------


def test_pass_at_k_by_hand():
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - 3 / 10)  # 1 - C(3,2)/C(5,2)
    assert pass_at_k(3, 1, 1) == pytest.approx(1 / 3)
    assert pass_at_k(4, 2, 2) == pytest.approx(5 / 6)
    assert pass_at_k(10, 0, 4) == 0.0
    assert pass_at_k(4, 4, 1) == 1.0
    assert pass_at_k(8, 6, 4) == 1.0  # fewer than k wrong samples: some draw holds a right one
    for n in range(1, 13):
        for c in range(n + 1):
            for k in range(1, n + 1):
                exact = 1 - math.comb(n - c, k) / math.comb(n, k)
                assert pass_at_k(n, c, k) == pytest.approx(exact)
    assert ks_for(8) == [1, 2, 4, 8] and ks_for(6) == [1, 2, 4, 6] and ks_for(1) == [1]
    with pytest.raises(ValueError):
        pass_at_k(4, 5, 1)


# -- offline end to end on Lean's recorded verdicts ---------------------------------------------


def _split_recorded(code: str) -> tuple[str, str, str]:
    """(header, statement, proof) of a recorded code, the statement through ':= by' and a line
    break."""
    declaration = next(d for d in scan(code).declarations if d.is_theorem)
    end = code.index(":= by", declaration.start.offset) + len(":= by")
    if code[end : end + 1] == "\n":
        end += 1
    return code[: declaration.start.offset], code[declaration.start.offset : end], code[end:]


@pytest.fixture(scope="module")
def recorded(fixtures, tmp_path_factory):
    """A benchmark of the recorded verdicts' theorems, and each model's file as its sample."""
    verdicts = fixtures / "kimina_verdicts" / "verdicts.jsonl"
    rows = [json.loads(line) for line in verdicts.read_text().splitlines() if line.strip()]
    root = tmp_path_factory.mktemp("recorded")
    seen: dict[str, dict] = {}
    with (root / "bench.jsonl").open("w") as bench, (root / "samples.jsonl").open("w") as samples:
        for row in rows:
            name = next(d.name for d in scan(row["code"]).declarations if d.is_theorem)
            if name in seen:
                continue
            seen[name] = row
            header, statement, _ = _split_recorded(row["code"])
            bench.write(
                json.dumps({"name": name, "header": header, "formal_statement": statement}) + "\n"
            )
            samples.write(
                json.dumps({"name": name, "answer": f"```lean4\n{row['code']}```"}) + "\n"
            )
    return root, verdicts, seen


def _lean_accepted(row: dict) -> bool:
    """What Lean's recorded messages say: no error, no sorry (and the check did not fail)."""
    (result,) = row["result"]["results"]
    if result.get("error"):
        return False
    messages = (result.get("response") or {}).get("messages") or []
    errors = [m for m in messages if m["severity"] == "error"]
    sorry = [m for m in messages if is_sorry_warning(LeanMessage(m["severity"], m["data"]))]
    return not errors and not sorry and not (result["response"].get("sorries"))


def test_recorded_verdicts_end_to_end(recorded, tmp_path):
    root, verdicts, rows = recorded
    bench = BenchmarkFile(root / "bench.jsonl")
    database = DynamicDatabase(tmp_path / "db.sqlite")
    run = run_benchmark(
        bench,
        bench.problems(),
        RecordedSamples(root / "samples.jsonl"),
        RecordedVerifier(verdicts),
        config=BenchmarkConfig(prompt="chat"),
        database=database,
        run="offline",
    )
    expected = sum(_lean_accepted(row) for row in rows.values())
    assert expected > 60
    verified = {r.problem.name for r in run.problems if r.verified}
    assert len(verified) == expected
    assert verified == {name for name, row in rows.items() if _lean_accepted(row)}
    assert run.source == "recorded" and not run.audited
    stored = database.get_attempts("offline")
    assert len(stored) == len(rows)
    # accepted by Lean's recorded verdict, never called proved: the axioms were not audited
    assert not [a for a in stored if a.status is AttemptStatus.PROVED]
    accepted = [a for a in stored if a.status is AttemptStatus.RECORDED]
    assert len(accepted) == expected
    assert all(a.environment == "recorded" and a.axioms is None for a in accepted)
    assert all("not audited" in (a.error or "") for a in accepted)
    # the code leanloop checked is the recorded code, byte for byte
    for result in run.problems:
        first = result.first_verified
        if first is not None:
            assert result.problem.code(first.proof[0]) == rows[result.problem.name]["code"]
    report = BenchmarkReport.of(run, "recorded")
    assert report.verdicts == "recorded verdicts" and not report.axioms_audited
    assert report.splits["test"].verified == expected
    assert any("not audited" in note for note in report.notes)
    written = write_report(run, report, tmp_path / "report")
    lines = (written / "verified.jsonl").read_text().splitlines()
    assert len(lines) == expected
    assert json.loads(lines[0])["axioms"] is None
    assert "recorded verdicts" in (written / "report.md").read_text()
    assert (written / "report.png").stat().st_size > 1000


def test_a_recorded_verifier_refuses_code_it_has_no_verdict_for(recorded):
    _, verdicts, rows = recorded
    verifier = RecordedVerifier(verdicts)
    code = next(iter(rows.values()))["code"]
    assert verifier.check(code).result is not None
    changed = verifier.check(code + "\n-- one more line\n")
    assert changed.result is None and "no verdict is recorded" in changed.error
    # a proof that relies on native code cannot be audited from a recorded verdict
    header, statement, _ = _split_recorded(code)
    problem = BenchmarkProblem(name="t", header=header, formal_statement=statement)
    config = BenchmarkConfig()
    _, ended, _ = prepare(problem, "  native_decide\n", config, live=False)
    assert ended is not None and ended.status is AttemptStatus.REFUSED
    assert "native" in ended.error
    audited, ended, _ = prepare(problem, "  native_decide\n", config, live=True)
    assert ended is None and audited is not None and audited.audits  # Lean's audit decides
    for proof, word in [
        ("  bv_decide?\n", "bv_decide?"),
        ("  exact _root_.Lean.ofReduceBool _ _ rfl\n", "_root_.Lean.ofReduceBool"),
        ("  exact Lean.ofReduceNat _ _ rfl\n", "Lean.ofReduceNat"),
        ("  decide +native\n", "decide +native"),
    ]:
        _, ended, _ = prepare(problem, proof, config, live=False)
        assert ended is not None and ended.status is AttemptStatus.REFUSED, proof
        assert ended.error.startswith(f"uses {word} (native code)")
        allowed = BenchmarkConfig(allow_native=True)
        assert prepare(problem, proof, allowed, live=False)[1] is None


# -- the pipeline ---------------------------------------------------------------------------------


def _bench(tmp_path: Path, count: int) -> BenchmarkFile:
    path = tmp_path / "toy.jsonl"
    with path.open("w") as handle:
        for i in range(count):
            handle.write(
                json.dumps(
                    {
                        "name": f"toy_{i}",
                        "split": "test" if i % 2 else "valid",
                        "header": "import Mathlib\n\n",
                        "formal_statement": f"theorem toy_{i} : {i} + 0 = {i} := by\n",
                    }
                )
                + "\n"
            )
    return BenchmarkFile(path)


class ScriptedSampler:
    """Answers ``script(problem, index)`` for each sample, counting what it was asked."""

    name = "scripted"

    def __init__(self, script, delay: float = 0.0) -> None:
        self.script = script
        self.delay = delay
        self.asked: list[tuple[str, int]] = []
        self.lock = threading.Lock()

    def sample(self, problem, n, first):
        time.sleep(self.delay)
        with self.lock:
            self.asked += [(problem.id, first + i) for i in range(n)]
        return [Sample(self.script(problem, first + i), tokens=7, seconds=0.001) for i in range(n)]


class StandinVerifier:
    """A live verifier of leanloop's own answers (not Lean output): ``simp`` proofs are
    accepted (with the audit answered: propext), anything else gets an error on the proof's
    line; ``delay`` seconds per check."""

    live = True
    source = "lean"

    def __init__(self, delay: float = 0.0, axioms=("propext",)) -> None:
        self.delay = delay
        self.axioms = axioms
        self.codes: list[str] = []
        self.lock = threading.Lock()
        self.busy = 0

    def check_batch(self, codes, timeout):
        out = []
        for code in codes:
            with self.lock:
                self.codes.append(code)
            time.sleep(self.delay)
            body = code.split(":= by\n", 1)[1]
            if body.lstrip().startswith("simp"):
                line = code[: code.index(":= by\n")].count("\n") + 2
                messages = []
            else:
                line = code[: code.index(":= by\n")].count("\n") + 2
                messages = [LeanMessage("error", "unsolved goals", line, 2)]
            name = code.split("theorem ", 1)[1].split()[0]
            out.append(
                Verification(
                    audited_answer(code, messages, axioms={name: self.axioms}),
                    None,
                    self.delay,
                    "lean",
                )
            )
        return out

    def close(self):
        pass


def test_pass_at_k_over_a_run_with_a_live_verifier(tmp_path):
    bench = _bench(tmp_path, 6)
    # problem i: samples below i % 4 fail, the others are simp
    sampler = ScriptedSampler(lambda p, j: "  simp\n" if j >= int(p.name[4:]) % 4 else "  rfl\n")
    verifier = StandinVerifier()
    config = BenchmarkConfig(samples=4, batch_size=2, workers=2)
    run = run_benchmark(bench, bench.problems(), sampler, verifier, config=config)
    assert len(verifier.codes) == 24 and len(run.new) == 24
    counts = {r.problem.name: (r.samples, r.verified) for r in run.problems}
    assert counts["toy_0"] == (4, 4) and counts["toy_3"] == (4, 1) and counts["toy_5"] == (4, 3)
    proved = [a for a in run.new if a.status is AttemptStatus.PROVED]
    assert all(a.axioms == ("propext",) and a.environment == "lean" for a in proved)
    assert all(a.tokens == 7 for a in run.new)
    report = BenchmarkReport.of(run, "toy")
    test = report.splits["test"]  # toy_1 (3 of 4), toy_3 (1 of 4), toy_5 (3 of 4)
    assert test.pass_at[1] == pytest.approx((3 / 4 + 1 / 4 + 3 / 4) / 3)
    assert test.pass_at[2] == pytest.approx((1 + pass_at_k(4, 1, 2) + 1) / 3)
    assert set(report.splits) == {"valid", "test", "all"}
    assert report.tokens == 24 * 7 and report.verdicts == "verified now by Lean"


def test_axioms_outside_the_allow_list_are_refused(tmp_path):
    bench = _bench(tmp_path, 2)
    sampler = ScriptedSampler(lambda p, j: "  simp\n")
    run = run_benchmark(
        bench,
        bench.problems(),
        sampler,
        StandinVerifier(axioms=("propext", "sorryAx")),
        config=BenchmarkConfig(samples=1),
    )
    assert {a.status for a in run.new} == {AttemptStatus.REFUSED}
    assert all("sorryAx" in a.error for a in run.new)
    assert not any(r.verified for r in run.problems)


def test_a_changed_statement_has_its_own_status_and_is_not_checked(tmp_path):
    bench = _bench(tmp_path, 1)
    changed = "```lean4\ntheorem toy_0 : 0 + 0 = 1 := by\n  simp\n```"
    sampler = ScriptedSampler(lambda p, j: changed)
    verifier = StandinVerifier()
    config = BenchmarkConfig(samples=2, prompt="chat")
    run = run_benchmark(bench, bench.problems(), sampler, verifier, config=config)
    assert [a.status for a in run.new] == [AttemptStatus.CHANGED] * 2
    assert verifier.codes == []
    assert "changes the statement" in run.new[0].error


def test_stop_at_first_saves_samples_and_reports_pass_at_n_only(tmp_path):
    bench = _bench(tmp_path, 4)
    sampler = ScriptedSampler(lambda p, j: "  simp\n" if j == 1 else "  rfl\n")
    config = BenchmarkConfig(samples=8, batch_size=1, workers=1, queue_size=1, stop_at_first=True)
    verifier = StandinVerifier(delay=0.01)
    run = run_benchmark(bench, bench.problems(), sampler, verifier, config=config)
    assert all(r.verified == 1 for r in run.problems)
    # one sample of each problem per round: a problem's proof (its second sample) is verified
    # before its round comes again, so few samples after it are made
    assert len(sampler.asked) < 4 * 4
    assert all(2 <= r.samples <= 3 for r in run.problems)  # up to the proof, and in flight
    report = BenchmarkReport.of(run, "toy")
    assert list(report.splits["all"].pass_at) == [8]
    assert any("only pass@8" in note for note in report.notes)


def test_generation_waits_when_the_queue_is_full(tmp_path):
    bench = _bench(tmp_path, 10)
    verifier = StandinVerifier(delay=0.02)
    ahead: list[int] = []

    def script(problem, index):
        ahead.append(len(sampler.asked) - len(verifier.codes))
        return "  simp\n"

    sampler = ScriptedSampler(script)
    config = BenchmarkConfig(samples=4, batch_size=2, workers=2, queue_size=3)
    run_benchmark(bench, bench.problems(), sampler, verifier, config=config)
    # never more samples made than the queue, the workers' hands and one batch hold
    assert max(ahead) <= config.queue_size + config.workers + config.batch_size
    assert len(verifier.codes) == 40


def test_generation_and_verification_overlap(tmp_path):
    bench = _bench(tmp_path, 8)
    sampler = ScriptedSampler(lambda p, j: "  simp\n", delay=0.05)
    verifier = StandinVerifier(delay=0.05)
    config = BenchmarkConfig(samples=2, batch_size=2, workers=2)
    started = time.perf_counter()
    run_benchmark(bench, bench.problems(), sampler, verifier, config=config)
    wall = time.perf_counter() - started
    generation = 8 * 0.05
    verification = 16 * 0.05 / 2
    assert wall < generation + verification  # strictly less than one after the other


def test_a_failing_generator_or_verifier_becomes_errors_tried_again(tmp_path):
    bench = _bench(tmp_path, 2)

    def script(problem, index):
        if problem.name == "toy_0":
            raise RuntimeError("CUDA out of memory")
        return "  simp\n"

    database = DynamicDatabase(tmp_path / "db.sqlite")
    run = run_benchmark(
        bench,
        bench.problems(),
        ScriptedSampler(script),
        StandinVerifier(),
        config=BenchmarkConfig(samples=2),
        database=database,
        run="r",
    )
    errors = [a for a in run.new if a.status is AttemptStatus.ERROR]
    assert len(errors) == 2 and "CUDA out of memory" in errors[0].error
    again = ScriptedSampler(lambda p, j: "  simp\n")
    rerun = run_benchmark(
        bench,
        bench.problems(),
        again,
        StandinVerifier(),
        config=BenchmarkConfig(samples=2),
        database=database,
        run="r",
    )
    assert sorted(again.asked) == [("toy_0", 0), ("toy_0", 1)]
    assert all(r.verified == 2 for r in rerun.problems)


KILLED_RUN = """
import json, sys, time
from leanloop.data.benchmark import BenchmarkFile
from leanloop.database import DynamicDatabase
from leanloop.prover.benchmark_config import BenchmarkConfig
from leanloop.prover.samplers import RecordedSamples, Sample
from leanloop.lean.verification import RecordedVerifier
from leanloop.prover.sampling import run_benchmark

class Slow(RecordedSamples):
    def sample(self, problem, n, first):
        time.sleep(0.15)
        return super().sample(problem, n, first)

bench = BenchmarkFile(sys.argv[1])
run_benchmark(bench, bench.problems(), Slow(sys.argv[2]), RecordedVerifier(sys.argv[3]),
              config=BenchmarkConfig(prompt="chat", batch_size=1, workers=1, queue_size=1),
              database=DynamicDatabase(sys.argv[4]), run="killed")
print("finished", flush=True)
"""


def test_a_killed_run_goes_on_where_it_stopped(recorded, tmp_path):
    root, verdicts, rows = recorded
    db_path = tmp_path / "db.sqlite"
    script = tmp_path / "run.py"
    script.write_text(KILLED_RUN)
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    process = subprocess.Popen(
        [
            sys.executable,
            str(script),
            str(root / "bench.jsonl"),
            str(root / "samples.jsonl"),
            str(verdicts),
            str(db_path),
        ],
        env=env,
        stdout=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        stored: list = []
        while time.monotonic() < deadline:
            time.sleep(0.2)
            if db_path.exists():
                stored = DynamicDatabase(db_path).get_attempts("killed")
                if len(stored) >= 5:
                    break
        process.kill()  # no chance to clean up, as a crash or kill -9
        process.wait(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
    before = DynamicDatabase(db_path).get_attempts("killed")
    assert 5 <= len(before) < len(rows)
    bench = BenchmarkFile(root / "bench.jsonl")

    class Counting(RecordedSamples):
        asked: ClassVar[list[str]] = []

        def sample(self, problem, n, first):
            Counting.asked.append(problem.id)
            return super().sample(problem, n, first)

    run = run_benchmark(
        bench,
        bench.problems(),
        Counting(root / "samples.jsonl"),
        RecordedVerifier(verdicts),
        config=BenchmarkConfig(prompt="chat"),
        database=DynamicDatabase(db_path),
        run="killed",
    )
    done_before = {a.full_name for a in before if a.status is not AttemptStatus.ERROR}
    assert not done_before & set(Counting.asked)  # what was stored is not made again
    assert len(Counting.asked) == len(rows) - len(done_before)
    after = DynamicDatabase(db_path).get_attempts("killed")
    assert len({(a.full_name, a.attempt) for a in after}) == len(after) == len(rows)
    expected = sum(_lean_accepted(row) for row in rows.values())
    assert sum(bool(r.verified) for r in run.problems) == expected


# -- generators -----------------------------------------------------------------------------------


class _Choice:
    def __init__(self, text):
        self.text = text
        self.message = type("M", (), {"content": text})()


class _Client:
    """Stands in for the ``openai`` client: records requests, answers ``n`` choices."""

    def __init__(self):
        self.requests = []
        outer = self

        class _Endpoint:
            def __init__(self, kind):
                self.kind = kind

            def create(self, **request):
                outer.requests.append((self.kind, request))
                choices = [_Choice(f"answer {i}") for i in range(request["n"])]
                usage = type("U", (), {"completion_tokens": 10})()
                return type("R", (), {"choices": choices, "usage": usage})()

        self.completions = _Endpoint("completion")
        self.chat = type("C", (), {"completions": _Endpoint("chat")})()


def test_endpoint_sampler_asks_for_n_answers_in_the_prompts_style():
    problem = BenchmarkProblem(name="t", formal_statement=STATEMENT)
    client = _Client()
    sampler = EndpointSampler("m", PROMPTS["complete"], client=client, max_tokens=64)
    samples = sampler.sample(problem, 3, 0)
    assert [s.text for s in samples] == ["answer 0", "answer 1", "answer 2"]
    assert sorted(s.tokens for s in samples) == [3, 3, 4]  # the endpoint's 10, shared
    kind, request = client.requests[0]
    assert kind == "completion" and request["n"] == 3 and request["max_tokens"] == 64
    assert request["prompt"].endswith(STATEMENT)
    EndpointSampler("m", PROMPTS["chat"], client=client).sample(problem, 2, 0)
    kind, request = client.requests[1]
    assert kind == "chat" and request["messages"][-1]["role"] == "user"


def test_model_sampler_samples_a_local_checkpoint(sample_dir):
    from leanloop.prover.samplers import ModelSampler
    from tests.tiny_causal import shared_tiny_model

    problem = BenchmarkProblem(name="t", formal_statement=STATEMENT)
    sampler = ModelSampler(shared_tiny_model(sample_dir), PROMPTS["complete"], max_tokens=8, seed=1)
    samples = sampler.sample(problem, 3, 0)
    assert len(samples) == 3
    assert all(isinstance(s.text, str) and 0 < s.tokens <= 8 for s in samples)


# -- the command --------------------------------------------------------------------------------


def test_prove_benchmark_command_offline(recorded, tmp_path, capsys):
    root, verdicts, rows = recorded
    args = [
        "prove",
        "--benchmark",
        root / "bench.jsonl",
        "--split",
        "all",
        "--generator",
        f"samples:{root / 'samples.jsonl'}",
        "--verifier",
        f"recorded:{verdicts}",
        "--prompt",
        "chat",
        "--db",
        tmp_path / "db.sqlite",
        "--out",
        tmp_path / "out",
        "--json",
    ]
    code, out, err = run_cli(capsys, *args)
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert len(lines) == len(rows)  # stdout holds the problems' lines only
    keys = {"name", "id", "split", "status", "reason", "samples", "verified", "proof", "verdict"}
    assert set(lines[0]) == keys and {line["verdict"] for line in lines} == {"recorded"}
    expected = sum(_lean_accepted(row) for row in rows.values())
    assert sum(line["status"] == "verified" for line in lines) == expected
    assert all(line["proof"] for line in lines if line["status"] == "verified")
    accepted = f"{expected} of {len(rows)} problems accepted by recorded verdicts"
    assert "recorded verdicts" in err and accepted in err
    reports = list((tmp_path / "out").glob("*/report.json"))
    assert len(reports) == 1
    figures = json.loads(reports[0].read_text())
    assert figures["splits"]["test"]["verified"] == expected
    assert figures["verdicts"] == "recorded verdicts" and figures["axioms_audited"] is False
    # the benchmark is a repository of the database, its statements theorems
    database = DynamicDatabase(tmp_path / "db.sqlite")
    (repository,) = [r for r in database.get_repositories() if r.url.startswith("benchmark:")]
    assert len(database.get_theorems(repository)) == len(rows)
    # a rerun makes nothing again, and reports the same
    code, out, err = run_cli(capsys, *args[:-1])
    assert code == 0 and accepted in out
    assert len(database.get_attempts()) == len(rows)


def test_prove_benchmark_says_what_is_missing(tmp_path, fixtures, capsys):
    bench = fixtures / "minif2f" / "minif2f_valid_few_shot.jsonl"
    base = ["prove", "--benchmark", bench, "--generator", "recorded", "--db", tmp_path / "d.db"]
    code, _, err = run_cli(capsys, *base, "--split", "valid")
    assert_one_line_error(code, err)
    assert "needs Lean" in err or "needs --project" in err
    code, _, err = run_cli(capsys, *base, "--split", "train")
    assert_one_line_error(code, err, "test, valid or all")
    code, _, err = run_cli(capsys, *base, "--split", "valid", "--verifier", "kimina")
    assert_one_line_error(code, err, "kimina:URL")
    code, _, err = run_cli(capsys, "prove", "--dataset", tmp_path, "--samples", "4")
    assert_one_line_error(code, err, "--samples goes with --benchmark")
    code, _, err = run_cli(capsys, *base, "--benchmark", tmp_path / "nothing.jsonl")
    assert_one_line_error(code, err, "nothing.jsonl")


# -- verification at scale ----------------------------------------------------------------------


def test_the_pool_elaborates_the_imports_once_per_repl(transcripts):
    """Two pieces of code under ``import Mathlib`` checked on one REPL, with Lean's real
    recorded answers (each recorded in a fresh REPL right after the import): the import is
    sent once, then each code in its environment; the recording refuses anything else."""
    from leanloop.lean.audit import Outcome
    from leanloop.lean.repl import ReplServer
    from leanloop.lean.transcript import TranscriptTransport
    from leanloop.lean.verification import PoolVerifier

    first, second = transcripts["Mathlib/test/exact"], transcripts["Mathlib/test/induction"]
    assert first["requests"][0] == second["requests"][0] == {"cmd": "import Mathlib"}
    exchanges = [
        (first["requests"][0], first["responses"][0]),
        (first["requests"][1], first["responses"][1]),
        (second["requests"][1], second["responses"][1]),
    ]
    made: list[TranscriptTransport] = []

    def factory(key):
        made.append(TranscriptTransport(exchanges, name="import once", ignore=("infotree",)))
        return ReplServer(made[-1])

    codes = [f"import Mathlib\n{r['requests'][1]['cmd']}" for r in (first, second)]
    verifier = PoolVerifier(factory, max_servers=1)
    results = verifier.check_batch(codes, 60)
    verifier.close()
    assert len(made) == 1 and made[0].finished  # one REPL, every recorded exchange, in order
    assert [r.result.verdict for r in results] == [Outcome.SORRY] * 2
    assert all(r.error is None and r.source == "lean" for r in results)


def test_kimina_server_verifies_with_the_audit(recorded, tmp_path):
    """Through a local server speaking Kimina Lean Server's wire format: Lean's recorded
    messages for the model's code, and, at leanloop's audit lines, axiom reports of
    leanloop's stand-in (not Lean output), with the stand-in's account of the commands as an
    infotree (counted after the imports, as Kimina gives it): the run audits axioms and counts
    what Lean accepted."""
    from fastapi import FastAPI

    from leanloop.lean.kimina import KiminaVerifier
    from leanloop.lean.kimina_positions import Convention, uncounted_lines
    from tests.audit_standin import (
        audit_requests,
        axiom_report_text,
        infotree_json,
        standin_account,
        without_audit,
    )
    from tests.serve_support import live_server

    root, _, rows = recorded
    by_code = {row["code"].rstrip(): row["result"]["results"][0] for row in rows.values()}
    served = FastAPI()
    batches: list[int] = []

    @served.post("/verify")
    def verify(body: dict) -> dict:
        batches.append(len(body["codes"]))
        results = []
        for item in body["codes"]:
            code = item["proof"]
            recorded_result = by_code.get(without_audit(code).rstrip())
            if recorded_result is None:
                results.append({"custom_id": item["custom_id"], "error": "unknown code"})
                continue
            response = dict(recorded_result.get("response") or {})
            messages = list(response.get("messages") or [])
            for name, line in audit_requests(code):
                text = axiom_report_text(name.split(".")[-1], ["propext", "Classical.choice"])
                messages.append(
                    {"severity": "info", "pos": {"line": line, "column": 0}, "data": text}
                )
            assert body.get("infotree_type") == "full"
            cut = uncounted_lines(code, Convention.AFTER_HEADER)
            tree = infotree_json(standin_account(code), -cut)
            results.append(
                {
                    "custom_id": item["custom_id"],
                    "error": recorded_result.get("error"),
                    "response": {**response, "messages": messages, "infotree": tree},
                }
            )
        return {"results": results}

    bench = BenchmarkFile(root / "bench.jsonl")
    with live_server(served) as url:
        verifier = KiminaVerifier(url, batch_size=4, retries=0)
        run = run_benchmark(
            bench,
            bench.problems(),
            RecordedSamples(root / "samples.jsonl"),
            verifier,
            config=BenchmarkConfig(prompt="chat", workers=2, verify_batch=4),
            verifier_name=f"kimina:{url}",
        )
        verifier.close()
    expected = sum(_lean_accepted(row) for row in rows.values())
    assert sum(bool(r.verified) for r in run.problems) == expected
    proved = [a for a in run.new if a.status is AttemptStatus.PROVED]
    assert len(proved) == expected  # live Lean and the audit: proved
    assert all(a.axioms == ("Classical.choice", "propext") for a in proved)
    assert all(a.environment == "lean" for a in proved) and run.audited
    assert max(batches) > 1  # candidates went in batches
    timeouts = [a for a in run.new if a.status is AttemptStatus.TIMEOUT]
    assert len(timeouts) == len(rows) - expected  # Kimina's "Lean process timed out"
