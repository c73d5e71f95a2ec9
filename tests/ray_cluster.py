"""A Ray cluster of several nodes on this machine, for tests: each node a ``ray start --block``
process of this venv's Ray (the head, then the others joining it), every Ray process and port on
127.0.0.1; and the sockets a set of processes listens on.

What keeps a node on loopback (Ray 2.60; read in ``ray/_private/services.py`` and
``ray/scripts/scripts.py``): a node listens on loopback when its node IP is a loopback address —
then the GCS and the raylet bind 127.0.0.1 (gRPC shows it as ``::ffff:127.0.0.1``), the agents
and the Ray Client server bind ``get_localhost_ip()`` (``dashboard/agent.py``,
``reporter_agent.py``, ``util/client/server/server.py``) — and every port on all interfaces
otherwise. But ``ray start`` does not keep a node IP of 127.0.0.1: ``--node-ip-address`` and
``--address`` go through ``services.resolve_ip_for_localhost``, which turns 127.0.0.1,
``localhost`` and ``::1`` into ``get_node_ip_address()``, the machine's outward address.

* the head: ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` makes ``get_node_ip_address()`` answer
  127.0.0.1, so ``ray start --head --node-ip-address 127.0.0.1`` keeps it;
* another node: no flag or variable does. The same variable makes ``ray start`` refuse a
  non-head node ("Multi-node Ray clusters are not supported on Windows and OSX",
  ``scripts.py`` ``start``), and without it ``--address 127.0.0.1:PORT`` becomes the machine's
  address, where the loopback GCS is not. So the node is started by the same CLI
  (``ray.scripts.scripts.main``) with ``resolve_ip_for_localhost`` made the identity
  (``_NODE_START``);
* a driver: ``ray.init(address="127.0.0.1:PORT")`` makes the same rewrite, so it needs
  ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` too (:meth:`LoopbackCluster.driver_env`); the bare
  address, not ``ray://`` (the Ray Client server, only there with ``ray[client]``).

Every port is chosen here, free on 127.0.0.1 and distinct across the nodes (two nodes of one
machine would both take Ray's defaults, 52365 for the agents and so on); workers bind ports the
kernel picks (``--min-worker-port 0``), on the node's address. The cluster has its own token
(``RAY_AUTH_MODE=token``), not ``~/.ray/auth_token``. ``ray stop`` would stop every Ray of the
machine: a node is stopped here by signalling its own ``ray start`` process, and whatever of
it is left (the processes it started, the workers its raylet started) is killed by id.
"""

from __future__ import annotations

import contextlib
import importlib.util
import ipaddress
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import psutil

LOOPBACK = "127.0.0.1"
REPO = Path(__file__).resolve().parents[1]
RAY = Path(sys.executable).with_name("ray")

#: ``ray start`` of a node other than the head: this venv's Ray CLI with its rewrite of a
#: loopback address to the machine's address turned off (see the module's doc).
_NODE_START = """\
import sys
from ray._private import services
if not callable(getattr(services, "resolve_ip_for_localhost", None)):
    sys.exit("ray._private.services.resolve_ip_for_localhost is gone: see tests/ray_cluster.py")
services.resolve_ip_for_localhost = lambda host: host
from ray.scripts.scripts import main
sys.argv[0] = "ray"
main()
"""

#: The ports of a node, each given to ``ray start`` as ``--<name>``.
NODE_PORTS = (
    "node-manager-port",
    "object-manager-port",
    "runtime-env-agent-port",
    "dashboard-agent-listen-port",
    "dashboard-agent-grpc-port",
    "metrics-export-port",
)


