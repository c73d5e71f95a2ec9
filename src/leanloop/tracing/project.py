"""Trace a Lean project into records in one call: check the toolchain, build the project with
``lake build``, trace every file (reusing cached traces) and turn the trace into records."""

from __future__ import annotations

from pathlib import Path

from leanloop.lean.project import LeanProject
from leanloop.tracing.records import TracedProject, records_from_trace
from leanloop.tracing.tracer import Progress, ServerFactory, Tracer


def trace_project(
    project: LeanProject,
    *,
    server_factory: ServerFactory | None = None,
    build: bool = True,
    dependencies: bool = False,
    workers: int = 1,
    cache_dir: Path | None = None,
    timeout: float = 1800.0,
    memory_limit_mb: float | None = None,
    progress: Progress | None = None,
) -> TracedProject:
    """The records of ``project``, with the files that failed, the cached ones and the skipped.

    Without ``server_factory`` the toolchain is checked first (a clear error says what is
    missing) and the project is built with ``lake build`` unless ``build`` is False.
    ``dependencies`` also scans the dependencies' sources, so that premises defined there are
    known. Traces are cached under ``cache_dir`` (default: leanloop's cache directory);
    ``timeout`` and ``memory_limit_mb`` apply to each file's elaboration; ``progress(done,
    total)`` is called as files are traced.
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
    return records_from_trace(tracer.trace(dependencies=dependencies, progress=progress))
