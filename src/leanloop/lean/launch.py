"""``ReplLauncher``: the one way leanloop starts Lean REPL processes in a project (tracing, proving,
sorry filling, rewards and ``/verify`` all use it), checked for the toolchain and the sandbox
once and picklable, so that a Ray worker starts its REPLs where it runs."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field, replace
from pathlib import Path

from leanloop.lean.project import LeanProject, open_project
from leanloop.lean.repl import ReplServer
from leanloop.lean.sandbox import SandboxConfig, prepare_sandbox


@dataclass(frozen=True)
class ReplLauncher:
    """Starts the Lean REPL of ``root``, in the sandbox (``leanloop.lean.sandbox``) unless it
    was turned off: ``launcher()`` (or ``launcher(key)``, as a ``ServerPool`` factory calls it)
    gives a new ``ReplServer``; its process starts on the first request. ``timeout`` bounds
    each request, ``memory_limit_mb`` the process."""

    root: Path
    repl: Path
    lake: str = "lake"
    timeout: float = 60.0
    start_timeout: float = 300.0
    memory_limit_mb: float | None = None
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)

    @classmethod
    def for_project(
        cls,
        project: LeanProject | str | Path,
        *,
        timeout: float = 60.0,
        memory_limit_mb: float | None = None,
        executable: str | Path | None = None,
        sandbox: SandboxConfig | None = None,
    ) -> ReplLauncher:
        """A launcher for ``project`` (a ``LeanProject`` or its directory), after checking that
        Lean and the REPL are installed (``ToolchainNotFound`` / ``ServerNotFound`` say what is
        missing and how to get it) and that the sandbox can be set up (``SandboxUnavailable``
        says what is missing), unless it was turned off. The sandbox's switches are read from
        the settings here, so that workers elsewhere start REPLs as this process decided."""
        from leanloop.lean.toolchain import require

        if not isinstance(project, LeanProject):
            project = open_project(project)
        report = require(project, server="repl", executable=executable)
        assert report.repl is not None  # require() raises otherwise
        prepare_sandbox(sandbox, root=project.root, lake=report.lake, name="Lean REPL")
        return cls(
            root=project.root,
            repl=Path(report.repl),
            lake=str(report.lake or "lake"),
            timeout=timeout,
            memory_limit_mb=memory_limit_mb,
            sandbox=(sandbox or SandboxConfig()).resolved(),
        )

    def with_root(self, root: str | Path) -> ReplLauncher:
        """The same launcher for another checkout of the project (e.g. a git worktree)."""
        return replace(self, root=Path(root))

    def __call__(self, _key: Hashable = None) -> ReplServer:
        return ReplServer.launch(
            self.root,
            self.repl,
            lake=self.lake,
            timeout=self.timeout,
            start_timeout=self.start_timeout,
            memory_limit_mb=self.memory_limit_mb,
            sandbox=self.sandbox,
        )