def free_ports(count: int, host: str = LOOPBACK) -> list[int]:
    """``count`` distinct ports free on ``host`` (held together while chosen, then let go)."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in sockets:
            sock.bind((host, 0))
        return [sock.getsockname()[1] for sock in sockets]


def _tree(pid: int) -> list[psutil.Process]:
    """``pid`` and its descendants alive now."""
    try:
        process = psutil.Process(pid)
        return [process, *process.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _gone(process: psutil.Process) -> bool:
    try:
        return not process.is_running() or process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def kill(processes: Iterable[psutil.Process], timeout: float = 10.0) -> None:
    """SIGKILL each of ``processes`` (checked to be the same process, not a reused id) and wait
    until they are gone (zombies count as gone)."""
    processes = list(processes)
    for process in processes:
        with contextlib.suppress(psutil.Error):
            process.kill()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not all(_gone(p) for p in processes):
        time.sleep(0.05)


@dataclass
class Node:
    """One node: its ``ray start --block`` process, the ports given to it, its log."""

    index: int
    process: subprocess.Popen
    ports: dict[str, int]
    log: Path
    node_id: str = ""

    @property
    def head(self) -> bool:
        return self.index == 0

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def processes(self) -> list[psutil.Process]:
        """Its processes: ``ray start``, what it started (GCS, raylet, agents, ...) and the
        workers the raylet started (each in its own process group, so found as descendants)."""
        return _tree(self.process.pid) if self.alive else []

    def pids(self) -> set[int]:
        return {process.pid for process in self.processes()}

    def raylet(self) -> psutil.Process | None:
        for process in self.processes():
            with contextlib.suppress(psutil.Error):
                if process.name() == "raylet":
                    return process
        return None


class Listener(NamedTuple):
    pid: int
    name: str
    ip: str
    port: int


def is_loopback(ip: str) -> bool:
    """127.0.0.0/8, ::1, or IPv4-mapped loopback (``::ffff:127.0.0.1``, how gRPC binds)."""
    address = ipaddress.ip_address(ip.split("%")[0])
    mapped = getattr(address, "ipv4_mapped", None)
    return (mapped or address).is_loopback


def _sockets(pids: Iterable[int]) -> Iterator[tuple[psutil.Process, object]]:
    for pid in sorted(set(pids)):
        try:
            process = psutil.Process(pid)
            connections = process.net_connections(kind="inet")
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
        for connection in connections:
            yield process, connection


def listening_addresses(pids: Iterable[int]) -> list[Listener]:
    """The TCP sockets ``pids`` listen on, and the UDP sockets they receive on (bound, not
    connected)."""
    found = []
    for process, connection in _sockets(pids):
        listens = connection.status == psutil.CONN_LISTEN or (
            connection.type == socket.SOCK_DGRAM and not connection.raddr
        )
        if listens and connection.laddr:
            with contextlib.suppress(psutil.Error):
                ip, port = connection.laddr.ip, connection.laddr.port
                found.append(Listener(process.pid, process.name(), ip, port))
    return found


def remote_addresses(pids: Iterable[int]) -> list[tuple[int, str, int]]:
    """``(pid, ip, port)`` of every peer the TCP/UDP sockets of ``pids`` are connected to."""
    return [
        (process.pid, connection.raddr.ip, connection.raddr.port)
        for process, connection in _sockets(pids)
        if connection.raddr
    ]


@dataclass
class LoopbackCluster:
    """A running cluster: ``address`` is the head's GCS (``127.0.0.1:PORT``)."""

    address: str
    nodes: list[Node]
    temp_dir: Path
    logs: Path
    cpus_per_node: int
    token: str
    _env: dict[str, str] = field(repr=False, default_factory=dict)
    _given: set[int] = field(repr=False, default_factory=set)

    @property
    def node_ids(self) -> list[str]:
        """The Ray node ids of the nodes alive, the head first."""
        return [node.node_id for node in self.nodes if node.alive]

    def pids(self) -> set[int]:
        return set().union(*(node.pids() for node in self.nodes))

    def driver_env(self) -> dict[str, str]:
        """The environment of a driver process (``ray.init(address=self.address)``) on this
        machine: the cluster's token and the switch that keeps 127.0.0.1 as it is."""
        return {**self._env, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}

    def start_node(self, index: int | None = None) -> Node:
        """Start one more node (the head if there is none), or a new one in place of the
        stopped node ``index``, and wait until it runs."""
        if index is None:
            index = len(self.nodes)
        head = index == 0
        names = [*NODE_PORTS, *(_head_ports() if head else ())]
        ports = dict(zip(names, self._ports(len(names)), strict=True))
        if head:
            self.address = f"{LOOPBACK}:{ports['port']}"
        options = [
            "--block",
            "--node-ip-address",
            LOOPBACK,
            "--num-cpus",
            str(self.cpus_per_node),
            "--num-gpus",
            "0",
            "--object-store-memory",
            str(100 * 1024 * 1024),
            "--min-worker-port",
            "0",
            "--max-worker-port",
            "0",
            "--temp-dir",
            str(self.temp_dir),
            "--disable-usage-stats",
            *(item for name, port in ports.items() for item in (f"--{name}", str(port))),
        ]
        env = dict(self._env)
        if head:
            env["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
            command = [
                str(RAY),
                "start",
                "--head",
                "--include-dashboard",
                "false",
                "--dashboard-host",
                LOOPBACK,
                *options,
            ]
        else:
            command = [sys.executable, "-c", _NODE_START, "start", "--address", self.address]
            command += options
        started = len(list(self.logs.glob(f"node{index}*.log")))
        log = self.logs / (f"node{index}.log" if not started else f"node{index}.{started}.log")
        with log.open("wb") as out:
            process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=REPO,
                start_new_session=True,  # its own group: signals to the test's reach it not
            )
        node = Node(index, process, ports, log)
        if index < len(self.nodes):
            self.nodes[index] = node
        else:
            self.nodes.append(node)
        _wait_started(node)
        return node

    def _ports(self, count: int) -> list[int]:
        """``count`` ports free now and given to no node of the cluster before."""
        while True:
            ports = free_ports(count)
            if not self._given.intersection(ports):
                self._given.update(ports)
                return ports

    def stop_node(self, index: int, *, crash: bool = False, timeout: float = 20.0) -> None:
        """Stop one node: SIGTERM to its ``ray start`` (Ray's own shutdown of the node, as
        ``ray stop`` would do on a machine of its own; no drain, see ``_base_env``), or with
        ``crash`` SIGKILL to all its processes at once; whatever is left after ``timeout`` is
        killed."""
        node = self.nodes[index]
        processes = node.processes()
        if not crash and node.alive:
            node.process.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                node.process.wait(timeout)
        kill(processes)
        with contextlib.suppress(subprocess.TimeoutExpired):
            node.process.wait(5)

    def revive(self) -> None:
        """Start again, as new nodes, the nodes that were stopped (the head is never)."""
        stopped = [node for node in self.nodes if not node.alive]
        if any(node.head for node in stopped):
            raise RuntimeError(f"the head of the cluster stopped; see {stopped[0].log}")
        for node in stopped:
            self.start_node(node.index)

    def stop(self) -> None:
        """Stop every node, the other nodes first, the head last."""
        for node in reversed(self.nodes):
            self.stop_node(node.index, timeout=10.0)


