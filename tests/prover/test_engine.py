"""The proving engine: its shell plans a run from what the database holds of it and records
each attempt in the driver; ``run_job`` runs a ``ProofJob``; and every way of starting the same
job — ``leanloop prove --dataset``, ``--project``, ``--benchmark``, ``evaluate``, an agent's
``prove()`` and the main job — names its run by the job's one rule, so each resumes the others'.

Lean is not installed here: datasets are replayed, a project's sorries are proved on the
scripted servers of test_proving (whose verdicts are Lean's recorded answers), a benchmark is
checked by Lean's recorded verdicts."""

from __future__ import annotations

import json
import shutil
import subprocess

import leanloop.prover.assemble as assemble
from leanloop.agent.base_agent import BaseAgent
from leanloop.agent.pipeline import search_jobs, sorry_job
from leanloop.agent.pipeline_config import RunConfig
from leanloop.agent.repositories import AgentRepository
from leanloop.data.records import AttemptStatus, ProofAttempt, Repository, Theorem
from leanloop.database import DynamicDatabase
from leanloop.prover.engine import Callbacks, JobInputs, ProofRun, Shell, run_job
from leanloop.prover.job import BenchmarkTargets, DatasetTargets, ProofJob
from leanloop.prover.run import evaluate, run_proofs
from leanloop.prover.sampling import run_sampling_job
from tests.helpers import run_cli
from tests.test_benchmark_eval import recorded as recorded
from tests.test_proving import REPO, scripted_prover
from tests.test_proving import demo as demo


def attempt(theorem: Theorem, index: int, status: AttemptStatus, run: str = "r") -> ProofAttempt:
    return ProofAttempt(
        run=run,
        url=theorem.url,
        commit=theorem.commit,
        file_path=theorem.file_path,
        full_name=theorem.full_name,
        attempt=index,
        status=status,
    )


def test_the_shell_plans_from_what_the_run_stored(tmp_path, sample_dir):
    database = DynamicDatabase(tmp_path / "db.sqlite")
    theorems = assemble.dataset_theorems(DatasetTargets(path=sample_dir, limit=3), replay=True)
    a, b, c = theorems.theorems
    for made in (
        attempt(a, 0, AttemptStatus.FAILED),  # finished: skipped
        attempt(b, 0, AttemptStatus.ERROR),  # an error: made again
        attempt(c, 0, AttemptStatus.REPLAYED),  # solved
        attempt(a, 1, AttemptStatus.FAILED, run="other"),  # another run's
    ):
        database.record_attempt(made)
    seen: list[tuple[int, int]] = []
    shell = Shell("r", database, Callbacks(progress=lambda d, t: seen.append((d, t))))
    pending = shell.plan([a, b, c, a], 2)
    assert [(t.theorem.full_name, t.attempt) for t in pending] == [
        (a.full_name, 1),
        (b.full_name, 0),
        (b.full_name, 1),
        (c.full_name, 1),
    ]
    assert seen == [(2, 6)] and {s.full_name for s in shell.result.skipped} == {
        a.full_name,
        c.full_name,
    }
    first = Shell("r", database, stop_at_first=True)
    assert c.full_name not in {t.theorem.full_name for t in first.plan([a, b, c], 2)}


def test_a_dataset_job_runs_and_its_rerun_skips_what_it_finished(tmp_path, sample_dir):
    database = DynamicDatabase(tmp_path / "db.sqlite")
    job = ProofJob(targets=DatasetTargets(path=sample_dir, limit=4), lean="replay")
    results: list[ProofAttempt] = []
    first = run_job(job, JobInputs(database, callbacks=Callbacks(on_result=results.append)))
    assert isinstance(first, ProofRun) and first.run == "recorded:leandojo_benchmark_4/test:replay"
    assert len(first.new) == len(results) == 4 and not first.skipped
    assert {a.status for a in first.new} <= {AttemptStatus.REPLAYED, AttemptStatus.FAILED}
    again = run_job(job, JobInputs(database))
    assert isinstance(again, ProofRun) and not again.new and len(again.skipped) == 4


def test_prove_dataset_evaluate_and_the_main_job_resume_each_other(tmp_path, sample_dir, capsys):
    """The main job's recorded diagnostic is the job of 'prove --dataset OUT/export --split
    test --replay'; ``evaluate`` given that job joins its run too."""
    out = tmp_path / "out"
    shutil.copytree(sample_dir, out / "export")
    db = tmp_path / "db.sqlite"
    code, _, err = run_cli(
        capsys, "prove", "--dataset", out / "export", "--replay", "--limit", 5, "--db", db
    )
    assert code == 0, err
    database = DynamicDatabase(db)
    (run,) = {a.run for a in database.get_attempts()}
    assert len(database.get_attempts(run)) == 5
    trained, diagnostic = search_jobs(RunConfig(), out)
    limited = ProofJob.load(diagnostic, targets=diagnostic.targets.model_copy(update={"limit": 5}))
    resumed = run_job(limited, JobInputs(database))
    assert isinstance(resumed, ProofRun) and resumed.run == run
    assert not resumed.new and len(resumed.skipped) == 5  # nothing made again
    # the library's evaluate, given the job, is the same run
    theorems = assemble.dataset_theorems(limited.targets, replay=True).theorems  # type: ignore[arg-type]
    prover = assemble.prover(limited)
    servers = assemble.servers(limited)
    report = evaluate(theorems, prover, servers, database=database, job=limited)
    assert report.run == run and len(database.get_attempts(run)) == 5
    assert run_proofs(theorems, prover, servers, database=database, job=limited).new == []
    # the main job's trained generator: its run names the checkpoint's path and version
    assert trained.run_name("hf:g@1") == "hf:g@1:export/test:replay"


