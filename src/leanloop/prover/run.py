"""The one proving engine: runs a prover over many theorems — leasing Lean servers, by search or
whole proofs, on in-process or Ray workers — stores each attempt as it finishes, skips what the
run has finished (as the database says), and hands every proof found to an optional hook run in
one place (the driver), such as the write-back of ``sorry`` proofs into a user's files.

``leanloop prove`` (datasets and projects), the agents' ``prove()``, ``evaluate`` and the main
job all run through :func:`run_proofs`."""

from __future__ import annotations

import contextlib
import logging
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from leanloop.data.records import AttemptStatus, ProofAttempt, Theorem, TheoremKey
from leanloop.database.attempts import RunProgress
from leanloop.errors import LeanloopError
from leanloop.lean.pool import ServerPool
from leanloop.lean.server import LeanServer, TheoremSource
from leanloop.prover.base import BaseProver
from leanloop.prover.config import ProofMode
from leanloop.prover.proof_search import describe_exception
from leanloop.prover.report import EvaluationReport
from leanloop.prover.result import SearchResult
from leanloop.prover.target import Target
from leanloop.words import plural

if TYPE_CHECKING:
    from leanloop.database import DynamicDatabase

log = logging.getLogger(__name__)

#: Where Lean servers come from: a pool (kept open by its owner) or a maker of one server.
Servers = ServerPool[LeanServer] | Callable[[], LeanServer]
#: Lends a Lean server for a block: ``with lease() as server: ...``.
Lease = Callable[[], AbstractContextManager[LeanServer]]
Environment = Literal["lean", "replay"]


class ProofHook(Protocol):
    """Called in the driver, one proof at a time, for each attempt that found a proof Lean
    accepted (``proved``), before it is stored: returns the attempt to store (e.g. with the
    outcome of writing the proof into a file). ``lease`` lends a Lean server of the run."""

    def __call__(self, theorem: Theorem, attempt: ProofAttempt, lease: Lease) -> ProofAttempt: ...


def _pool(servers: Servers, server_uses: int) -> tuple[ServerPool[LeanServer], bool]:
    """The pool to lease from, and whether it was made here (and so is closed here)."""
    if isinstance(servers, ServerPool):
        return servers, False
    return ServerPool.single(servers, max_uses=server_uses), True


class ProofWorker:
    """Proves theorems one attempt at a time with its own prover and Lean servers (a Ray actor,
    or run in-process); ``servers`` is made where the worker runs, a server is reused for
    ``config.server_uses`` theorems and replaced when it fails. Theorem records are read from
    their files under ``project_root`` on a Lean server, or are given as ``sources`` (e.g. a
    benchmark's statements, which have no file)."""

    def __init__(
        self,
        prover: BaseProver,
        servers: Servers,
        project_root: str | Path | None = None,
        mode: ProofMode = ProofMode.SEARCH,
        sources: Mapping[tuple[TheoremKey, str], TheoremSource] | None = None,
        database_url: str | None = None,
    ) -> None:
        self.prover = prover
        self.pool, self._own_pool = _pool(servers, prover.config.server_uses)
        self.project_root = Path(project_root) if project_root is not None else None
        self.mode = ProofMode(mode)
        self.sources = dict(sources or {})
        self.database_url = database_url
        self._database: DynamicDatabase | None = None

    def lease(self) -> AbstractContextManager[LeanServer]:
        return self.pool.lease(None)

    def prove(self, theorem: Theorem, attempt: int, run: str) -> ProofAttempt:
        """One attempt at ``theorem``; any failure becomes an ``error`` attempt."""
        environment: Environment | None = None
        try:
            with self.lease() as server:
                environment = "lean" if server.checks_with_lean else "replay"
                source = self.sources.get((theorem.key, theorem.commit))
                target = Target.of(
                    theorem=source if source is not None else theorem,
                    project_root=self.project_root,
                )
                result = self.prover.prove_target(server, target, self.mode, attempt=attempt)
        except Exception as exc:  # this theorem fails, the worker goes on
            result = SearchResult(
                target=theorem.full_name,
                status=AttemptStatus.ERROR,
                error=describe_exception(exc),
            )
        made = result.to_attempt(
            theorem, run=run, attempt=attempt, prover=self.prover.name, environment=environment
        ).model_copy(update={"worker": where()})
        if self.database_url is not None:  # a database every node reaches: stored here
            if self._database is None:
                from leanloop.database import DynamicDatabase

                self._database = DynamicDatabase(self.database_url)
            self._database.record_attempt(made)
        return made

    def close(self) -> None:
        if self._own_pool:
            self.pool.close()
        if self._database is not None:
            self._database.close()


