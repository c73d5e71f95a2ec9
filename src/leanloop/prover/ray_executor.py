"""The proving engine's executor on Ray: each pending task goes to a Ray actor (a
``ProofWorker``) on a local Ray started here or a cluster; results are recorded in the driver
as they come. A task whose worker dies is given to another one a few times, then recorded as an
``error``; a task goes only to a worker that has started."""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from leanloop.data.records import AttemptStatus, ProofAttempt
from leanloop.errors import LeanloopError
from leanloop.prover.base import BaseProver
from leanloop.prover.proof_search import describe_exception, excerpt
from leanloop.prover.result import SearchResult
from leanloop.prover.worker import ProofWorker
from leanloop.words import plural

if TYPE_CHECKING:
    from leanloop.prover.engine import SearchSetup, Task

log = logging.getLogger(__name__)


LOOPBACK = "127.0.0.1"
#: The address that asks for a Ray of this machine, started here (as Ray's own ``local``).
LOCAL = "local"


def is_local(address: str | None) -> bool:
    """Whether ``address`` asks for a Ray started on this machine (none, or ``local``)."""
    return address is None or address == LOCAL


@contextlib.contextmanager
def loopback_ray(address: str | None) -> Iterator[None]:
    """While Ray starts: a Ray of this machine alone (no ``address``, or ``local``) or a cluster
    at a loopback
    address is kept on 127.0.0.1. Ray otherwise takes the machine's outward address for its
    node, even when told 127.0.0.1 (``services.resolve_ip_for_localhost``), unless its
    single-machine mode is on: ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` for the processes it
    starts, and the same setting, read when Ray was imported, in this one."""
    if not is_local(address):
        assert address is not None
        host = address.removeprefix("ray://").rpartition(":")[0]
        if host not in (LOOPBACK, "localhost"):
            yield
            return
    from ray._private import ray_constants

    name = ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR
    before, constant = os.environ.get(name), ray_constants.ENABLE_RAY_CLUSTER
    os.environ[name] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = constant
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


@contextlib.contextmanager
def using_ray(address: str | None, workers: int) -> Iterator[Any]:
    """Ray while the block runs: the one this process joined already, or one started here (a
    Ray of this machine with ``workers`` CPUs, every port on 127.0.0.1, when ``address`` is
    None or ``local``; else the cluster at ``address``), shut down after the block."""
    try:
        import ray
    except ImportError:
        raise LeanloopError(
            "proving on several workers needs Ray", hint="pip install 'leanloop[dist]'"
        ) from None
    started_here = not ray.is_initialized()
    if started_here:
        local = is_local(address)
        with loopback_ray(address):
            ray.init(
                address=address,
                num_cpus=workers if local else None,
                include_dashboard=False,
                logging_level=logging.WARNING,
                _node_ip_address=LOOPBACK if local else None,
            )
    try:
        yield ray
    finally:
        if started_here:
            ray.shutdown()


