"""A sampling job checks its samples on Ray when it is given an address: the same attempts as
in-process, each resuming the other's run, and a verification worker that dies is replaced while
the sample it held is an ``error`` that the next run makes again."""

from __future__ import annotations

import functools
import json
import os
import sys
import threading
from pathlib import Path

import pytest

from leanloop.data.records import AttemptStatus
from leanloop.database import DynamicDatabase
from leanloop.errors import LeanloopError
from leanloop.lean.verification import RecordedVerifier
from leanloop.prover.engine import Callbacks, JobInputs, run_job
from leanloop.prover.job import BenchmarkTargets, ProofJob
from tests.test_benchmark_eval import recorded  # noqa: F401 (a fixture)
from tests.test_evaluate import Killer, local_ray  # noqa: F401 (a fixture)

PROBLEMS = 6


@pytest.fixture(scope="module")
def files(recorded, tmp_path_factory):  # noqa: F811
    """A benchmark of a few recorded theorems, two answers each (the recorded file and one
    without a proof: in this order for every other theorem, the other way for the rest), and
    Lean's recorded verdicts."""
    root, verdicts, rows = recorded
    here = tmp_path_factory.mktemp("ray_sampling")
    bench_rows = (root / "bench.jsonl").read_text().splitlines()[:PROBLEMS]
    (here / "bench.jsonl").write_text("\n".join(bench_rows) + "\n")
    names = [json.loads(line)["name"] for line in bench_rows]
    with (here / "samples.jsonl").open("w") as samples:
        for position, name in enumerate(names):
            answers = [f"```lean4\n{rows[name]['code']}```", "no proof, sorry"]
            for answer in answers if position % 2 == 0 else reversed(answers):
                samples.write(json.dumps({"name": name, "answer": answer}) + "\n")
    return here / "bench.jsonl", here / "samples.jsonl", verdicts, names


def job(
    files, run: str, *, ray: bool, attempts: int = 2, workers: int = 2, first: bool = False
) -> ProofJob:
    bench, samples, verdicts, _ = files
    return ProofJob(
        targets=BenchmarkTargets(spec=str(bench), split="all"),
        generator=f"samples:{samples}",
        mode="sampling",
        lean=f"recorded:{verdicts}",
        attempts=attempts,
        stop_at_first=first,
        workers=workers,
        address="local" if ray else None,
        sampling={"prompt": "chat", "batch_size": 1},
        run=run,
    )


def outcome(attempts) -> dict:
    return {(a.full_name, a.attempt): (a.status, a.error, a.proof) for a in attempts}


def sampled(job: ProofJob, database, **extra) -> list:
    """Run ``job``; the attempts it made, in the order they were stored."""
    made: list = []
    inputs = JobInputs(database, callbacks=Callbacks(on_result=made.append), extra=extra)
    run_job(job, inputs)
    return made


class Observed(RecordedVerifier):
    """Recorded verdicts; each check writes the id of the process that made it to ``log``."""

    def __init__(self, path, log: str) -> None:
        super().__init__(path)
        self.log = log

    def check_batch(self, codes, timeout=0.0):
        with open(self.log, "a") as handle:  # one short line per write: appended whole
            handle.write(f"{os.getpid()}\n")
        return super().check_batch(codes, timeout)


def checkers(log: Path) -> set[int]:
    """The processes that made the checks written to ``log`` (emptied)."""
    pids = {int(line) for line in log.read_text().split()}
    log.unlink()
    return pids


def test_on_ray_the_samples_are_the_in_process_ones(local_ray, files, tmp_path):  # noqa: F811
    local_ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    log = tmp_path / "checks.log"
    maker = functools.partial(Observed, files[2], str(log))
    database = DynamicDatabase(tmp_path / "db.sqlite")
    alone = sampled(job(files, "alone", ray=False), database, verifier=maker())
    assert checkers(log) == {os.getpid()}
    on_ray = sampled(job(files, "ray", ray=True), database, verifier_maker=maker)
    on_workers = checkers(log)
    assert on_workers and os.getpid() not in on_workers  # checked by the Ray workers
    assert len(alone) == 2 * PROBLEMS
    assert outcome(on_ray) == outcome(alone)
    statuses = {a.status for a in on_ray}
    assert AttemptStatus.RECORDED in statuses and AttemptStatus.FAILED in statuses
    assert outcome(database.get_attempts("ray")) == outcome(alone)