def where() -> str:
    """The host this process runs on, and its Ray node when it is a Ray worker."""
    import socket

    host = socket.gethostname()
    try:
        import ray

        if ray.is_initialized():
            node = ray.get_runtime_context().get_node_id()
            return f"{host}/{node[:12]}"
    except Exception:  # not on Ray, or Ray's context is unavailable
        pass
    return host


@dataclass
class ProofRun:
    """What one call of ``run_proofs`` ends with: ``attempts`` are the run's attempts at the
    theorems asked for (stored by earlier calls and new), ``new`` those made now, ``skipped``
    those an earlier call finished (not made again).

    Attributes:
        run: The run's name.
        attempts: Every attempt of the run at the theorems asked for.
        new: The attempts made by this call.
        skipped: The attempts an earlier call finished.
    """

    run: str
    attempts: list[ProofAttempt] = field(default_factory=list)
    new: list[ProofAttempt] = field(default_factory=list)
    skipped: list[ProofAttempt] = field(default_factory=list)

    def report(self) -> EvaluationReport:
        """The report of the run's attempts.

        Returns:
            pass@1 and pass@k (or their replay counterparts), counts and times.
        """
        return EvaluationReport.from_attempts(self.run, self.attempts)


@dataclass(frozen=True)
class _Task:
    theorem: Theorem
    attempt: int

    @property
    def key(self) -> tuple[TheoremKey, str, int]:
        return (self.theorem.key, self.theorem.commit, self.attempt)


