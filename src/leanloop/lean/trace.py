"""Trace a Lean project: elaborate each file through the Lean REPL with ``allTactics`` (in
parallel, on a pool of servers), keep Lean's tactic steps and messages next to the scan of the
source, and cache the result by project, commit, toolchain and file content."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from leanloop.atomic import write_text_atomic
from leanloop.lean.elaboration import SorrySite, TacticStep
from leanloop.lean.errors import LeanError
from leanloop.lean.pool import ServerPool
from leanloop.lean.project import LeanProject
from leanloop.lean.repl import ReplServer
from leanloop.lean.scanner import SourceScan, scan
from leanloop.lean.server import LeanMessage

#: Changes whenever what is cached for a file changes.
TRACE_FORMAT = 1

ServerFactory = Callable[[Hashable], ReplServer]
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class FileTrace:
    """One file as Lean elaborated it: its source, Lean's messages and tactic steps."""

    path: str  # relative to the project root
    source: str = field(repr=False)
    messages: tuple[LeanMessage, ...]
    tactics: tuple[TacticStep, ...]
    sorries: tuple[SorrySite, ...]

    @cached_property
    def scan(self) -> SourceScan:
        return scan(self.source)

    @property
    def errors(self) -> list[LeanMessage]:
        return [m for m in self.messages if m.severity == "error"]

    def to_json(self) -> dict:
        return {
            "format": TRACE_FORMAT,
            "path": self.path,
            "messages": [dataclasses.asdict(m) for m in self.messages],
            "tactics": [dataclasses.asdict(t) for t in self.tactics],
            "sorries": [[s.proof_state, s.goal, s.line, s.column] for s in self.sorries],
        }

    @classmethod
    def from_json(cls, data: dict, source: str) -> FileTrace:
        return cls(
            path=data["path"],
            source=source,
            messages=tuple(LeanMessage(**m) for m in data["messages"]),
            tactics=tuple(
                TacticStep(**{**t, "used_constants": tuple(t["used_constants"])})
                for t in data["tactics"]
            ),
            sorries=tuple(
                SorrySite(proof_state=state, goal=goal, line=line, column=column)
                for state, goal, line, column in data["sorries"]
            ),
        )


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

    ``server_factory(key)`` makes a ``ReplServer`` for the project (by default one started with
    ``lake env repl`` after checking the toolchain); servers come from a pool, so up to
    ``workers`` files are elaborated at once and each process is reused for several files.
    A file that fails (timeout, crash, refused) is reported in ``failures``; the others go on.
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
    ) -> None:
        self.project = project
        self.workers = max(1, workers)
        self.cache_dir = cache_dir
        self.timeout = timeout
        self.memory_limit_mb = memory_limit_mb
        self.max_uses = max_uses
        self.server_factory = server_factory or self._default_factory()

    def _default_factory(self) -> ServerFactory:
        from leanloop.lean.toolchain import require

        report = require(self.project, server="repl")

        def factory(_key: Hashable) -> ReplServer:
            return ReplServer.launch(
                self.project.root,
                report.repl,
                lake=report.lake or "lake",
                timeout=self.timeout,
                memory_limit_mb=self.memory_limit_mb,
            )

        return factory

    # -- cache -------------------------------------------------------------------------------

    def _cache_path(self, path: str, source: str) -> Path | None:
        if self.cache_dir is None:
            return None
        digest = hashlib.sha256(
            "\0".join(
                [
                    str(TRACE_FORMAT),
                    self.project.identity,
                    self.project.commit or "",
                    self.project.toolchain or "",
                    path,
                    hashlib.sha256(source.encode("utf-8")).hexdigest(),
                ]
            ).encode()
        ).hexdigest()
        return self.cache_dir / "traces" / digest[:2] / f"{digest}.json"

    def _load(self, path: str, source: str) -> FileTrace | None:
        cache = self._cache_path(path, source)
        if cache is None or not cache.is_file():
            return None
        try:
            data = json.loads(cache.read_text(encoding="utf-8"))
            if data.get("format") != TRACE_FORMAT:
                return None
            return FileTrace.from_json(data, source)
        except (json.JSONDecodeError, KeyError, TypeError):
            return None  # a damaged cache entry is traced again

    def _store(self, trace: FileTrace) -> None:
        cache = self._cache_path(trace.path, trace.source)
        if cache is not None:
            write_text_atomic(cache, json.dumps(trace.to_json(), ensure_ascii=False))

    # -- tracing -----------------------------------------------------------------------------

    def trace_file(self, server: ReplServer, path: str, source: str) -> FileTrace:
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
            cached = self._load(path, source)
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

                with ThreadPoolExecutor(max_workers=self.workers) as executor:
                    futures = {executor.submit(work, item): item[0] for item in pending}
                    for future in as_completed(futures):
                        path = futures[future]
                        try:
                            trace = future.result()
                        except LeanError as exc:
                            result.failures[path] = exc.message
                        else:
                            self._store(trace)
                            result.files.append(trace)
                        done += 1
                        if progress is not None:
                            progress(done, len(paths))
        result.files.sort(key=lambda f: f.path)
        if dependencies:
            result.dependencies = scan_dependencies(self.project)
        return result


def scan_dependencies(project: LeanProject) -> dict[str, SourceScan]:
    """Scans of the ``.lean`` files of the project's packages and of its toolchain's sources,
    keyed by path (relative to the project root, or under the toolchain's ``src/lean``)."""
    from leanloop.lean.toolchain import toolchain_sources

    roots: list[tuple[Path, Path]] = [(root, project.root) for _, root in project.package_roots()]
    if project.toolchain:
        sources = toolchain_sources(project.toolchain)
        if sources is not None:
            roots.append((sources, sources.parent.parent))
    scans: dict[str, SourceScan] = {}
    for root, base in roots:
        for file in sorted(root.rglob("*.lean")):
            if ".lake" in file.relative_to(root).parts:
                continue
            try:
                text = file.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            scans[str(file.relative_to(base))] = scan(text)
    return scans
