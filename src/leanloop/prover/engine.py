"""The one proving engine: one shell over two executors.

The shell (``Shell``) plans a run from what the database holds of it (``RunProgress``: every
stored attempt that did not end in an error is finished, and with ``stop_at_first`` a solved
theorem is skipped whole), records each attempt in the driver as it ends (after the hook, such
as the write-back of a ``sorry`` proof), and calls the callbacks. The executors make the
pending attempts: the search executor leases a Lean server and searches (or checks whole
proofs) in-process or on Ray actors (``prove``), and the sampling executor runs the bounded
sample → verify pipeline (``leanloop.prover.sampling``), its checks in-process or on Ray actors
(``leanloop.prover.ray_sampling``).

``run_job`` runs a ``ProofJob``: its components come from ``leanloop.prover.assemble`` and its
run's name from ``ProofJob.run_name``, so that every way of starting a job resumes the others'
run. ``run_proofs``, ``evaluate``, ``run_benchmark`` and ``prove_sorries`` are thin wrappers."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from leanloop.data.records import AttemptStatus, ProofAttempt, Theorem, TheoremKey
from leanloop.database.attempts import RunProgress
from leanloop.errors import LeanloopError
from leanloop.lean.pool import ServerPool
from leanloop.lean.server import LeanServer, TheoremSource
from leanloop.prover.base import BaseProver
from leanloop.prover.config import ProofMode
from leanloop.prover.proof_search import describe_exception
from leanloop.prover.report import EvaluationReport
from leanloop.prover.worker import Lease, ProofHook, ProofWorker, Servers, pool_of
from leanloop.words import plural

if TYPE_CHECKING:
    from leanloop.database import DynamicDatabase
    from leanloop.prover.job import ProofJob
    from leanloop.prover.sampling import BenchmarkRun

log = logging.getLogger(__name__)


@dataclass
class Callbacks:
    """What the driver calls: ``hook(theorem, attempt, lease)`` with each proof Lean accepted
    before it is stored (it returns the attempt to store), ``on_result(attempt)`` with each
    attempt as it is stored, and ``progress(done, total)`` as attempts end."""

    hook: ProofHook | None = None
    progress: Callable[[int, int], None] | None = None
    on_result: Callable[[ProofAttempt], None] | None = None


@dataclass(frozen=True)
class Task:
    """One attempt to make: a theorem and the attempt's index."""

    theorem: Theorem
    attempt: int

    @property
    def key(self) -> tuple[TheoremKey, str, int]:
        return (self.theorem.key, self.theorem.commit, self.attempt)


