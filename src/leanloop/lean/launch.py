"""``ReplLauncher``: the one way leanloop starts Lean REPL processes in a project (tracing, proving,
sorry filling, rewards and ``/verify`` all use it), checked for the toolchain once and picklable,
so that a Ray worker starts its REPLs where it runs."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from pathlib import Path

from leanloop.lean.project import LeanProject, open_project
from leanloop.lean.repl import ReplServer


@dataclass(frozen=True)
class ReplLauncher:
    """Starts ``lake env <repl>`` in ``root``: ``launcher()`` (or ``launcher(key)``, as a
    ``ServerPool`` factory calls it) gives a new ``ReplServer``; its process starts on the first
    request. ``timeout`` bounds each request, ``memory_limit_mb`` the process."""

    root: Path
    repl: Path
    lake: str = "lake"
    timeout: float = 60.0
    start_timeout: float = 300.0
    memory_limit_mb: float | None = None

    @classmethod
    def for_project(
        cls,
        project: LeanProject | str | Path,
        *,
        timeout: float = 60.0,
        memory_limit_mb: float | None = None,
        executable: str | Path | None = None,
    ) -> ReplLauncher:
        """A launcher for ``project`` (a ``LeanProject`` or its directory), after checking that
        Lean and the REPL are installed (``ToolchainNotFound`` / ``ServerNotFound`` say what is
        missing and how to get it)."""
        from leanloop.lean.toolchain import require

        if not isinstance(project, LeanProject):
            project = open_project(project)
        report = require(project, server="repl", executable=executable)
        assert report.repl is not None  # require() raises otherwise
        return cls(
            root=project.root,
            repl=Path(report.repl),
            lake=str(report.lake or "lake"),
            timeout=timeout,
            memory_limit_mb=memory_limit_mb,
        )

    def with_root(self, root: str | Path) -> ReplLauncher:
        """The same launcher for another checkout of the project (e.g. a git worktree)."""
        return ReplLauncher(
            Path(root), self.repl, self.lake, self.timeout, self.start_timeout, self.memory_limit_mb
        )

    def __call__(self, _key: Hashable = None) -> ReplServer:
        return ReplServer.launch(
            self.root,
            self.repl,
            lake=self.lake,
            timeout=self.timeout,
            start_timeout=self.start_timeout,
            memory_limit_mb=self.memory_limit_mb,
        )
