"""Commit files on a git branch other than the current one without touching the working tree,
the index or the current branch (git's plumbing with an index of its own)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

from leanloop.errors import LeanloopError

_IDENTITY = {
    "GIT_AUTHOR_NAME": "leanloop",
    "GIT_AUTHOR_EMAIL": "leanloop@localhost",
    "GIT_COMMITTER_NAME": "leanloop",
    "GIT_COMMITTER_EMAIL": "leanloop@localhost",
}


class BranchCommitter:
    """Commits onto ``branch`` of the git repository holding ``path``: the branch starts at the
    current commit (``HEAD``) if it does not exist, and each commit goes on top of it."""

    def __init__(self, path: str | Path, branch: str) -> None:
        if shutil.which("git") is None:
            raise LeanloopError("git is not installed", hint="install git to commit on a branch")
        self.root = Path(self._git(Path(path), "rev-parse", "--show-toplevel").strip())
        self.branch = branch
        check = subprocess.run(
            ["git", "check-ref-format", "--branch", branch], capture_output=True, text=True
        )
        if check.returncode != 0:
            raise LeanloopError(f"--branch {branch!r} is not a valid branch name")
        current = subprocess.run(
            ["git", "symbolic-ref", "--quiet", "--short", "HEAD"],
            cwd=self.root,
            capture_output=True,
            text=True,
        ).stdout.strip()
        if current == branch:
            raise LeanloopError(
                f"--branch {branch} is the branch checked out in {self.root}",
                hint="name a new branch: proofs are never committed on your current branch",
            )

    def _git(self, cwd: Path, *args: str, env: Mapping[str, str] | None = None, stdin=None):
        result = subprocess.run(
            ["git", *args],
            cwd=cwd,
            env=None if env is None else {**os.environ, **env},
            input=stdin,
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            reason = (result.stderr or result.stdout).strip().splitlines()
            raise LeanloopError(
                f"git {args[0]} failed in {cwd}: {reason[-1] if reason else result.returncode}"
            )
        return result.stdout

    def _tip(self) -> str:
        ref = f"refs/heads/{self.branch}"
        found = subprocess.run(
            ["git", "rev-parse", "--verify", "--quiet", ref],
            cwd=self.root,
            capture_output=True,
            text=True,
        )
        if found.returncode == 0:
            return found.stdout.strip()
        return self._git(self.root, "rev-parse", "--verify", "HEAD").strip()

    def commit(self, files: Mapping[Path, str], message: str) -> str:
        """Commit ``files`` (path -> full new text) on the branch; returns the commit id."""
        parent = self._tip()
        with tempfile.TemporaryDirectory(prefix="leanloop-index-") as tmp:
            env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
            self._git(self.root, "read-tree", parent, env=env)
            for path, text in files.items():
                relative = Path(path).resolve().relative_to(self.root).as_posix()
                blob = self._git(self.root, "hash-object", "-w", "--stdin", stdin=text).strip()
                self._git(
                    self.root,
                    "update-index",
                    "--add",
                    "--cacheinfo",
                    f"100644,{blob},{relative}",
                    env=env,
                )
            tree = self._git(self.root, "write-tree", env=env).strip()
        identity = {} if self._has_identity() else _IDENTITY
        commit = self._git(
            self.root, "commit-tree", tree, "-p", parent, "-m", message, env=identity
        ).strip()
        self._git(self.root, "update-ref", f"refs/heads/{self.branch}", commit)
        return commit

    def _has_identity(self) -> bool:
        names = [
            subprocess.run(
                ["git", "config", key], cwd=self.root, capture_output=True, text=True
            ).stdout.strip()
            for key in ("user.name", "user.email")
        ]
        return all(names)
