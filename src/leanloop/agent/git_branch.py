"""A git branch of its own for proofs, worked on in a clean worktree: the branch starts at HEAD,
each proof is checked by Lean and committed there, so the branch is exactly HEAD plus the checked
proofs (the user's uncommitted changes never reach it); the user's working tree, index and
current branch are not touched."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

from leanloop.atomic import owner_gone, owner_tag
from leanloop.errors import LeanloopError

#: The subject of each commit leanloop makes on a proof branch.
COMMIT_SUBJECT = "Prove {name} (checked by Lean, axioms audited)"
_COMMIT_SUBJECT = re.compile(r"Prove \S.* \(checked by Lean, axioms audited\)")
_PREFIX = "leanloop-worktree-"
_OWNER = "leanloop-owner"
_IDENTITY = {
    "GIT_AUTHOR_NAME": "leanloop",
    "GIT_AUTHOR_EMAIL": "leanloop@localhost",
    "GIT_COMMITTER_NAME": "leanloop",
    "GIT_COMMITTER_EMAIL": "leanloop@localhost",
}


def _git(cwd: Path, *args: str, env: Mapping[str, str] | None = None, check: bool = True):
    result = subprocess.run(
        ["git", *args],
        cwd=cwd,
        env=None if env is None else {**os.environ, **env},
        capture_output=True,
        text=True,
    )
    if check and result.returncode != 0:
        reason = (result.stderr or result.stdout).strip().splitlines()
        raise LeanloopError(
            f"git {args[0]} failed in {cwd}: {reason[-1] if reason else result.returncode}"
        )
    return result


class BranchWorkspace:
    """``branch`` of the git repository holding ``path``, checked out in a worktree of its own
    (made by ``open()``, removed by ``close()``). The branch is created at HEAD when it does not
    exist; it may never be the branch checked out in the user's working tree."""

    def __init__(self, path: str | Path, branch: str) -> None:
        if shutil.which("git") is None:
            raise LeanloopError("git is not installed", hint="install git to commit on a branch")
        found = _git(Path(path), "rev-parse", "--show-toplevel", check=False)
        if found.returncode != 0:
            raise LeanloopError(
                f"--branch {branch}: {path} is not in a git repository",
                hint="commit the project to git first, or leave --branch out",
            )
        self.repo = Path(found.stdout.strip())
        self.branch = branch
        if _git(self.repo, "check-ref-format", "--branch", branch, check=False).returncode != 0:
            raise LeanloopError(f"--branch {branch!r} is not a valid branch name")
        current = _git(self.repo, "symbolic-ref", "--quiet", "--short", "HEAD", check=False)
        if current.stdout.strip() == branch:
            raise LeanloopError(
                f"--branch {branch} is the branch checked out in {self.repo}",
                hint="name a new branch: proofs are never committed on your current branch",
            )
        head = _git(self.repo, "rev-parse", "--verify", "--quiet", "HEAD^{commit}", check=False)
        if head.returncode != 0:
            raise LeanloopError(
                f"--branch {branch}: the repository {self.repo} has no commit yet",
                hint="commit the project first: the branch starts at HEAD",
            )
        self.head = head.stdout.strip()
        ref = f"refs/heads/{branch}"
        tip = _git(self.repo, "rev-parse", "--verify", "--quiet", ref, check=False)
        if tip.returncode == 0:  # continued only when it is HEAD plus earlier proofs
            self._check_continues(tip.stdout.strip())
        self.worktree: Path | None = None
        self._parent: Path | None = None

    def _check_continues(self, tip: str) -> None:
        """Refuse an existing branch that is not HEAD plus commits of proofs leanloop made."""
        branch = self.branch
        hint = f"name a new branch, or delete this one ('git branch -D {branch}')"
        ancestor = _git(self.repo, "merge-base", "--is-ancestor", self.head, tip, check=False)
        if ancestor.returncode != 0:
            raise LeanloopError(
                f"--branch {branch} exists and does not start from HEAD ({self.head[:12]}), "
                "so it is not HEAD plus the proofs",
                hint=hint,
            )
        subjects = _git(self.repo, "log", "--format=%s", f"{self.head}..{tip}").stdout.split("\n")
        foreign = [s for s in subjects if s and not _COMMIT_SUBJECT.fullmatch(s)]
        if foreign:
            raise LeanloopError(
                f"--branch {branch} holds commits leanloop did not make ({foreign[0]!r}), so it "
                "is not HEAD plus the proofs",
                hint=hint,
            )

    # -- the worktree --------------------------------------------------------------------------

    def open(self) -> Path:
        """The branch's worktree (made on first use): a clean checkout of the branch, which
        starts at HEAD."""
        if self.worktree is not None:
            return self.worktree
        ref = f"refs/heads/{self.branch}"
        if _git(self.repo, "rev-parse", "--verify", "--quiet", ref, check=False).returncode:
            _git(self.repo, "branch", self.branch, self.head)
        self._remove_abandoned()
        parent = Path(tempfile.mkdtemp(prefix=_PREFIX))
        (parent / _OWNER).write_text(owner_tag() + "\n")
        worktree = parent / self.repo.name
        added = _git(
            self.repo, "worktree", "add", "--quiet", str(worktree), self.branch, check=False
        )
        if added.returncode != 0:
            shutil.rmtree(parent, ignore_errors=True)
            reason = (added.stderr or added.stdout).strip().splitlines()
            raise LeanloopError(
                f"--branch {self.branch}: cannot check it out in a worktree of its own: "
                f"{reason[-1] if reason else added.returncode}",
                hint="a branch checked out in another worktree cannot be used; name another",
            )
        self._parent, self.worktree = parent, worktree
        return worktree

    def _remove_abandoned(self) -> None:
        """Remove this branch's worktrees that a run left behind when it was killed (its
        directory gone, or marked by a process of this machine that has ended)."""
        _git(self.repo, "worktree", "prune", check=False)
        listed = _git(self.repo, "worktree", "list", "--porcelain", check=False).stdout
        for entry in listed.split("\n\n"):
            fields = dict(line.partition(" ")[::2] for line in entry.splitlines() if line)
            path = Path(fields.get("worktree", ""))
            if fields.get("branch") != f"refs/heads/{self.branch}":
                continue
            owner = path.parent / _OWNER
            if not path.parent.name.startswith(_PREFIX) or not owner.is_file():
                continue
            if owner_gone(owner.read_text()):
                _git(self.repo, "worktree", "remove", "--force", str(path), check=False)
                shutil.rmtree(path.parent, ignore_errors=True)
        _git(self.repo, "worktree", "prune", check=False)

    def project_root(self, project: str | Path) -> Path:
        """Where ``project`` (a directory of the user's repository) is in the worktree."""
        relative = Path(project).resolve().relative_to(self.repo.resolve())
        return self.open() / relative

    def commit(self, paths: Iterable[Path], message: str) -> str:
        """Commit ``paths`` (files of the worktree) on the branch; returns the commit id."""
        worktree = self.open()
        names = [str(Path(p).resolve().relative_to(worktree.resolve())) for p in paths]
        _git(worktree, "add", "--", *names)
        identity = None if self._has_identity(worktree) else _IDENTITY
        _git(
            worktree, "commit", "--quiet", "--no-verify", "-m", message, "--", *names, env=identity
        )
        return _git(worktree, "rev-parse", "HEAD").stdout.strip()

    def tip(self) -> str:
        return _git(self.repo, "rev-parse", f"refs/heads/{self.branch}").stdout.strip()

    def close(self) -> None:
        """Remove the worktree (the branch and its commits stay)."""
        if self.worktree is not None:
            _git(self.repo, "worktree", "remove", "--force", str(self.worktree), check=False)
            _git(self.repo, "worktree", "prune", check=False)
            self.worktree = None
        if self._parent is not None:
            shutil.rmtree(self._parent, ignore_errors=True)
            self._parent = None

    def __enter__(self) -> BranchWorkspace:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @staticmethod
    def _has_identity(cwd: Path) -> bool:
        names = [
            _git(cwd, "config", key, check=False).stdout.strip()
            for key in ("user.name", "user.email")
        ]
        return all(names)