def test_a_run_on_ray_and_one_in_process_resume_each_other(
    local_ray,  # noqa: F811
    files,
    tmp_path,
):
    database = DynamicDatabase(tmp_path / "db.sqlite")
    full = outcome(sampled(job(files, "full", ray=False), database))
    for first_on_ray in (False, True):
        run = f"resumed-{first_on_ray}"
        first = sampled(job(files, run, ray=first_on_ray, attempts=1), database)
        assert sorted(a.attempt for a in first) == [0] * PROBLEMS
        then = sampled(job(files, run, ray=not first_on_ray), database)
        assert sorted(a.attempt for a in then) == [1] * PROBLEMS  # nothing made again
        assert outcome(database.get_attempts(run)) == full
        assert not sampled(job(files, run, ray=first_on_ray), database)  # all finished


def test_on_ray_a_solved_problem_gets_no_more_samples(local_ray, files, tmp_path):  # noqa: F811
    database = DynamicDatabase(tmp_path / "db.sqlite")
    first = sampled(job(files, "first", ray=True, attempts=1, first=True), database)
    solved = {a.full_name for a in first if a.status.found_proof}
    assert solved and len(solved) < PROBLEMS
    then = sampled(job(files, "first", ray=True, first=True), database)
    assert sorted(a.full_name for a in then) == sorted(set(files[3]) - solved)
    assert {a.attempt for a in then} == {1}


class Stalling(RecordedVerifier):
    """Recorded verdicts; on the code of ``victim`` (only while no process has stalled on it:
    a marker beside the pid file says one has), it writes its process's id to ``pidfile`` and
    waits there until it is killed."""

    def __init__(self, path, victim: str, pidfile: str) -> None:
        super().__init__(path)
        self.victim, self.pidfile = victim, pidfile

    def check_batch(self, codes, timeout=0.0):
        marker = Path(self.pidfile + ".stalled")
        if any(f"theorem {self.victim} " in code for code in codes) and not marker.exists():
            marker.touch()
            written = Path(f"{self.pidfile}.{os.getpid()}")
            written.write_text(str(os.getpid()))
            os.replace(written, self.pidfile)  # the pid file appears whole
            threading.Event().wait()  # until the killer kills this process
        return super().check_batch(codes, timeout)


def test_a_killed_verification_worker_leaves_an_error_the_next_run_makes(
    local_ray,  # noqa: F811
    files,
    tmp_path,
):
    local_ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    _, _, verdicts, names = files
    victim = names[2]
    pidfile = tmp_path / "victim.pid"
    maker = functools.partial(Stalling, verdicts, victim, str(pidfile))
    database = DynamicDatabase(tmp_path / "db.sqlite")
    killer = Killer(pidfile)
    # one worker: the samples after the lost one are checked by the worker made in its place
    made = sampled(job(files, "killed", ray=True, workers=1), database, verifier_maker=maker)
    assert killer.stop() == 1
    lost = [a for a in made if a.status is AttemptStatus.ERROR]
    assert [(a.full_name, a.attempt) for a in lost] == [(victim, 0)]
    assert "the Ray worker verifying it stopped" in lost[0].error
    assert len(made) == 2 * PROBLEMS
    # the next run makes the lost sample alone, and it ends as in a run that lost nothing
    again = sampled(job(files, "killed", ray=True), database, verifier_maker=maker)
    assert [(a.full_name, a.attempt) for a in again] == [(victim, 0)]
    alone = outcome(sampled(job(files, "alone", ray=False), database))
    assert outcome(database.get_attempts("killed")) == alone


class Unmade(RecordedVerifier):
    """A verifier that cannot be made (its worker cannot start)."""

    def __init__(self, path) -> None:
        raise OSError(f"{path}: no such verdicts here")


def test_a_verifier_no_worker_can_make_stops_the_run_in_one_line(
    local_ray,  # noqa: F811
    files,
    tmp_path,
):
    local_ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    maker = functools.partial(Unmade, "/nowhere/verdicts.jsonl")
    with pytest.raises(LeanloopError, match="could not start") as caught:
        sampled(job(files, "unmade", ray=True), None, verifier_maker=maker)
    assert "no such verdicts here" in str(caught.value)


def test_on_ray_a_verifier_object_is_refused(files, tmp_path):
    _, _, verdicts, _ = files
    with pytest.raises(LeanloopError, match="needs a maker of verifiers"):
        sampled(job(files, "x", ray=True), None, verifier=RecordedVerifier(verdicts))
