"""Build a Lean project with ``lake build`` and report a failure in one line with its cause."""

from __future__ import annotations

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
