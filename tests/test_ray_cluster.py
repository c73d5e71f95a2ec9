"""Proving on a real Ray cluster of two nodes on this machine (``tests/ray_cluster.py``: a head
and a second node, each a ``ray start`` process of one CPU): every Ray process listens on
loopback only; ``run_proofs`` given the head's address proves on both nodes and gives what a
sequential run gives; a node stopped mid-run loses only the theorem it had in flight, which the
other node proves; ``leanloop prove --address`` runs on the cluster too.

The drivers run in a process of their own (``_driver``): a driver needs an environment of its
own to reach a loopback cluster (``LoopbackCluster.driver_env``), it must not meet a Ray this
process started for other tests, and a run that hangs is ended by killing it."""

from __future__ import annotations

import functools
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from leanloop.data.records import ProofAttempt
from leanloop.database import DynamicDatabase
from leanloop.prover.recorded import RecordedProver
from leanloop.prover.replay import ReplayServer
from leanloop.prover.run import run_proofs
from tests.helpers import sample_theorems
from tests.ray_cluster import (
    REPO,
    LoopbackCluster,
    is_loopback,
    listening_addresses,
    loopback_cluster,
    remote_addresses,
)
from tests.test_replay_server import replay_mix

pytest.importorskip("ray")

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(300)]

#: How long a run may go on after the node was stopped (it takes seconds when it ends).
AFTER_STOP = 30.0
RUN = "cluster"


@pytest.fixture(scope="module")
def running(tmp_path_factory):
    with loopback_cluster(tmp_path_factory.mktemp("ray"), nodes=2, cpus_per_node=1) as cluster:
        yield cluster


@pytest.fixture
def cluster(running: LoopbackCluster) -> LoopbackCluster:
    """The module's cluster, with a node a test stopped started again."""
    running.revive()
    return running


@pytest.fixture(scope="module")
def theorems(sample_dir):
    return replay_mix(sample_dir, 4)


def prover(sample_dir):
    return RecordedProver(sample_dir, config={"num_sampled_tactics": 8})


def outcome(attempts: list[ProofAttempt]) -> dict:
    return {a.full_name: (a.status, a.proof, a.expansions, a.tree_size, a.error) for a in attempts}


@pytest.fixture(scope="module")
def sequential(sample_dir, theorems) -> dict:
    """What one worker in this process makes of the theorems."""
    factory = functools.partial(ReplayServer.from_dataset, sample_dir)
    run = run_proofs(theorems, prover(sample_dir), factory, num_workers=1, run=RUN)
    statuses = sorted(a.status.value for a in run.attempts)
    assert statuses == ["error", "failed", "replayed", "replayed", "replayed", "replayed"]
    return outcome(run.attempts)


class Meeting(ReplayServer):
    """Replays, but the first theorem a worker starts waits (a minute at most) until a worker
    on each of ``nodes`` Ray nodes has started one — each node proves one at least, however
    fast the first worker is — each writing its theorem's name in ``meeting/<node id>``; the
    first theorem started on node ``stall`` then stalls there (two minutes)."""

    def __init__(self, dataset: str, meeting: str, nodes: int, stall: str | None = None) -> None:
        super().__init__(sample_theorems(Path(dataset)))
        self.meeting, self.nodes, self.stall = Path(meeting), nodes, stall
        self.met = False

    def start_recorded(self, theorem):
        import ray

        node = ray.get_runtime_context().get_node_id()
        mark = self.meeting / node
        if not self.met and not mark.exists():
            partial = self.meeting / f".{node}"
            partial.write_text(json.dumps({"theorem": theorem.full_name, "pid": os.getpid()}))
            partial.rename(mark)
            deadline = time.monotonic() + 60
            while len(list(self.meeting.glob("[!.]*"))) < self.nodes:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            if node == self.stall:
                time.sleep(120)
        self.met = True
        return super().start_recorded(theorem)


def _driver() -> None:
    """A driver process (``python -c``): the spec (a JSON file) names the task.

    ``hold``: one actor of one CPU per node; print the driver's id and where the actors run,
    then keep them until stdin closes. ``prove``: ``run_proofs`` of the theorems on the cluster
    on ``Meeting`` servers, its attempts written to ``out``."""
    spec = json.loads(Path(sys.argv[1]).read_text())
    if spec["task"] == "hold":
        import ray

        ray.init(address=spec["address"], logging_level="WARNING")

        @ray.remote(num_cpus=1)
        class Probe:
            def where(self) -> tuple[str, int]:
                return ray.get_runtime_context().get_node_id(), os.getpid()

        probes = [Probe.remote() for _ in range(spec["nodes"])]
        workers = ray.get([probe.where.remote() for probe in probes], timeout=120)
        print(json.dumps({"driver": os.getpid(), "workers": workers}), flush=True)
        sys.stdin.read()
        ray.shutdown()
        return
    sample_dir = Path(spec["sample_dir"])
    by_name = {t.full_name: t for t in sample_theorems(sample_dir)}
    theorems = [by_name[name] for name in spec["theorems"]]
    factory = functools.partial(
        Meeting, str(sample_dir), spec["meeting"], spec["nodes"], spec.get("stall")
    )
    database = DynamicDatabase(spec["database"])
    run = run_proofs(
        theorems,
        prover(sample_dir),
        factory,
        num_workers=2,
        address=spec["address"],
        database=database,
        run=RUN,
    )
    database.close()
    Path(spec["out"]).write_text(json.dumps([a.model_dump(mode="json") for a in run.attempts]))


