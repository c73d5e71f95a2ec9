"""Evaluation over many theorems: two Ray workers give what one process gives, a worker that dies
loses only its theorem, each result is in the database as its theorem finishes and a rerun skips
what is finished; the report's pass@k, counts, JSON and plot."""

from __future__ import annotations

import functools
import json
import logging
import os
import signal
import sys
import threading
from pathlib import Path

import pytest

from leanloop.data.records import AttemptStatus
from leanloop.database import DynamicDatabase
from leanloop.prover.recorded import RecordedProver
from leanloop.prover.replay import ReplayServer
from leanloop.prover.report import EvaluationReport, pass_at_k
from leanloop.prover.run import evaluate, loopback_ray, run_proofs
from tests.helpers import sample_theorems
from tests.test_replay_server import replay_mix


@pytest.fixture(scope="module")
def theorems(sample_dir):
    return replay_mix(sample_dir, 10)


@pytest.fixture(scope="module")
def local_ray():
    ray = pytest.importorskip("ray")
    for attempt in range(3):  # Ray gives its own processes 30 s to start: a loaded machine
        try:  # may need another try (the tests themselves wait on events)
            with loopback_ray(None):  # every Ray port on 127.0.0.1, as leanloop's local Ray
                ray.init(
                    num_cpus=2,
                    include_dashboard=False,
                    logging_level=logging.WARNING,
                    _node_ip_address="127.0.0.1",
                )
            break
        except Exception as exc:
            ray.shutdown()
            if attempt == 2 or "timed out during startup" not in str(exc):
                raise
    # the workers receive this module's classes by value (they cannot import the tests)
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield ray
    ray.shutdown()


def prover(sample_dir, **config):
    return RecordedProver(sample_dir, config={"num_sampled_tactics": 8, **config})


def outcome(report: EvaluationReport) -> dict:
    return {
        a.full_name: (a.status, a.proof, a.expansions, a.tree_size, a.error)
        for a in report.attempts
    }


class Stalling(ReplayServer):
    """Writes the id of its process (the worker's) to ``pidfile`` when asked to start
    ``victim``, then waits there until it is killed; with ``once``, only while no process has
    stalled before (a marker beside the pid file says one has)."""

    def __init__(self, dataset, victim: str, pidfile: str, once: bool = False) -> None:
        super().__init__(sample_theorems(dataset))
        self.victim, self.pidfile, self.once = victim, pidfile, once

    def start_recorded(self, theorem):
        marker = Path(self.pidfile + ".stalled")
        if theorem.full_name == self.victim and not (self.once and marker.exists()):
            marker.touch()
            written = Path(f"{self.pidfile}.{os.getpid()}")
            written.write_text(str(os.getpid()))
            os.replace(written, self.pidfile)  # the pid file appears whole, never half written
            threading.Event().wait()  # until the killer kills this process
        return super().start_recorded(theorem)


class Killer:
    """Kills (SIGKILL, from outside) the worker that wrote ``pidfile``, each time one does, up
    to ``times`` workers in turn, until ``stop()``: it waits on the pid file appearing, not on
    a time. ``killed`` counts the workers killed."""

    def __init__(self, pidfile: Path, times: int = 1) -> None:
        self.pidfile, self.times = pidfile, times
        self.killed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while self.killed < self.times:
            while not self.pidfile.exists():
                if self._stop.wait(0.05):  # between looks at the file: the run may be over
                    return
            pid = int(self.pidfile.read_text())
            self.pidfile.unlink()
            os.kill(pid, signal.SIGKILL)
            self.killed += 1

    def stop(self) -> int:
        """End the killer (the run it watched is over) and give the workers it killed."""
        self._stop.set()
        self._thread.join()
        return self.killed


def test_two_ray_workers_give_the_sequential_results(local_ray, sample_dir, theorems, tmp_path):
    factory = functools.partial(ReplayServer.from_dataset, sample_dir)
    alone = evaluate(theorems, prover(sample_dir), factory, num_workers=1)
    database = DynamicDatabase(tmp_path / "ray.db")
    together = evaluate(
        theorems, prover(sample_dir), factory, num_workers=2, database=database, run="ray"
    )
    assert outcome(together) == outcome(alone)
    statuses = [a.status for a in alone.attempts]
    assert statuses.count(AttemptStatus.REPLAYED) == 10
    assert statuses.count(AttemptStatus.FAILED) == 1 and statuses.count(AttemptStatus.ERROR) == 1
    term_mode = next(a for a in alone.attempts if a.status is AttemptStatus.ERROR)
    assert "no traced tactics" in term_mode.error
    assert {a.full_name for a in database.get_attempts("ray")} == {t.full_name for t in theorems}