@dataclass
class ProofRun:
    """What one call of the engine ends with: ``attempts`` are the run's attempts at the
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


class Shell:
    """The driver's side of a run: plans it from what ``database`` holds of ``run``, records
    each attempt (after the hook) and calls the callbacks. ``record`` and ``skip`` are called
    from one thread; ``is_solved`` may be asked from any."""

    def __init__(
        self,
        run: str,
        database: DynamicDatabase | None,
        callbacks: Callbacks | None = None,
        *,
        stop_at_first: bool = False,
    ) -> None:
        self.run = run
        self.database = database
        self.callbacks = callbacks or Callbacks()
        self.stop_at_first = stop_at_first
        self.result = ProofRun(run)
        self.solved: set[tuple[TheoremKey, str]] = set()
        self.done = self.total = 0
        self._lock = threading.Lock()
        self._stored: list[ProofAttempt] = []
        self._wanted: set[tuple[TheoremKey, str, int]] = set()
        self._theorems: dict[tuple[TheoremKey, str], Theorem] = {}

    def plan(self, theorems: Iterable[Theorem], count: int) -> list[Task]:
        """The tasks this call makes: ``count`` attempts at each theorem (repeats dropped),
        less those the run finished, and with ``stop_at_first`` those of a solved theorem.

        Args:
            theorems: The theorems.
            count: Attempts per theorem.

        Returns:
            The pending tasks, in order.
        """
        if count < 1:
            raise LeanloopError(f"attempts={count}: make at least one attempt per theorem")
        self._theorems = {}
        for theorem in theorems:  # each once: the first of repeats
            self._theorems.setdefault((theorem.key, theorem.commit), theorem)
        tasks = [Task(t, a) for t in self._theorems.values() for a in range(count)]
        self._wanted = {t.key for t in tasks}
        if self.database is not None:
            self._stored = [
                a
                for a in self.database.get_attempts(self.run)
                if (a.key, a.commit, a.attempt) in self._wanted
            ]
        state = RunProgress.of(self._stored)  # what the run finished: one read of its attempts
        if self.stop_at_first:
            self.solved = set(state.solved)
        pending = [
            t
            for t in tasks
            if t.key not in state.finished and (t.theorem.key, t.theorem.commit) not in self.solved
        ]
        pending_keys = {t.key for t in pending}
        self.result.skipped = [
            a for a in self._stored if (a.key, a.commit, a.attempt) not in pending_keys
        ]
        if self.result.skipped:
            log.info(
                "%s of run %r already finished",
                plural(len(self.result.skipped), "attempt"),
                self.run,
            )
        self.total = len(tasks)
        self.done = self.total - len(pending)
        if self.callbacks.progress is not None:
            self.callbacks.progress(self.done, self.total)
        return pending

    @property
    def stored(self) -> list[ProofAttempt]:
        """The run's stored attempts at the planned tasks."""
        return self._stored

    def theorem(self, attempt: ProofAttempt) -> Theorem:
        """The planned theorem an attempt is of."""
        return self._theorems[(attempt.key, attempt.commit)]

    def is_solved(self, theorem: Theorem) -> bool:
        """Whether a proof of ``theorem`` was found (always False without stop_at_first)."""
        with self._lock:
            return (theorem.key, theorem.commit) in self.solved

    def record(self, attempt: ProofAttempt, lease: Lease | None = None, stored: bool = False):
        """Store an attempt (``stored``: a worker stored it already) after the hook of a
        proof, and call the callbacks."""
        hook = self.callbacks.hook
        if hook is not None and lease is not None and attempt.status is AttemptStatus.PROVED:
            hooked = _hooked(hook, self.theorem(attempt), attempt, lease)
            stored = stored and hooked == attempt
            attempt = hooked
        if self.database is not None and not stored:
            self.database.record_attempt(attempt)  # the driver alone writes (unless shared)
        self.result.new.append(attempt)
        if attempt.status.found_proof and self.stop_at_first:
            with self._lock:
                self.solved.add((attempt.key, attempt.commit))
        self.done += 1
        if self.callbacks.on_result is not None:
            self.callbacks.on_result(attempt)
        if self.callbacks.progress is not None:
            self.callbacks.progress(self.done, self.total)

    def skip(self, count: int) -> None:
        """``count`` attempts of a theorem already solved are not made."""
        self.done += count
        if self.callbacks.progress is not None and count:
            self.callbacks.progress(self.done, self.total)

    def finish(self) -> ProofRun:
        """The run's attempts at the planned tasks: the latest of each, stored or new."""
        latest = {(a.key, a.commit, a.attempt): a for a in [*self._stored, *self.result.new]}
        self.result.attempts = [a for key, a in latest.items() if key in self._wanted]
        return self.result


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


@dataclass(frozen=True)
class SearchSetup:
    """What the search executor runs with: the prover, where servers come from, the mode,
    the project the theorems' files are read under (or the sources of theorems without a
    file), the workers (more than one, or an ``address``: Ray) and the run's name."""

    prover: BaseProver
    servers: Servers
    run: str
    mode: ProofMode = ProofMode.SEARCH
    project_root: Path | None = None
    sources: Mapping[tuple[TheoremKey, str], TheoremSource] | None = None
    workers: int = 1
    address: str | None = None

    @property
    def on_ray(self) -> bool:
        return self.workers > 1 or self.address is not None


def prove(setup: SearchSetup, shell: Shell, pending: list[Task]) -> ProofRun:
    """The search executor: make the pending tasks in-process or on Ray, each recorded by
    ``shell`` as it ends, and return the run's attempts.

    Args:
        setup: The prover, servers, mode, workers and run.
        shell: The run's driver (planned).
        pending: The tasks it planned.

    Returns:
        The run's attempts at the planned theorems.

    Raises:
        LeanloopError: Fewer than one worker, or several workers given a pool.
    """
    if setup.workers < 1:
        raise LeanloopError(f"num_workers={setup.workers}: use at least one worker")
    if setup.on_ray and isinstance(setup.servers, ServerPool):
        raise LeanloopError(
            "proving on several workers needs a maker of Lean servers, not a pool",
            hint="give a picklable maker such as leanloop.lean.launch.ReplLauncher",
        )
    if pending and not setup.on_ray:
        _in_process(setup, shell, pending)
    elif pending:
        _on_ray(setup, shell, pending)
    return shell.finish()


def _in_process(setup: SearchSetup, shell: Shell, pending: list[Task]) -> None:
    worker = ProofWorker(setup.prover, setup.servers, setup.project_root, setup.mode, setup.sources)
    try:
        for task in pending:
            if shell.stop_at_first and shell.is_solved(task.theorem):
                shell.skip(1)  # an earlier attempt of this call found a proof
                continue
            shell.record(worker.prove(task.theorem, task.attempt, setup.run), worker.lease)
    finally:
        worker.close()


