"""Build a Lean project with ``lake build`` and report a failure in one line with its cause; give
another checkout of a project the build it already has."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from leanloop.lean.errors import BuildFailed
from leanloop.lean.project import LeanProject


def build(project: LeanProject, lake: str | Path = "lake", *, timeout: float = 6 * 3600) -> None:
    """Run ``lake build`` in the project (the REPL needs the dependencies' compiled files)."""
    try:
        result = subprocess.run(
            [str(lake), "build"],
            cwd=project.root,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        raise BuildFailed(
            f"'lake build' in {project.root} did not finish within {timeout:g} s",
            hint="build the project once by hand ('lake exe cache get' helps for Mathlib)",
        ) from None
    except FileNotFoundError:
        raise BuildFailed(f"cannot run {lake}", hint="run 'leanloop doctor'") from None
    if result.returncode != 0:
        output = (result.stderr + "\n" + result.stdout).strip().splitlines()
        errors = [line for line in output if "error" in line.lower()]
        cause = (errors or output or ["no output"])[0].strip()
        raise BuildFailed(
            f"'lake build' failed in {project.root}: {cause[:300]}",
            hint="fix the project so that 'lake build' succeeds, then trace it again",
        )


def share_build(source: str | Path, target: str | Path) -> None:
    """Give ``target`` (another checkout of the project at ``source``, e.g. a git worktree) the
    build of ``source``: the dependencies' packages linked, the project's own build copied (a
    copy: Lean rewrites build files in place), so that ``lake build`` there rebuilds only the
    modules whose sources differ."""
    source, target = Path(source), Path(target)
    packages = source / ".lake" / "packages"
    build_dir = source / ".lake" / "build"
    (target / ".lake").mkdir(parents=True, exist_ok=True)
    if packages.is_dir() and not (target / ".lake" / "packages").exists():
        (target / ".lake" / "packages").symlink_to(packages.resolve(), target_is_directory=True)
    if build_dir.is_dir() and not (target / ".lake" / "build").exists():
        shutil.copytree(build_dir, target / ".lake" / "build", symlinks=True)