def test_a_theorem_whose_worker_is_killed_is_given_to_another(
    local_ray, sample_dir, theorems, tmp_path
):
    victim = theorems[3].full_name
    database = DynamicDatabase(tmp_path / "crash.db")
    pidfile = tmp_path / "victim.pid"
    stalling = functools.partial(Stalling, sample_dir, victim, str(pidfile), True)
    killer = Killer(pidfile)
    report = evaluate(
        theorems[:6], prover(sample_dir), stalling, num_workers=2, database=database, run="c"
    )
    assert killer.stop() == 1
    assert (tmp_path / "victim.pid.stalled").exists()  # its first worker was killed
    stored = {a.full_name: a for a in database.get_attempts("c")}
    assert len(stored) == 6  # each theorem once: the lost one was made again, not twice stored
    assert all(a.status is AttemptStatus.REPLAYED for a in stored.values())
    assert report.status_counts == {"replayed": 6}


def test_a_theorem_that_keeps_killing_its_workers_is_an_error(
    local_ray, sample_dir, theorems, tmp_path
):
    from leanloop.prover.run import LOST_RETRIES

    victim = theorems[3].full_name
    database = DynamicDatabase(tmp_path / "crash.db")
    pidfile = tmp_path / "victim.pid"
    stalling = functools.partial(Stalling, sample_dir, victim, str(pidfile))
    killer = Killer(pidfile, times=LOST_RETRIES + 1)
    report = evaluate(
        theorems[:6], prover(sample_dir), stalling, num_workers=2, database=database, run="c"
    )
    assert killer.stop() == LOST_RETRIES + 1  # each worker that took it was killed
    stored = {a.full_name: a for a in database.get_attempts("c")}
    assert len(stored) == 6
    assert stored[victim].status is AttemptStatus.ERROR
    assert "the worker proving it stopped" in stored[victim].error
    assert all(a.status is AttemptStatus.REPLAYED for n, a in stored.items() if n != victim)
    assert outcome(report)[victim][0] is AttemptStatus.ERROR
    # a rerun of the run tries the lost theorem again, and only it
    again = []
    factory = functools.partial(ReplayServer.from_dataset, sample_dir)
    rerun = evaluate(
        theorems[:6],
        prover(sample_dir),
        factory,
        database=database,
        run="c",
        on_result=again.append,
    )
    assert [a.full_name for a in again] == [victim]
    assert rerun.status_counts == {"replayed": 6}


def test_results_are_stored_as_they_come_and_a_rerun_skips_them(sample_dir, theorems, tmp_path):
    database = DynamicDatabase(tmp_path / "seq.db")
    factory = functools.partial(ReplayServer.from_dataset, sample_dir)
    seen, progress = [], []

    def stored_already(attempt):
        seen.append(attempt.full_name)
        assert attempt.full_name in {a.full_name for a in database.get_attempts("s")}

    evaluate(
        theorems[:4],
        prover(sample_dir),
        factory,
        database=database,
        run="s",
        on_result=stored_already,
        progress=lambda done, total: progress.append((done, total)),
    )
    assert len(seen) == 4 and progress[-1] == (4, 4)
    seen.clear()
    report = evaluate(theorems, prover(sample_dir), factory, database=database, run="s")
    assert report.theorems == len(theorems) and len(report.attempts) == len(theorems)
    again = []
    evaluate(
        theorems, prover(sample_dir), factory, database=database, run="s", on_result=again.append
    )
    # only the term-mode theorem (no tactic proof to start: an error) is tried again
    errors = [a.full_name for a in report.attempts if a.status is AttemptStatus.ERROR]
    assert errors == [theorems[-1].full_name]
    assert [a.full_name for a in again] == errors and again[0].status is AttemptStatus.ERROR


def test_attempts_pass_at_k_and_the_report_files(sample_dir, theorems, tmp_path):
    factory = functools.partial(ReplayServer.from_dataset, sample_dir)
    report = evaluate(theorems[:3], prover(sample_dir, num_attempts=2), factory)
    assert report.k == 2 and len(report.attempts) == 6 and report.theorems == 3
    assert report.replayed_at_1 == report.replayed_at_k == 1.0 and report.replayed_only
    assert report.pass_at_1 is None and report.environment == "replay"
    assert {a.attempt for a in report.attempts} == {0, 1}
    path = report.to_json(tmp_path / "r" / "report.json")
    data = json.loads(path.read_text())
    assert data["status_counts"] == {"replayed": 6} and data["replayed_at_1"] == 1.0
    assert "pass_at_1" not in data and data["environment"] == "replay"
    assert report.plot(tmp_path / "r" / "report.png").stat().st_size > 1000
    assert pass_at_k(2, 1, 1) == 0.5 and pass_at_k(2, 1, 2) == 1.0 and pass_at_k(5, 0, 3) == 0.0
    assert pass_at_k(10, 3, 2) == pytest.approx(1 - (7 * 6) / (10 * 9))