def run_proofs(
    theorems: Iterable[Theorem],
    prover: BaseProver,
    servers: Servers,
    *,
    mode: ProofMode | str = ProofMode.SEARCH,
    project_root: str | Path | None = None,
    database: DynamicDatabase | None = None,
    run: str = "evaluation",
    attempts: int | None = None,
    stop_at_first: bool = False,
    num_workers: int | None = None,
    address: str | None = None,
    hook: ProofHook | None = None,
    progress: Callable[[int, int], None] | None = None,
    on_result: Callable[[ProofAttempt], None] | None = None,
    sources: Mapping[tuple[TheoremKey, str], TheoremSource] | None = None,
) -> ProofRun:
    """Make ``attempts`` (``prover.config.num_attempts``) attempts at every theorem and return
    the run's attempts.

    With one worker and no ``address`` the attempts run here, one after the other, on servers
    from ``servers`` (a ``ServerPool``, or a maker of servers pooled here); otherwise on
    ``num_workers`` (``prover.config.num_workers``) Ray actors, on a local Ray started here or
    the cluster at ``address``, each making its servers with ``servers`` (then a picklable
    maker, such as ``leanloop.lean.launch.ReplLauncher``) where it runs.

    Each attempt goes into ``database`` under ``run`` as soon as it ends (after ``hook``, for
    a proof). What the run finished before — as ``RunProgress`` reads its stored attempts: every
    attempt that did not end in an error — is skipped. With ``stop_at_first``, a theorem's
    attempts stop at the first that finds a proof (a solved theorem is skipped whole).
    ``progress(done, total)`` and ``on_result(attempt)`` are called as attempts end.
    ``sources`` gives the source of theorems that have no file (keyed by theorem key and
    commit), such as a benchmark's statements.

    Args:
        theorems: The theorems (each once; repeats are dropped).
        prover: The prover.
        servers: A ``ServerPool``, or a maker of Lean servers (picklable for Ray workers),
            such as ``leanloop.lean.launch.ReplLauncher`` or a ``ReplayServer`` maker.
        mode: ``search`` or ``whole``.
        project_root: The Lean project the theorems' files are read from.
        database: Where each attempt is stored (None: nowhere, and nothing is skipped).
        run: The run's name.
        attempts: Attempts per theorem (default ``prover.config.num_attempts``).
        stop_at_first: Stop a theorem's attempts at the first that finds a proof.
        num_workers: Workers (default ``prover.config.num_workers``); more than one runs on
            Ray.
        address: A Ray cluster's address (None: a local Ray, when there are several workers).
        hook: Called with each proof before it is stored (e.g. to write it into a file).
        progress: Called as ``progress(done, total)`` as attempts end.
        on_result: Called with each attempt as it ends.
        sources: The source of theorems that have no file.

    Returns:
        The run's attempts at these theorems, those made now and those skipped.

    Raises:
        LeanloopError: ``num_workers`` or ``attempts`` is below 1, or several workers are
            given a pool instead of a maker of servers.
    """
    mode = ProofMode(mode)
    config = prover.config
    workers = num_workers or config.num_workers
    if workers < 1:
        raise LeanloopError(f"num_workers={workers}: use at least one worker")
    if (workers > 1 or address is not None) and isinstance(servers, ServerPool):
        raise LeanloopError(
            "proving on several workers needs a maker of Lean servers, not a pool",
            hint="give a picklable maker such as leanloop.lean.launch.ReplLauncher",
        )
    count = attempts if attempts is not None else config.num_attempts
    if count < 1:
        raise LeanloopError(f"attempts={count}: make at least one attempt per theorem")
    theorems = _distinct(theorems)
    tasks = [_Task(t, a) for t in theorems for a in range(count)]
    stored = database.get_attempts(run) if database is not None else []
    state = RunProgress.of(stored)  # what the run finished: one read of its attempts
    solved = set(state.solved) if stop_at_first else set()
    pending = [
        t
        for t in tasks
        if t.key not in state.finished and (t.theorem.key, t.theorem.commit) not in solved
    ]
    result = ProofRun(run)
    wanted = {t.key for t in tasks}
    pending_keys = {t.key for t in pending}
    result.skipped = [a for a in stored if (a.key, a.commit, a.attempt) in wanted - pending_keys]
    if result.skipped:
        log.info("%s of run %r already finished", plural(len(result.skipped), "attempt"), run)
    total = len(tasks)
    done = total - len(pending)
    driver_pool: ServerPool[LeanServer] | None = None

    def record(attempt: ProofAttempt, lease: Lease, stored: bool = False) -> None:
        """``stored``: the worker recorded it already (a database every node reaches)."""
        nonlocal done
        if hook is not None and attempt.status is AttemptStatus.PROVED:
            hooked = _hooked(hook, theorem_of[attempt.key, attempt.commit], attempt, lease)
            stored = stored and hooked == attempt
            attempt = hooked
        if database is not None and not stored:
            database.record_attempt(attempt)
        result.new.append(attempt)
        if attempt.status.found_proof:
            solved.add((attempt.key, attempt.commit))
        done += 1
        if on_result is not None:
            on_result(attempt)
        if progress is not None:
            progress(done, total)

    def skip(count: int) -> None:
        """``count`` attempts of a theorem already solved are not made."""
        nonlocal done
        done += count
        if progress is not None and count:
            progress(done, total)

    theorem_of = {(t.key, t.commit): t for t in theorems}
    if progress is not None:
        progress(done, total)
    if pending:
        if workers == 1 and address is None:
            worker = ProofWorker(prover, servers, project_root, mode, sources)
            try:
                for task in pending:
                    if stop_at_first and (task.theorem.key, task.theorem.commit) in solved:
                        skip(1)  # an earlier attempt of this call found a proof
                        continue
                    record(worker.prove(task.theorem, task.attempt, run), worker.lease)
            finally:
                worker.close()
        else:

            def driver_lease() -> AbstractContextManager[LeanServer]:
                nonlocal driver_pool
                if driver_pool is None:
                    driver_pool = _pool(servers, config.server_uses)[0]
                return driver_pool.lease(None)

            # PostgreSQL: each worker stores its attempts; SQLite: the driver does (one machine)
            shared = database is not None and database.sqlite_path is None
            try:
                _run_on_ray(
                    pending,
                    prover,
                    servers,
                    project_root,
                    mode,
                    sources,
                    workers,
                    address,
                    run,
                    lambda attempt, stored: record(attempt, driver_lease, stored),
                    solved if stop_at_first else None,
                    skip,
                    # the password too: a URL object prints it as '***'
                    (
                        database.url.render_as_string(hide_password=False)
                        if shared and database is not None
                        else None
                    ),
                    database,
                )
            finally:
                if driver_pool is not None:  # made here: several workers refuse a pool
                    driver_pool.close()
    latest = {(a.key, a.commit, a.attempt): a for a in [*stored, *result.new]}
    result.attempts = [attempt for key, attempt in latest.items() if key in wanted]
    return result