def _head_ports() -> tuple[str, ...]:
    # the Ray Client server runs only with ray[client]; `ray start` refuses its port without it
    client = importlib.util.find_spec("grpc") is not None
    return ("port", "dashboard-port", *(("ray-client-server-port",) if client else ()))


def _wait_started(node: Node, timeout: float = 90.0) -> None:
    """Until its ``ray start`` says the node runs and its raylet is up; raise (with the log)
    if it exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not node.alive:
            break
        if b"Ray runtime started" in node.log.read_bytes():
            raylet = node.raylet()
            if raylet is not None:
                with contextlib.suppress(psutil.Error):
                    for arg in raylet.cmdline():
                        if arg.startswith("--node_id="):
                            node.node_id = arg.partition("=")[2]
                            return
        time.sleep(0.1)
    tail = node.log.read_text(errors="replace")[-3000:]
    raise RuntimeError(f"node {node.index} did not start (see {node.log}):\n{tail}")


def _base_env(token: str) -> dict[str, str]:
    env = {
        **os.environ,
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": token,
        "RAY_USAGE_STATS_ENABLED": "0",
        # a stopped node shuts down at once (Ray waits up to 30 s for its work to drain)
        "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0",
        "OMP_NUM_THREADS": "1",
        # the workers import leanloop (installed) and the tests' classes they are sent
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p
        ),
    }
    for name in ("RAY_ADDRESS", "RAY_AUTH_TOKEN_PATH", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"):
        env.pop(name, None)
    return env


@contextlib.contextmanager
def loopback_cluster(
    tmp_path: Path, nodes: int = 2, cpus_per_node: int = 1
) -> Iterator[LoopbackCluster]:
    """A cluster of ``nodes`` nodes of ``cpus_per_node`` CPUs on 127.0.0.1, stopped on exit.
    The logs of ``ray start`` go to ``tmp_path``; Ray's own files to a short directory under
    /tmp (its socket paths must stay under 108 bytes), removed on exit."""
    logs = Path(tmp_path)
    logs.mkdir(parents=True, exist_ok=True)
    temp_dir = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp" if Path("/tmp").is_dir() else None))
    token = secrets.token_hex(32)
    cluster = LoopbackCluster(
        address="",  # the head's, once it runs
        nodes=[],
        temp_dir=temp_dir,
        logs=logs,
        cpus_per_node=cpus_per_node,
        token=token,
        _env=_base_env(token),
    )
    try:
        for _ in range(nodes):
            cluster.start_node()
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(temp_dir, ignore_errors=True)