def start_driver(cluster: LoopbackCluster, tmp_path: Path, **spec) -> subprocess.Popen:
    path = tmp_path / f"{spec['task']}.json"
    path.write_text(json.dumps({"address": cluster.address, **spec}))
    with (tmp_path / f"{spec['task']}.log").open("wb") as log:
        return subprocess.Popen(
            [sys.executable, "-c", "from tests.test_ray_cluster import _driver; _driver()", path],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE if spec["task"] == "hold" else log,
            stderr=log,
            env=cluster.driver_env(),
            cwd=REPO,
        )


def driver_log(tmp_path: Path, task: str) -> str:
    return (tmp_path / f"{task}.log").read_text(errors="replace")[-4000:]


def stop_driver(driver: subprocess.Popen) -> None:
    if driver.poll() is None:
        driver.kill()
        driver.wait(10)


def prove_on(
    cluster, tmp_path, sample_dir, theorems, database: str | None = None, **spec
) -> subprocess.Popen:
    """A driver proving ``theorems`` on the cluster; each node's first theorem waits until
    every node has started one (``Meeting``, in ``tmp_path / "meeting"``)."""
    (tmp_path / "meeting").mkdir()
    return start_driver(
        cluster,
        tmp_path,
        task="prove",
        sample_dir=str(sample_dir),
        theorems=[t.full_name for t in theorems],
        database=database or str(tmp_path / "attempts.db"),
        out=str(tmp_path / "attempts.json"),
        meeting=str(tmp_path / "meeting"),
        nodes=len(cluster.node_ids),
        **spec,
    )


def attempts_of(driver: subprocess.Popen, tmp_path: Path) -> list[ProofAttempt]:
    """The attempts the run returned (after it ended)."""
    assert driver.returncode == 0, driver_log(tmp_path, "prove")
    rows = json.loads((tmp_path / "attempts.json").read_text())
    return [ProofAttempt.model_validate(row) for row in rows]


def stored(tmp_path: Path, url: str | None = None) -> list[ProofAttempt]:
    """The attempts the run stored in its database (so far)."""
    database = DynamicDatabase(url or tmp_path / "attempts.db")
    try:
        return database.get_attempts(RUN)
    finally:
        database.close()


def test_every_ray_process_listens_on_loopback_only(cluster, tmp_path):
    """The head, the second node, a worker on each and the driver: every socket they listen
    on, and every peer they talk to, is on 127.0.0.1."""
    driver = start_driver(cluster, tmp_path, task="hold", nodes=len(cluster.nodes))
    try:
        line = driver.stdout.readline()
        assert line, driver_log(tmp_path, "hold")
        held = json.loads(line)
        workers = {pid: node for node, pid in held["workers"]}
        assert sorted(workers.values()) == sorted(cluster.node_ids)  # one worker per node
        pids = cluster.pids() | {held["driver"]}
        assert set(workers) <= pids
        listening = listening_addresses(pids)
        outside = [listener for listener in listening if not is_loopback(listener.ip)]
        assert outside == [], f"listening beyond loopback: {outside}"
        talking = [peer for peer in remote_addresses(pids) if not is_loopback(peer[1])]
        assert talking == [], f"connected beyond loopback: {talking}"
        # and the check saw every part: the GCS, the ports given to each raylet and runtime
        # env agent, each worker (a port the kernel chose) and the driver
        ports = {listener.port for listener in listening}
        by_pid = {listener.pid for listener in listening}
        assert int(cluster.address.rpartition(":")[2]) in ports
        for node in cluster.nodes:
            for name in ("node-manager-port", "object-manager-port", "runtime-env-agent-port"):
                assert node.ports[name] in ports, (name, node.index, listening)
        assert set(workers) | {held["driver"]} <= by_pid
    finally:
        driver.stdin.close()
        try:
            driver.wait(30)
        finally:
            stop_driver(driver)


