"""The proving engine's library entry points of earlier releases, kept as thin wrappers over
``leanloop.prover.engine`` for one release: ``run_proofs`` (a prover over many theorems,
in-process or on Ray, each attempt stored as it ends, what the run finished skipped, each proof
handed to an optional hook in the driver) and ``evaluate`` (its report). New code builds a
``ProofJob`` and calls ``leanloop.prover.engine.run_job``."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, Unpack

from leanloop.data.records import ProofAttempt, Theorem, TheoremKey
from leanloop.lean.server import TheoremSource
from leanloop.prover.assemble import identity
from leanloop.prover.base import BaseProver
from leanloop.prover.config import ProofMode
from leanloop.prover.engine import Callbacks, ProofRun, SearchSetup, Shell, Task, prove
from leanloop.prover.ray_executor import (
    LOOPBACK,
    LOST_RETRIES,
    WORKER_START_TIMEOUT,
    RayExecutor,
    loopback_ray,
)
from leanloop.prover.report import EvaluationReport
from leanloop.prover.worker import Environment, Lease, ProofHook, ProofWorker, Servers, where

if TYPE_CHECKING:
    from leanloop.database import DynamicDatabase
    from leanloop.prover.job import ProofJob

__all__ = [
    "LOOPBACK",
    "LOST_RETRIES",
    "WORKER_START_TIMEOUT",
    "Environment",
    "Lease",
    "ProofHook",
    "ProofRun",
    "ProofWorker",
    "RayExecutor",
    "RunOptions",
    "Servers",
    "Task",
    "evaluate",
    "loopback_ray",
    "run_proofs",
    "where",
]


class RunOptions(TypedDict, total=False):
    """The options of ``run_proofs`` (each as its Args say)."""

    mode: ProofMode | str
    project_root: str | Path | None
    database: DynamicDatabase | None
    run: str
    attempts: int | None
    stop_at_first: bool
    num_workers: int | None
    address: str | None
    hook: ProofHook | None
    progress: Callable[[int, int], None] | None
    on_result: Callable[[ProofAttempt], None] | None
    sources: Mapping[tuple[TheoremKey, str], TheoremSource] | None
    job: ProofJob | None


def run_proofs(
    theorems: Iterable[Theorem],
    prover: BaseProver,
    servers: Servers,
    **options: Unpack[RunOptions],
) -> ProofRun:
    """Make ``attempts`` (``prover.config.num_attempts``) attempts at every theorem and return
    the run's attempts (the engine's search executor under its shell).

    With one worker and no ``address`` the attempts run here, one after the other, on servers
    from ``servers`` (a ``ServerPool``, or a maker of servers pooled here); otherwise on
    ``num_workers`` (``prover.config.num_workers``) Ray actors, on a local Ray started here or
    the cluster at ``address``, each making its servers with ``servers`` (then a picklable
    maker, such as a ``leanloop.lean.backends.Launcher``) where it runs.

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
        servers: A ``ServerPool``, or a maker of Lean servers (picklable for Ray workers).
        **options: ``mode`` (``search`` or ``whole``), ``project_root`` (the Lean project the
            theorems' files are read from), ``database`` (None: nowhere, and nothing is
            skipped), ``run`` (default: the rule of ``job``, a ``ProofJob`` these theorems
            are of, so that the run is the one its other starts make; else ``evaluation``),
            ``attempts``, ``stop_at_first``, ``num_workers``, ``address`` (a Ray cluster),
            ``hook``, ``progress``, ``on_result`` and ``sources`` (see ``RunOptions``).

    Returns:
        The run's attempts at these theorems, those made now and those skipped.

    Raises:
        LeanloopError: ``num_workers`` or ``attempts`` is below 1, or several workers are
            given a pool instead of a maker of servers.
    """
    job = options.get("job")
    run = options.get("run") or (
        job.run_name(identity(prover)) if job is not None else "evaluation"
    )
    callbacks = Callbacks(options.get("hook"), options.get("progress"), options.get("on_result"))
    stop_at_first = options.get("stop_at_first", False)
    shell = Shell(run, options.get("database"), callbacks, stop_at_first=stop_at_first)
    count = options.get("attempts")
    pending = shell.plan(theorems, count if count is not None else prover.config.num_attempts)
    root = options.get("project_root")
    setup = SearchSetup(
        prover=prover,
        servers=servers,
        run=run,
        mode=ProofMode(options.get("mode", ProofMode.SEARCH)),
        project_root=Path(root) if root is not None else None,
        sources=options.get("sources"),
        workers=options.get("num_workers") or prover.config.num_workers,
        address=options.get("address"),
    )
    return prove(setup, shell, pending)


def evaluate(
    theorems: Iterable[Theorem],
    prover: BaseProver,
    server_factory: Servers,
    **options: Unpack[RunOptions],
) -> EvaluationReport:
    """Attempt every theorem ``prover.config.num_attempts`` times and report pass@1 and pass@k
    (see [run_proofs][leanloop.prover.run.run_proofs], which this is a view of).

    Args:
        theorems: The theorems.
        prover: The prover.
        server_factory: A ``ServerPool``, or a maker of Lean servers.
        **options: As ``run_proofs``'s.

    Returns:
        The report of the run's attempts at these theorems.
    """
    return run_proofs(theorems, prover, server_factory, **options).report()
