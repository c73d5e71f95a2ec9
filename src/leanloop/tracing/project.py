"""Trace a Lean project into records in one call: check the toolchain, build the project with
``lake build``, trace every file (reusing cached traces) and turn the trace into records."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from leanloop.errors import LeanloopError
from leanloop.lean.project import LeanProject
from leanloop.tracing.records import TracedProject, records_from_trace
from leanloop.tracing.tracer import Progress, ServerFactory, Tracer


class TraceOptions(BaseModel):
    """How ``trace_project`` traces: each one a keyword of it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    build: bool = Field(default=True, description="Build the project with 'lake build' first.")
    dependencies: bool = Field(
        default=False, description="Also scan the dependencies' sources for premises."
    )
    workers: int = Field(default=1, ge=1, description="Files elaborated at once.")
    cache_dir: Path | None = Field(
        default=None, description="Where traces are cached (default: leanloop's cache)."
    )
    timeout: float = Field(default=1800.0, gt=0, description="Seconds per file.")
    memory_limit_mb: float | None = Field(
        default=None, gt=0, description="Memory per Lean process; one that uses more is stopped."
    )
    lean: str = Field(
        default="repl",
        description="The Lean backend (it must report every tactic: the Lean REPL does, "
        "Pantograph does not and is refused).",
    )


def trace_project(
    project: LeanProject,
    *,
    server_factory: ServerFactory | None = None,
    progress: Progress | None = None,
    **options: Any,
) -> TracedProject:
    """The records of ``project``, with the files that failed, the cached ones and the skipped.

    Without ``server_factory`` the toolchain and the backend are checked first (a clear error
    says what is missing, or that the backend reports no tactics) and the project is built with
    ``lake build`` unless ``build`` is False. ``dependencies`` also scans the dependencies'
    sources, so that premises defined there are known. Traces are cached under ``cache_dir``
    (default: leanloop's cache directory); ``timeout`` and ``memory_limit_mb`` apply to each
    file's elaboration; ``progress(done, total)`` is called as files are traced.

    Args:
        project: The project.
        server_factory: Makes the Lean servers (default: the backend ``lean`` of the options).
        progress: Called with ``(done, total)`` as files are traced.
        **options (Any): ``TraceOptions``: ``build``, ``dependencies``, ``workers``,
            ``cache_dir``, ``timeout``, ``memory_limit_mb``, ``lean``.

    Returns:
        TracedProject: The records and what happened to each file.

    Raises:
        LeanloopError: An option is unknown or has a wrong value, or Lean is missing.
    """
    try:
        chosen = TraceOptions(**options)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        raise LeanloopError(f"trace_project: option {where!r}: {error['msg']}") from None
    cache_dir = chosen.cache_dir
    if cache_dir is None:
        from leanloop.settings import Settings

        cache_dir = Settings.from_env().cache_dir
    if server_factory is None:
        from leanloop.lean.backends import LeanOptions, open_servers
        from leanloop.lean.build import build as lake_build

        limits = LeanOptions(timeout=chosen.timeout, memory_limit_mb=chosen.memory_limit_mb)
        server_factory = open_servers(chosen.lean, project, limits, needs=("tactics",))
        if chosen.build:
            lake_build(project, server_factory.lake)
    tracer = Tracer(
        project,
        server_factory=server_factory,
        workers=chosen.workers,
        cache_dir=cache_dir,
        timeout=chosen.timeout,
        memory_limit_mb=chosen.memory_limit_mb,
        lean=chosen.lean,
    )
    return records_from_trace(tracer.trace(dependencies=chosen.dependencies, progress=progress))