def test_run_proofs_on_the_cluster_uses_both_nodes_and_gives_the_sequential_results(
    cluster, sample_dir, theorems, sequential, tmp_path
):
    driver = prove_on(cluster, tmp_path, sample_dir, theorems)
    try:
        driver.wait(120)
    finally:
        stop_driver(driver)
    attempts = attempts_of(driver, tmp_path)
    assert outcome(attempts) == sequential
    assert outcome(stored(tmp_path)) == sequential
    # each attempt says where it ran: this host, and a node of the cluster; both nodes worked
    host = socket.gethostname()
    assert {a.worker.partition("/")[0] for a in attempts} == {host}
    nodes = {a.worker.partition("/")[2] for a in attempts}
    assert nodes == {node[:12] for node in cluster.node_ids}


def test_a_node_stopped_mid_run_loses_only_its_theorem_in_flight(
    cluster, sample_dir, theorems, sequential, tmp_path
):
    second = cluster.node_ids[1]
    flag = tmp_path / "meeting" / second
    driver = prove_on(cluster, tmp_path, sample_dir, theorems, stall=second)
    try:
        deadline = time.monotonic() + 120
        while not flag.exists() and driver.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert flag.exists(), driver_log(tmp_path, "prove")
        stalled = json.loads(flag.read_text())["theorem"]
        cluster.stop_node(1)  # with the theorem in flight on it
        try:
            driver.wait(AFTER_STOP)
        except subprocess.TimeoutExpired:
            recorded = {a.full_name: a.status.value for a in stored(tmp_path)}
            pytest.fail(
                f"run_proofs did not return {AFTER_STOP:.0f} s after the node proving "
                f"{stalled} stopped; it had recorded {recorded}"
            )
    finally:
        stop_driver(driver)
    attempts = attempts_of(driver, tmp_path)
    # the stalled theorem too, made again on the head: each theorem stored once, as alone
    assert outcome(attempts) == sequential
    assert outcome(stored(tmp_path)) == sequential
    assert len(stored(tmp_path)) == len(theorems)
    (again,) = [a for a in attempts if a.full_name == stalled]
    assert again.worker.partition("/")[2] == cluster.node_ids[0][:12]


def test_leanloop_prove_runs_on_the_cluster(cluster, sample_dir, tmp_path):
    """The command as a user runs it against a cluster started apart from leanloop."""
    command = [
        sys.executable, "-m", "leanloop", "prove", "--dataset", str(sample_dir),
        "--split", "random/test", "--replay", "--generator", "recorded",
        "--address", cluster.address, "--workers", "2", "--limit", "6",
        "--db", str(tmp_path / "attempts.db"), "--out", str(tmp_path / "out"), "--json",
    ]  # fmt: skip
    result = subprocess.run(
        command, env=cluster.driver_env(), capture_output=True, text=True, timeout=240, cwd=REPO
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == 6
    attempts = DynamicDatabase(tmp_path / "attempts.db").get_attempts()
    assert len(attempts) == 6
    nodes = {a.worker.partition("/")[2] for a in attempts}
    assert nodes <= {node[:12] for node in cluster.node_ids} and nodes


def test_a_sqlite_file_is_refused_for_a_cluster_with_other_hosts(tmp_path):
    """Checked on what Ray says of its nodes (here leanloop's own stand-in of ``ray``)."""
    from leanloop.errors import LeanloopError
    from leanloop.prover.ray_executor import _refuse_remote_nodes

    class Cluster:
        def __init__(self, nodes):
            self._nodes = nodes

        def nodes(self):
            return self._nodes

    here = {"Alive": True, "NodeManagerHostname": socket.gethostname(),
            "NodeManagerAddress": "192.0.2.2"}  # fmt: skip
    elsewhere = {"Alive": True, "NodeManagerHostname": "gpu-7", "NodeManagerAddress": "10.1.2.7"}
    gone = {**elsewhere, "Alive": False}
    database = DynamicDatabase(tmp_path / "local.db")
    _refuse_remote_nodes(Cluster([here, gone]), database)  # one machine: fine
    with pytest.raises(LeanloopError, match=r"10\.1\.2\.7") as caught:
        _refuse_remote_nodes(Cluster([here, elsewhere]), database)
    assert "postgresql" in caught.value.hint


@pytest.mark.postgres
def test_workers_on_both_nodes_store_their_attempts_in_postgresql(
    cluster, pg_cluster, sample_dir, theorems, sequential, tmp_path
):
    """With a PostgreSQL every node reaches, the workers of both nodes store their attempts
    themselves, concurrently: each attempt once, none lost."""
    import uuid

    url = pg_cluster.create_database(f"cluster_{uuid.uuid4().hex[:10]}")
    driver = prove_on(cluster, tmp_path, sample_dir, theorems, database=url)
    try:
        driver.wait(120)
    finally:
        stop_driver(driver)
    attempts = attempts_of(driver, tmp_path)
    rows = stored(tmp_path, url)
    assert outcome(rows) == outcome(attempts) == sequential
    assert len(rows) == len(theorems)  # none lost, none twice
    nodes = {a.worker.partition("/")[2] for a in rows}
    assert nodes == {node[:12] for node in cluster.node_ids}