def evaluate(
    theorems: Iterable[Theorem],
    prover: BaseProver,
    server_factory: Servers,
    *,
    num_workers: int | None = None,
    address: str | None = None,
    database: DynamicDatabase | None = None,
    run: str = "evaluation",
    mode: ProofMode | str = ProofMode.SEARCH,
    project_root: str | Path | None = None,
    progress: Callable[[int, int], None] | None = None,
    on_result: Callable[[ProofAttempt], None] | None = None,
) -> EvaluationReport:
    """Attempt every theorem ``prover.config.num_attempts`` times and report pass@1 and pass@k
    (see [run_proofs][leanloop.prover.run.run_proofs], which this is a view of).

    Args:
        theorems: The theorems.
        prover: The prover.
        server_factory: A ``ServerPool``, or a maker of Lean servers.
        num_workers: Workers (default ``prover.config.num_workers``); more than one runs on
            Ray.
        address: A Ray cluster's address.
        database: Where each attempt is stored; a rerun of ``run`` skips what it finished.
        run: The run's name.
        mode: ``search`` or ``whole``.
        project_root: The Lean project the theorems' files are read from.
        progress: Called as ``progress(done, total)`` as attempts end.
        on_result: Called with each attempt as it ends.

    Returns:
        The report of the run's attempts at these theorems.
    """
    return run_proofs(
        theorems,
        prover,
        server_factory,
        mode=mode,
        project_root=project_root,
        database=database,
        run=run,
        num_workers=num_workers,
        address=address,
        progress=progress,
        on_result=on_result,
    ).report()


def _distinct(theorems: Iterable[Theorem]) -> list[Theorem]:
    seen: set = set()
    out = []
    for theorem in theorems:
        if (theorem.key, theorem.commit) not in seen:
            seen.add((theorem.key, theorem.commit))
            out.append(theorem)
    return out


def _hooked(hook: ProofHook, theorem: Theorem, attempt: ProofAttempt, lease: Lease):
    try:
        return hook(theorem, attempt, lease)
    except Exception as exc:  # the proof stays unwritten; the run goes on
        log.warning("%s: the hook on its proof failed: %s", theorem.full_name, exc)
        return attempt.model_copy(
            update={
                "status": AttemptStatus.ERROR,
                "error": f"Lean accepted a proof, but handling it failed: "
                f"{describe_exception(exc)}",
            }
        )


LOOPBACK = "127.0.0.1"


@contextlib.contextmanager
def loopback_ray(address: str | None) -> Iterator[None]:
    """While Ray starts: a Ray of this machine alone (no ``address``) or a cluster at a loopback
    address is kept on 127.0.0.1. Ray otherwise takes the machine's outward address for its
    node, even when told 127.0.0.1 (``services.resolve_ip_for_localhost``), unless its
    single-machine mode is on: ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` for the processes it
    starts, and the same setting, read when Ray was imported, in this one."""
    if address is not None:
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
def _ray(address: str | None, workers: int) -> Iterator[Any]:
    try:
        import ray
    except ImportError:
        raise LeanloopError(
            "proving on several workers needs Ray", hint="pip install 'leanloop[dist]'"
        ) from None
    started_here = not ray.is_initialized()
    if started_here:
        with loopback_ray(address):
            ray.init(
                address=address,
                num_cpus=workers if address is None else None,
                include_dashboard=False,
                logging_level=logging.WARNING,
                _node_ip_address=LOOPBACK if address is None else None,
            )
    try:
        yield ray
    finally:
        if started_here:
            ray.shutdown()