class ScriptedAgent(BaseAgent):
    """An agent whose prover is test_proving's scripted one (what a trained model would be)."""

    def _get_build_deps(self) -> bool:
        return False

    def _setup_prover(self):
        self.prover = scripted_prover()
        return self.prover


def test_prove_project_an_agent_s_prove_and_the_main_job_resume_each_other(
    demo, capsys, tmp_path, monkeypatch
):
    root, demo_database, factory, _ = demo
    (root / "lean-toolchain").write_text("leanprover/lean4:v4.9.0\n")
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True)
    subprocess.run(["git", "add", "."], cwd=root, check=True)
    commit = ["git", "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "start"]
    subprocess.run(commit, cwd=root, check=True)
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=root, check=True, capture_output=True, text=True
    ).stdout.strip()
    database = DynamicDatabase(tmp_path / "cli.db")  # the project as a trace stored it
    stored = Repository(url=str(root), commit=head)
    traced = [
        t.model_copy(update={"url": stored.url, "commit": head})
        for t in demo_database.get_sorry_theorems(REPO)
    ]
    database.add_repository(stored, traced)
    monkeypatch.setattr("leanloop.agent.repositories.require_lean", lambda: None)
    monkeypatch.setattr(assemble, "lean_launcher", lambda root, settings, limits=None: factory)
    monkeypatch.setattr(assemble, "prover", lambda *args: scripted_prover())
    args = ["prove", "--project", root, "--generator", "hf:scripted", "--db", tmp_path / "cli.db"]
    code, _, err = run_cli(capsys, *args, "--out", tmp_path / "reports", "--json")
    assert code == 0, err
    (run,) = {a.run for a in database.get_attempts()}
    assert run == f"{assemble.identity(scripted_prover())}:sorries"
    tried = len(database.get_attempts(run))
    # an agent's prove() of the same project: the same run, every theorem skipped
    monkeypatch.chdir(tmp_path)
    agent = ScriptedAgent(str(tmp_path / "cli.db"))
    agent.repos = [AgentRepository(repository=stored, kind="local", location=str(root))]
    (report,) = agent.prove(out_dir=tmp_path / "agent-reports")
    assert report.run == run and {row.outcome for row in report.rows} == {"skipped"}
    assert len(agent.database.get_attempts(run)) == tried
    # the main job's proving of the sorries is the same job
    job = sorry_job(RunConfig(), root)
    assert job.run_name(assemble.identity(scripted_prover())) == run
    assert agent.proof_job(agent.repos[0]).run_name("x") == job.run_name("x")


def test_prove_benchmark_and_a_library_job_resume_each_other(recorded, tmp_path, capsys):
    root, verdicts, rows = recorded
    generator = f"samples:{root / 'samples.jsonl'}"
    code, _, err = run_cli(
        capsys,
        "prove",
        "--benchmark",
        root / "bench.jsonl",
        "--split",
        "all",
        "--generator",
        generator,
        "--verifier",
        f"recorded:{verdicts}",
        "--prompt",
        "chat",
        "--db",
        tmp_path / "db.sqlite",
        "--out",
        tmp_path / "out",
    )
    assert code == 0, err
    database = DynamicDatabase(tmp_path / "db.sqlite")
    (run,) = {a.run for a in database.get_attempts()}
    job = ProofJob.from_dict(
        {
            "targets": BenchmarkTargets(spec=str(root / "bench.jsonl"), split="all"),
            "mode": "sampling",
            "generator": generator,
            "lean": f"recorded:{verdicts}",
            "sampling": {"prompt": "chat"},
        }
    )
    again = run_sampling_job(job, JobInputs(database))
    assert again.run == run and not again.new
    assert sum(p.samples for p in again.problems) == len(rows)
    assert json.loads((next((tmp_path / "out").glob("*/report.json"))).read_text())


def test_a_benchmark_job_searches_each_statement_from_its_source(tmp_path):
    """A benchmark job in search mode: its statements are stored as a repository and searched
    from the sources their problems give (they have no file), under the job's run name."""
    from tests.test_prover_run import Toy
    from tests.test_prover_run import prover as toy_prover

    path = tmp_path / "toy.jsonl"
    rows = [
        {
            "name": name,
            "split": "test",
            "header": "import Mathlib\n\n",
            "formal_statement": f"theorem {name} : True := by\n",
        }
        for name in ("a", "b")
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    database = DynamicDatabase(tmp_path / "db.sqlite")
    job = ProofJob(targets=BenchmarkTargets(spec=str(path)), mode="search")
    inputs = JobInputs(database, prover=toy_prover(), servers=lambda: Toy(provable={"a"}))
    run = run_job(job, inputs)
    assert isinstance(run, ProofRun) and run.run == "canned:toy/test"
    statuses = {a.full_name: a.status for a in run.attempts}
    assert statuses == {"a": AttemptStatus.PROVED, "b": AttemptStatus.FAILED}
    (repository,) = database.get_repositories()
    assert repository.url == "benchmark:toy" and len(database.get_theorems(repository)) == 2
    again = run_job(job, JobInputs(database, prover=toy_prover(), servers=lambda: Toy()))
    assert isinstance(again, ProofRun) and not again.new and len(again.skipped) == 2
