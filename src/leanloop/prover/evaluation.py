"""Evaluation of a prover on many theorems, in parallel with Ray actors (each owning its Lean
servers and prover) on one machine or a cluster, each result stored in the database as its
theorem finishes, so that a crash loses at most the theorems in progress and a rerun of the same
run skips what is finished."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Literal

from leanloop.data.records import AttemptStatus, ProofAttempt, Theorem
from leanloop.errors import LeanloopError
from leanloop.lean.pool import ServerPool
from leanloop.lean.server import LeanServer
from leanloop.prover.base import BaseProver
from leanloop.prover.proof_search import describe_exception
from leanloop.prover.report import EvaluationReport
from leanloop.prover.result import SearchResult

if TYPE_CHECKING:
    from leanloop.database import DynamicDatabase

log = logging.getLogger(__name__)

Mode = Literal["search", "whole"]


class ProofWorker:
    """Proves theorems one at a time with its own prover and Lean server (a Ray actor, or run
    in-process); the server is made by ``server_factory()`` where the worker runs, reused for
    ``config.server_uses`` theorems and replaced when it fails."""

    def __init__(self, prover: BaseProver, server_factory: Callable[[], LeanServer]) -> None:
        self.prover = prover
        self.pool = ServerPool.single(server_factory, max_uses=prover.config.server_uses)

    def prove(
        self, theorem: Theorem, attempt: int, run: str, mode: Mode = "search"
    ) -> ProofAttempt:
        """One attempt at ``theorem``; any failure becomes an ``error`` attempt."""
        try:
            with self.pool.lease(None) as server:
                if mode == "whole":
                    result = self.prover.prove_whole(server, theorem=theorem, attempt=attempt)
                else:
                    result = self.prover.search(server, theorem=theorem, attempt=attempt)
        except Exception as exc:  # this theorem fails, the worker goes on
            result = SearchResult(
                target=theorem.full_name,
                status=AttemptStatus.ERROR,
                error=describe_exception(exc),
            )
        return result.to_attempt(theorem, run=run, attempt=attempt, prover=self.prover.name)

    def close(self) -> None:
        self.pool.close()


def evaluate(
    theorems: Iterable[Theorem],
    prover: BaseProver,
    server_factory: Callable[[], LeanServer],
    *,
    num_workers: int | None = None,
    address: str | None = None,
    database: DynamicDatabase | None = None,
    run: str = "evaluation",
    mode: Mode = "search",
    progress: Callable[[int, int], None] | None = None,
    on_result: Callable[[ProofAttempt], None] | None = None,
) -> EvaluationReport:
    """Attempt every theorem ``prover.config.num_attempts`` times and report.

    With one worker and no ``address`` the attempts run here, one after the other; otherwise
    on ``num_workers`` (``prover.config.num_workers``) Ray actors, on a local Ray started here
    (``address=None``) or the cluster at ``address`` (``"ray://host:10001"``, ``"auto"``). The
    prover and ``server_factory`` (a picklable callable making a ``LeanServer``) are sent to each
    worker, which makes its server where it runs. Each attempt goes into ``database`` (under
    ``run``) as soon as it ends; attempts of ``run`` already finished there are skipped (those
    that ended in an error are tried again). ``progress(done, total)`` and ``on_result(attempt)``
    are called as attempts end.
    """
    if mode not in ("search", "whole"):
        raise LeanloopError(f"mode {mode!r}: expected 'search' or 'whole'")
    config = prover.config
    workers = num_workers or config.num_workers
    if workers < 1:
        raise LeanloopError(f"num_workers={workers}: use at least one worker")
    theorems = list(theorems)
    tasks = [(t, a) for t in theorems for a in range(config.num_attempts)]
    finished = database.finished_attempts(run) if database is not None else set()
    pending = [(t, a) for t, a in tasks if (t.key, t.commit, a) not in finished]
    if finished:
        log.info("%d attempts of run %r are already finished", len(tasks) - len(pending), run)
    new: list[ProofAttempt] = []
    total = len(tasks)

    def record(attempt: ProofAttempt) -> None:
        if database is not None:
            database.record_attempt(attempt)
        new.append(attempt)
        if on_result is not None:
            on_result(attempt)
        if progress is not None:
            progress(total - len(pending) + len(new), total)

    if progress is not None:
        progress(total - len(pending), total)
    if pending:
        if workers == 1 and address is None:
            worker = ProofWorker(prover, server_factory)
            try:
                for theorem, attempt in pending:
                    record(worker.prove(theorem, attempt, run, mode))
            finally:
                worker.close()
        else:
            _run_on_ray(pending, prover, server_factory, workers, address, run, mode, record)
    return EvaluationReport.from_attempts(run, _run_attempts(tasks, new, database, run))


def _run_attempts(tasks, new, database, run) -> list[ProofAttempt]:
    """The run's attempts at ``tasks``: stored ones (earlier runs included) and ``new`` ones."""
    wanted = {(t.key, t.commit, a) for t, a in tasks}
    stored = database.get_attempts(run) if database is not None else new
    latest = {(a.key, a.commit, a.attempt): a for a in [*stored, *new]}
    return [attempt for key, attempt in latest.items() if key in wanted]


def _run_on_ray(pending, prover, server_factory, workers, address, run, mode, record) -> None:
    try:
        import ray
    except ImportError:
        raise LeanloopError(
            "parallel evaluation needs Ray", hint="pip install 'leanloop[dist]'"
        ) from None
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(
            address=address,
            num_cpus=workers if address is None else None,
            include_dashboard=False,
            logging_level=logging.WARNING,
        )
    remote = ray.remote(num_cpus=1, num_gpus=prover.config.num_gpus)(ProofWorker)
    queue = deque(pending)
    running: dict = {}  # future -> (actor, task)
    actors = [remote.remote(prover, server_factory) for _ in range(min(workers, len(queue)))]

    def submit(actor) -> None:
        if queue:
            theorem, attempt = queue.popleft()
            future = actor.prove.remote(theorem, attempt, run, mode)
            running[future] = (actor, (theorem, attempt))

    try:
        for actor in actors:
            submit(actor)
        while running:
            (future,), _ = ray.wait(list(running), num_returns=1)
            actor, (theorem, attempt) = running.pop(future)
            try:
                record(ray.get(future))
            except ray.exceptions.RayError as exc:
                # the worker died (killed, out of memory, crashed): only its theorem is lost
                record(_lost(theorem, attempt, run, prover, exc))
                ray.kill(actor, no_restart=True)
                actors.remove(actor)
                actor = remote.remote(prover, server_factory)
                actors.append(actor)
            submit(actor)
    finally:
        for actor in actors:
            ray.kill(actor, no_restart=True)
        if started_here:
            ray.shutdown()


def _lost(theorem: Theorem, attempt: int, run: str, prover: BaseProver, exc) -> ProofAttempt:
    return SearchResult(
        target=theorem.full_name,
        status=AttemptStatus.ERROR,
        error=f"the worker proving it stopped: {describe_exception(exc)}",
    ).to_attempt(theorem, run=run, attempt=attempt, prover=prover.name)
