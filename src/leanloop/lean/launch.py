"""Deprecated: ``ReplLauncher`` is ``leanloop.lean.backends.Launcher`` of the ``repl`` backend,
made by ``open_servers("repl", project, options)``. Kept for one release; using it warns."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from leanloop.lean.backends import Launcher, LeanOptions, open_servers
from leanloop.lean.project import LeanProject
from leanloop.lean.sandbox import SandboxConfig

_SAID = (
    "leanloop.lean.launch.ReplLauncher is deprecated: use "
    "leanloop.lean.backends.open_servers('repl', project, LeanOptions(...))"
)


class _ReplLauncher:
    """Makes the ``repl`` backend's ``Launcher`` as ``ReplLauncher`` did (deprecated)."""

    def __call__(
        self,
        root: str | Path,
        repl: str | Path,
        lake: str = "lake",
        timeout: float = 60.0,
        start_timeout: float = 300.0,
        memory_limit_mb: float | None = None,
        sandbox: SandboxConfig | None = None,
    ) -> Launcher:
        warnings.warn(_SAID, DeprecationWarning, stacklevel=2)
        options = LeanOptions(
            timeout=timeout,
            start_timeout=start_timeout,
            memory_limit_mb=memory_limit_mb,
            sandbox=sandbox or SandboxConfig(),
        )
        return Launcher("repl", Path(root), Path(repl), str(lake), options)

    def for_project(
        self,
        project: LeanProject | str | Path,
        *,
        timeout: float = 60.0,
        memory_limit_mb: float | None = None,
        executable: str | Path | None = None,
        sandbox: SandboxConfig | None = None,
    ) -> Launcher:
        """``open_servers("repl", project, ...)`` (deprecated)."""
        warnings.warn(_SAID, DeprecationWarning, stacklevel=2)
        options = LeanOptions(
            timeout=timeout,
            memory_limit_mb=memory_limit_mb,
            executable=Path(executable) if executable is not None else None,
            sandbox=sandbox or SandboxConfig(),
        )
        return open_servers("repl", project, options)


#: Deprecated: ``open_servers("repl", ...)`` gives the launcher.
ReplLauncher: Any = _ReplLauncher()