def test_whole_proof_mode_of_a_prover_without_one_is_an_error_per_theorem(sample_dir, theorems):
    factory = functools.partial(ReplayServer.from_dataset, sample_dir)
    report = evaluate(theorems[:2], prover(sample_dir), factory, mode="whole")
    assert report.status_counts == {"error": 2}
    assert all("has no whole-proof mode" in a.error for a in report.attempts)


def test_on_ray_proofs_are_hooked_in_the_driver_and_attempts_stop_at_the_first(local_ray, tmp_path):
    import tests.test_prover_run as toy

    local_ray.cloudpickle.register_pickle_by_value(toy)
    root, theorems = toy.toy_project(tmp_path, ["a", "b", "c"])
    hooked, seen = [], []

    def hook(theorem, attempt, lease):
        hooked.append((theorem.full_name, os.getpid()))
        return attempt

    outcome = run_proofs(
        theorems,
        toy.prover(num_attempts=3),
        functools.partial(toy.Toy, {"a", "b"}),
        project_root=root,
        num_workers=2,
        hook=hook,
        stop_at_first=True,
        progress=lambda done, total: seen.append((done, total)),
    )
    made = sorted((a.full_name, a.attempt) for a in outcome.new)
    assert made == [("a", 0), ("b", 0), ("c", 0), ("c", 1), ("c", 2)]
    assert sorted(hooked) == [("a", os.getpid()), ("b", os.getpid())]  # in the driver only
    assert {a.full_name: a.status for a in outcome.new if a.attempt == 0} == {
        "a": AttemptStatus.PROVED,
        "b": AttemptStatus.PROVED,
        "c": AttemptStatus.FAILED,
    }
    assert seen[-1] == (9, 9)  # the attempts not made count as done


def test_workers_store_their_attempts_in_a_database_every_node_reaches(
    local_ray, sample_dir, theorems, db_url
):
    """On PostgreSQL each worker stores its attempts (the driver stores none); on SQLite, a
    file of one machine, the driver stores them all. Either way each attempt once."""
    database = DynamicDatabase(db_url)
    driver_writes = []
    original = database.record_attempt

    def counted(attempt):
        driver_writes.append(attempt.full_name)
        original(attempt)

    database.record_attempt = counted
    factory = functools.partial(ReplayServer.from_dataset, sample_dir)
    report = evaluate(
        theorems[:6], prover(sample_dir), factory, num_workers=2, database=database, run="w"
    )
    stored = database.get_attempts("w")
    assert len(stored) == 6 and len({a.full_name for a in stored}) == 6
    assert report.status_counts == {"replayed": 6}
    assert all(a.worker for a in stored)  # host/ray node of the worker that made it
    if database.sqlite_path is None:
        assert driver_writes == []
    else:
        assert sorted(driver_writes) == sorted(a.full_name for a in stored)
    database.close()


def test_the_ray_leanloop_starts_listens_on_loopback_only(sample_dir, theorems):
    """``run_proofs`` with several workers and no cluster starts a Ray of this machine: every
    socket its processes listen on is on 127.0.0.1 (Ray would take the machine's address)."""
    import psutil

    from tests.ray_cluster import is_loopback, listening_addresses

    pytest.importorskip("ray")
    seen: list = []

    def look(attempt) -> None:
        if not seen:
            pids = [p.pid for p in psutil.Process().children(recursive=True)]
            seen.extend(listening_addresses(pids))

    factory = functools.partial(ReplayServer.from_dataset, sample_dir)
    outcome = run_proofs(theorems[:3], prover(sample_dir), factory, num_workers=2, on_result=look)
    assert len(outcome.attempts) == 3
    assert seen  # the GCS, the raylet and the workers were listening
    assert all(is_loopback(listener.ip) for listener in seen), seen


def test_a_report_of_samples_checked_by_recorded_verdicts_is_not_a_pass_rate():
    """Benchmark samples accepted by recorded verdicts are stored with the environment
    'recorded'; a report over them (a run name reused) reads them as not proving."""
    from leanloop.data.records import ProofAttempt

    def attempt(name: str, status: AttemptStatus) -> ProofAttempt:
        return ProofAttempt(
            run="bench",
            url="minif2f",
            commit="",
            file_path="minif2f.jsonl",
            full_name=name,
            status=status,
            environment="recorded",
        )

    report = EvaluationReport.from_attempts(
        "bench", [attempt("a", AttemptStatus.RECORDED), attempt("b", AttemptStatus.FAILED)]
    )
    assert report.environment == "recorded" and not report.proving
    assert report.pass_at_1 is None and report.replayed_at_1 == 0.5
    assert "pass_at_1" not in report.model_dump()