def _on_ray(setup: SearchSetup, shell: Shell, pending: list[Task]) -> None:
    from leanloop.prover.ray_executor import RayExecutor

    driver_pool: ServerPool[LeanServer] | None = None

    def driver_lease() -> AbstractContextManager[LeanServer]:
        nonlocal driver_pool
        if driver_pool is None:
            driver_pool = pool_of(setup.servers, setup.prover.config.server_uses)[0]
        return driver_pool.lease(None)

    database = shell.database
    # PostgreSQL: each worker stores its attempts; SQLite: the driver does (one machine);
    # the password too: a URL object prints it as '***'
    shared = database is not None and database.sqlite_path is None
    url = database.url.render_as_string(hide_password=False) if shared and database else None
    executor = RayExecutor(
        setup,
        lambda attempt, stored: shell.record(attempt, driver_lease, stored),
        shell.skip,
        shell.solved if shell.stop_at_first else None,
        url,
        database,
    )
    try:
        executor.run(pending)
    finally:
        if driver_pool is not None:  # made here: several workers refuse a pool
            driver_pool.close()


@dataclass
class JobInputs:
    """What a caller gives a job besides its config: the database, the theorems of a
    ``theorems`` or ``sorries`` job (read from the job's dataset or benchmark otherwise), the
    callbacks, and components built already (a prover, servers, a sampler or a verifier,
    otherwise assembled from the job's specs)."""

    database: DynamicDatabase | None = None
    theorems: list[Theorem] | None = None
    callbacks: Callbacks = field(default_factory=Callbacks)
    prover: BaseProver | None = None
    servers: Servers | None = None
    project_root: Path | None = None
    sources: Mapping[tuple[TheoremKey, str], TheoremSource] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def job_theorems(job: ProofJob, inputs: JobInputs) -> list[Theorem]:
    """The theorems a search or whole-proof job proves: the caller's, or its dataset split's,
    or its benchmark's statements (stored as a repository of ``inputs.database``, their
    sources kept in ``inputs.sources``)."""
    import leanloop.prover.assemble as assemble
    from leanloop.prover.job import BenchmarkTargets, DatasetTargets

    targets = job.targets
    if inputs.theorems is not None:
        return inputs.theorems[: targets.limit]
    if isinstance(targets, DatasetTargets):
        return assemble.dataset_theorems(targets, replay=job.lean_kind == "replay").theorems
    if isinstance(targets, BenchmarkTargets):
        bench = assemble.benchmark_file(targets.spec)
        if inputs.database is not None:  # its statements are theorems of the database
            inputs.database.add_repository(bench.repository(), bench.iter_theorems())
        problems = bench.problems(targets.split)[: targets.limit]
        theorems = [bench.theorem(p) for p in problems]
        sources = {
            (t.key, t.commit): p.theorem_source() for t, p in zip(theorems, problems, strict=True)
        }
        inputs.sources = {**sources, **(inputs.sources or {})}
        return theorems
    raise LeanloopError(f"a {targets.kind} job is given its theorems by its caller")


def run_job(job: ProofJob, inputs: JobInputs | None = None) -> ProofRun | BenchmarkRun:
    """Run a proving job: its components assembled from its specs (unless given), its run
    named by ``job.run_name``, planned from what the database holds of that run.

    Args:
        job: The job.
        inputs: The database, the theorems, callbacks and components built already.

    Returns:
        A ``ProofRun`` (search, whole proofs) or a ``BenchmarkRun`` (sampling).
    """
    import leanloop.prover.assemble as assemble
    from leanloop.prover.job import SAMPLING

    inputs = inputs or JobInputs()
    if job.mode == SAMPLING:
        from leanloop.prover.sampling import run_sampling_job

        return run_sampling_job(job, inputs)
    theorems = job_theorems(job, inputs)
    prover = inputs.prover or assemble.prover(job)
    servers = inputs.servers if inputs.servers is not None else assemble.servers(job)
    run = job.run_name(assemble.identity(prover))
    shell = Shell(run, inputs.database, inputs.callbacks, stop_at_first=job.stop_at_first)
    pending = shell.plan(theorems, job.count)
    root = inputs.project_root or (job.project if job.lean_kind != "replay" else None)
    setup = SearchSetup(
        prover=prover,
        servers=servers,
        run=run,
        mode=job.proof_mode,
        project_root=Path(root).expanduser() if root is not None else None,
        sources=inputs.sources,
        workers=job.workers or prover.config.num_workers,
        address=job.address,
    )
    return prove(setup, shell, pending)
