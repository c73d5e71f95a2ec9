"""Trace a Lean project into the database: check the toolchain, build, trace every file, turn
the trace into records and add them (tracing the same commit again changes nothing)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from leanloop.data.records import Repository
from leanloop.data.traced import records_from_trace
from leanloop.database.ingest import IngestCounts
from leanloop.lean.project import LeanProject
from leanloop.lean.trace import ServerFactory, Tracer


@dataclass
class TraceReport:
    """What tracing a project did."""

    repository: Repository
    counts: IngestCounts
    files: int
    cached_files: int
    failures: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)


def trace_project(
    database,
    project: LeanProject,
    *,
    server_factory: ServerFactory | None = None,
    build: bool = True,
    dependencies: bool = False,
    workers: int = 1,
    cache_dir: Path | None = None,
    timeout: float = 1800.0,
    memory_limit_mb: float | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> TraceReport:
    """Trace ``project`` and add what it holds to ``database`` (a ``DynamicDatabase``).

    Without ``server_factory`` the toolchain is checked first (a clear error says what is
    missing) and the project is built with ``lake build`` unless ``build`` is False.
    """
    if cache_dir is None:
        from leanloop.settings import Settings

        cache_dir = Settings.from_env().cache_dir
    if server_factory is None:
        from leanloop.lean.build import build as lake_build
        from leanloop.lean.toolchain import require

        report = require(project, server="repl")
        if build:
            lake_build(project, report.lake or "lake")
    tracer = Tracer(
        project,
        server_factory=server_factory,
        workers=workers,
        cache_dir=cache_dir,
        timeout=timeout,
        memory_limit_mb=memory_limit_mb,
    )
    trace = tracer.trace(dependencies=dependencies, progress=progress)
    records = records_from_trace(trace)
    counts = database.add_repository(
        records.repository,
        records.theorems,
        records.source_files,
        records.traced_files,
        source=f"trace:{project.identity}",
    )
    return TraceReport(
        repository=records.repository,
        counts=counts,
        files=len(trace.files),
        cached_files=trace.cached,
        failures=dict(trace.failures),
        skipped=records.skipped,
    )
