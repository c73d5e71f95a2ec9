"""The tracer: elaborates each file of a project through a Lean backend that reports every tactic
(the Lean REPL with ``allTactics``), in parallel on a pool of servers, reusing cached traces; a
file that fails is reported, not fatal."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from leanloop.lean.errors import LeanError
from leanloop.lean.pool import ServerPool
from leanloop.lean.project import LeanProject
from leanloop.lean.scanner import SourceScan
from leanloop.lean.server import LeanServer
from leanloop.tracing.cache import TraceCache
from leanloop.tracing.dependencies import scan_dependencies
from leanloop.tracing.file_trace import FileTrace

ServerFactory = Callable[[Hashable], LeanServer]
Progress = Callable[[int, int], None]


@dataclass
class ProjectTrace:
    """Every traced file of a project, the files that failed (with why), and the scans of the
    dependencies' sources (for the premises defined there)."""

    project: LeanProject
    files: list[FileTrace]
    failures: dict[str, str] = field(default_factory=dict)
    dependencies: dict[str, SourceScan] = field(default_factory=dict)
    cached: int = 0


class Tracer:
    """Traces the files of a project.

    ``server_factory(key)`` makes a ``LeanServer`` that reports every tactic for the project
    (by default one of backend ``lean``, started after checking the toolchain: the REPL; a
    backend that reports no tactics, such as Pantograph, is refused with ``Unsupported``);
    servers come from a pool, so up to ``workers`` files are elaborated at once and each
    process is reused for several files.
    A file that fails (timeout, crash, refused) is reported in ``failures``; the others go on.
    With a ``cache_dir``, traces are cached there by project, commit, toolchain and content.
    """

    def __init__(
        self,
        project: LeanProject,
        *,
        server_factory: ServerFactory | None = None,
        workers: int = 1,
        cache_dir: Path | None = None,
        timeout: float = 1800.0,
        memory_limit_mb: float | None = None,
        max_uses: int = 20,
        lean: str = "repl",
    ) -> None:
        self.project = project
        self.lean = lean
        self.workers = max(1, workers)
        self.cache = TraceCache(cache_dir, project) if cache_dir is not None else None
        self.timeout = timeout
        self.memory_limit_mb = memory_limit_mb
        self.max_uses = max_uses
        self.server_factory = server_factory or self._default_factory()

    def _default_factory(self) -> ServerFactory:
        from leanloop.lean.backends import LeanOptions, open_servers

        options = LeanOptions(timeout=self.timeout, memory_limit_mb=self.memory_limit_mb)
        return open_servers(self.lean, self.project, options, needs=("tactics",))

    def trace_file(self, server: LeanServer, path: str, source: str) -> FileTrace:
        """Elaborate one file's source with ``allTactics``."""
        result = server.elaborate(source, all_tactics=True)
        return FileTrace(path, source, result.messages, result.tactics, result.sorries)

    def trace(
        self,
        files: Sequence[str] | None = None,
        *,
        dependencies: bool = False,
        progress: Progress | None = None,
    ) -> ProjectTrace:
        """Trace ``files`` (default: all of the project's own files)."""
        paths = list(files) if files is not None else self.project.lean_files()
        result = ProjectTrace(self.project, [])
        pending: list[tuple[str, str]] = []
        for path in paths:
            source = (self.project.root / path).read_text(encoding="utf-8")
            cached = self.cache.load(path, source) if self.cache is not None else None
            if cached is not None:
                result.files.append(cached)
                result.cached += 1
            else:
                pending.append((path, source))
        done = len(result.files)
        if progress is not None:
            progress(done, len(paths))
        if pending:
            key = (str(self.project.root), self.project.toolchain)
            with ServerPool(
                self.server_factory, max_uses=self.max_uses, max_servers=self.workers
            ) as pool:

                def work(item: tuple[str, str]) -> FileTrace:
                    with pool.lease(key) as server:
                        return self.trace_file(server, *item)

                executor = ThreadPoolExecutor(max_workers=self.workers)
                try:
                    futures = {executor.submit(work, item): item[0] for item in pending}
                    for future in as_completed(futures):
                        path = futures[future]
                        try:
                            trace = future.result()
                        except LeanError as exc:
                            result.failures[path] = exc.message
                        else:
                            if self.cache is not None:
                                self.cache.store(trace)
                            result.files.append(trace)
                        done += 1
                        if progress is not None:
                            progress(done, len(paths))
                except BaseException:
                    # stopped (Ctrl-C, an error): the files not started yet are dropped
                    # instead of traced; the traces finished so far are in the cache
                    executor.shutdown(wait=False, cancel_futures=True)
                    raise
                executor.shutdown()
        result.files.sort(key=lambda f: f.path)
        if dependencies:
            result.dependencies = scan_dependencies(self.project)
        return result