@dataclass
class RayExecutor:
    """Runs pending tasks on Ray actors; ``record(attempt, stored)`` is called here (the
    driver) for each attempt (``stored``: the worker put it in ``database_url`` already). With
    ``solved`` (stop at the first proof), a theorem's next attempt is queued only when the one
    before found no proof, and ``skip(n)`` counts the attempts left unmade. A task whose
    worker dies (a node stopped, out of memory) is given to another worker, up to
    ``LOST_RETRIES`` times, then recorded as an ``error``. A task goes only to a worker that
    has started: one that no node has room for (a node gone, more workers than CPUs) is never
    waited on."""

    setup: SearchSetup
    record: Callable[[ProofAttempt, bool], None]
    skip: Callable[[int], None]
    solved: set | None = None
    database_url: str | None = None
    database: Any = None

    def run(self, pending: list[Task]) -> None:
        """Make ``pending`` on Ray actors (a local Ray, or the cluster at the setup's
        address), killing every actor made at the end."""
        setup = self.setup
        with using_ray(setup.address, setup.workers) as ray:
            self.ray = ray
            if self.database is not None and self.database_url is None:
                _refuse_remote_nodes(ray, self.database)
            self.remote = ray.remote(num_cpus=1, num_gpus=setup.prover.config.num_gpus)(ProofWorker)
            self._queue(pending)
            self.running: dict = {}  # future -> (actor, task)
            self.starting: dict = {}  # an actor's __ray_ready__ future -> the actor
            self.started: list = []  # the actors alive that started
            self.actors: list = []  # every actor made (killed at the end)
            self.lost: dict[tuple, int] = {}
            for _ in range(min(setup.workers, len(self.queue))):
                self._make()
            try:
                while self.running or (self.queue and self.starting):
                    future = self._next()
                    if future in self.starting:
                        self._started(future)
                    else:
                        self._finished(future)
            finally:
                for actor in self.actors:
                    ray.kill(actor, no_restart=True)

    def _queue(self, pending: list[Task]) -> None:
        """One attempt of each theorem at a time when stopping at the first proof."""
        self.later: dict[tuple, deque[Task]] = {}
        self.queue: deque[Task] = deque()
        if self.solved is None:
            self.queue.extend(pending)
            return
        for task in pending:
            theorem = (task.theorem.key, task.theorem.commit)
            if theorem in self.later:
                self.later[theorem].append(task)
            else:
                self.later[theorem] = deque()
                self.queue.append(task)

    def _make(self) -> None:
        setup = self.setup
        actor = self.remote.remote(
            setup.prover,
            setup.servers,
            setup.project_root,
            setup.mode,
            setup.sources,
            self.database_url,
        )
        self.actors.append(actor)
        self.starting[actor.__ray_ready__.remote()] = actor

    def _submit_idle(self) -> None:
        """A queued task to each started actor that has none."""
        busy = [a for a, _ in self.running.values()]
        for actor in self.started:
            if not self.queue:
                return
            if all(a is not actor for a in busy):
                task = self.queue.popleft()
                future = actor.prove.remote(task.theorem, task.attempt, self.setup.run)
                self.running[future] = (actor, task)

    def _drop(self, actor) -> None:
        self.ray.kill(actor, no_restart=True)
        if any(a is actor for a in self.started):
            self.started.remove(actor)

    def _next(self):
        ready, _ = self.ray.wait(
            [*self.running, *self.starting],
            num_returns=1,
            timeout=None if self.running else WORKER_START_TIMEOUT,
        )
        if not ready:
            raise LeanloopError(
                f"no Ray worker started in {WORKER_START_TIMEOUT:.0f} s and none is "
                f"proving: {plural(len(self.queue), 'attempt')} left",
                hint="check that the cluster has a free CPU (and GPU) for a worker",
            )
        return ready[0]

    def _started(self, future) -> None:
        actor = self.starting.pop(future)
        try:
            self.ray.get(future)
        except self.ray.exceptions.RayActorError as exc:
            self.ray.kill(actor, no_restart=True)
            if exc.actor_init_failed:  # a worker cannot be made: none can
                raise LeanloopError(f"a Ray worker could not start: {ray_reason(exc)}") from exc
            self._make()  # its node went away before it started: another, elsewhere
            return
        self.started.append(actor)
        self._submit_idle()

    def _finished(self, future) -> None:
        actor, task = self.running.pop(future)
        stored = self.database_url is not None
        try:
            attempt = self.ray.get(future)
        except self.ray.exceptions.RayError as exc:
            # the worker died (killed, out of memory, its node gone): its task goes to
            # another worker (one started), a few times at most
            self._drop(actor)
            self._make()  # in its place, given tasks once (if ever) it starts
            self.lost[task.key] = self.lost.get(task.key, 0) + 1
            if self.lost[task.key] <= LOST_RETRIES:
                log.warning("%s: its worker stopped; tried again", task.theorem.full_name)
                self.queue.appendleft(task)
                self._submit_idle()
                return
            attempt = _lost(task, self.setup.run, self.setup.prover, exc)
            stored = False
        self.record(attempt, stored)
        theorem = (task.theorem.key, task.theorem.commit)
        rest = self.later.get(theorem)
        if rest and (self.solved is None or theorem not in self.solved):
            self.queue.append(rest.popleft())
        elif rest:  # solved: its other attempts are not made
            self.skip(len(rest))
            rest.clear()
        self._submit_idle()


#: How many times a task whose worker died is given to another worker before it is an error.
LOST_RETRIES = 2
#: How long the run waits, with no task running, for a Ray worker to start before it fails.
WORKER_START_TIMEOUT = 600.0


def ray_reason(exc: BaseException) -> str:
    """A Ray error in one line: the last line of its text (for a worker that raised, the
    exception it raised, after Ray's traceback), without Ray's terminal colours."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return excerpt(lines[-1]) if lines else type(exc).__name__


def _refuse_remote_nodes(ray, database) -> None:
    """A SQLite file is on this machine only: refuse a cluster with nodes elsewhere."""
    import socket

    host = socket.gethostname()
    local = {"127.0.0.1", "::1", "localhost"}
    with contextlib.suppress(OSError):
        local |= set(socket.gethostbyname_ex(host)[2])
    remote = sorted(
        n.get("NodeManagerAddress", "")
        for n in ray.nodes()
        if n.get("Alive")
        and n.get("NodeManagerHostname") != host
        and n.get("NodeManagerAddress") not in local
    )
    if remote:
        raise LeanloopError(
            f"the database {database.description} is a SQLite file on this machine, but the Ray "
            f"cluster has nodes on {', '.join(remote)}",
            hint="use a PostgreSQL database every node reaches (--db postgresql://...)",
        )


def _lost(task: Task, run: str, prover: BaseProver, exc) -> ProofAttempt:
    return SearchResult(
        target=task.theorem.full_name,
        status=AttemptStatus.ERROR,
        error=f"the worker proving it stopped: {describe_exception(exc)}",
    ).to_attempt(task.theorem, run=run, attempt=task.attempt, prover=prover.name)