def _run_on_ray(
    pending,
    prover,
    servers,
    project_root,
    mode,
    sources,
    workers,
    address,
    run,
    record,
    solved,
    skip,
    database_url,
    database,
) -> None:
    """The pending tasks on Ray actors; ``record(attempt, stored)`` is called here (the driver)
    for each attempt (``stored``: the worker put it in ``database_url`` already). With
    ``solved`` (stop at the first proof), a theorem's next attempt is queued only when the one
    before found no proof, and ``skip(n)`` counts the attempts left unmade. A task whose worker
    dies (a node stopped, out of memory) is given to another worker, up to ``LOST_RETRIES``
    times, then recorded as an ``error``. A task goes only to a worker that has started: one
    that no node has room for (a node gone, more workers than CPUs) is never waited on."""
    with _ray(address, workers) as ray:
        if database is not None and database_url is None:
            _refuse_remote_nodes(ray, database)
        remote = ray.remote(num_cpus=1, num_gpus=prover.config.num_gpus)(ProofWorker)
        if solved is not None:  # one attempt of each theorem at a time
            later: dict[tuple, deque[_Task]] = {}
            queue: deque[_Task] = deque()
            for task in pending:
                theorem = (task.theorem.key, task.theorem.commit)
                if theorem in later:
                    later[theorem].append(task)
                else:
                    later[theorem] = deque()
                    queue.append(task)
        else:
            later, queue = {}, deque(pending)
        running: dict = {}  # future -> (actor, task)
        starting: dict = {}  # an actor's __ray_ready__ future -> the actor, until it started
        started: list = []  # the actors alive that started
        actors: list = []  # every actor made (killed at the end)
        lost: dict[tuple, int] = {}

        def make() -> None:
            actor = remote.remote(prover, servers, project_root, mode, sources, database_url)
            actors.append(actor)
            starting[actor.__ray_ready__.remote()] = actor

        def submit_idle() -> None:
            """A queued task to each started actor that has none."""
            busy = [a for a, _ in running.values()]
            for actor in started:
                if not queue:
                    return
                if all(a is not actor for a in busy):
                    task = queue.popleft()
                    running[actor.prove.remote(task.theorem, task.attempt, run)] = (actor, task)

        def drop(actor) -> None:
            ray.kill(actor, no_restart=True)
            if any(a is actor for a in started):
                started.remove(actor)

        for _ in range(min(workers, len(queue))):
            make()
        try:
            while running or (queue and starting):
                ready, _ = ray.wait(
                    [*running, *starting],
                    num_returns=1,
                    timeout=None if running else WORKER_START_TIMEOUT,
                )
                if not ready:
                    raise LeanloopError(
                        f"no Ray worker started in {WORKER_START_TIMEOUT:.0f} s and none is "
                        f"proving: {plural(len(queue), 'attempt')} left",
                        hint="check that the cluster has a free CPU (and GPU) for a worker",
                    )
                (future,) = ready
                if future in starting:
                    actor = starting.pop(future)
                    try:
                        ray.get(future)
                    except ray.exceptions.RayActorError as exc:
                        ray.kill(actor, no_restart=True)
                        if exc.actor_init_failed:  # a worker cannot be made: none can
                            raise LeanloopError(
                                f"a Ray worker could not start: {describe_exception(exc)}"
                            ) from exc
                        make()  # its node went away before it started: another, elsewhere
                        continue
                    started.append(actor)
                    submit_idle()
                    continue
                actor, task = running.pop(future)
                stored = database_url is not None
                try:
                    attempt = ray.get(future)
                except ray.exceptions.RayError as exc:
                    # the worker died (killed, out of memory, its node gone): its task goes to
                    # another worker (one started), a few times at most
                    drop(actor)
                    make()  # in its place, given tasks once (if ever) it starts
                    lost[task.key] = lost.get(task.key, 0) + 1
                    if lost[task.key] <= LOST_RETRIES:
                        log.warning("%s: its worker stopped; tried again", task.theorem.full_name)
                        queue.appendleft(task)
                        submit_idle()
                        continue
                    attempt, stored = _lost(task, run, prover, exc), False
                record(attempt, stored)
                theorem = (task.theorem.key, task.theorem.commit)
                rest = later.get(theorem)
                if rest and theorem not in solved:
                    queue.append(rest.popleft())
                elif rest:  # solved: its other attempts are not made
                    skip(len(rest))
                    rest.clear()
                submit_idle()
        finally:
            for actor in actors:
                ray.kill(actor, no_restart=True)


#: How many times a task whose worker died is given to another worker before it is an error.
LOST_RETRIES = 2
#: How long the run waits, with no task running, for a Ray worker to start before it fails.
WORKER_START_TIMEOUT = 600.0


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


def _lost(task: _Task, run: str, prover: BaseProver, exc) -> ProofAttempt:
    return SearchResult(
        target=task.theorem.full_name,
        status=AttemptStatus.ERROR,
        error=f"the worker proving it stopped: {describe_exception(exc)}",
    ).to_attempt(task.theorem, run=run, attempt=task.attempt, prover=prover.name)
