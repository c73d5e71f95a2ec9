"""The repositories an agent works on and how they got into the database: a Lean project (a git URL
at a commit, or a local directory), traced unless the database already holds it at that
commit, or a LeanDojo-format dataset, imported (for work without Lean)."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict

from leanloop.data.records import Repository
from leanloop.errors import LeanloopError

if TYPE_CHECKING:
    from leanloop.database import DynamicDatabase
    from leanloop.lean.project import LeanProject

Progress = Callable[[int, int | None], None]
_URL = re.compile(r"^(https?://|git@|ssh://|file://)")


class AgentRepository(BaseModel):
    """A repository set up for an agent: the stored record, and where it came from (``github``:
    a git URL; ``local``: a project directory; ``dataset``: a LeanDojo-format dataset, which
    has no Lean project behind it)."""

    model_config = ConfigDict(frozen=True)

    repository: Repository
    kind: Literal["github", "local", "dataset"]
    location: str

    @property
    def has_project(self) -> bool:
        return self.kind != "dataset"

    @property
    def slug(self) -> str:
        """A name for directories of this repository's reports."""
        name = re.sub(r"[^A-Za-z0-9._-]+", "-", self.repository.name).strip("-") or "repo"
        return f"{name}-{self.repository.commit[:8]}"

    def open_project(self) -> LeanProject:
        """The Lean project on disk (a git repository is cloned into the cache if needed)."""
        from leanloop.lean.project import open_project

        if not self.has_project:
            raise LeanloopError(f"{self.repository} was set up from a dataset: it has no project")
        commit = self.repository.commit if self.kind == "github" else None
        return open_project(self.location, commit=commit)

    def __str__(self) -> str:
        return f"{self.repository} ({self.kind}: {self.location})"


def require_lean() -> None:
    """A one-line error when elan, lake or lean is missing (what, and how to install it),
    checked before anything is cloned or built; the REPL is looked for later, in the project."""
    from leanloop.lean.errors import ServerNotFound
    from leanloop.lean.toolchain import require

    with contextlib.suppress(ServerNotFound):
        require()


def setup_project(
    database: DynamicDatabase,
    location: str | os.PathLike,
    commit: str | None = None,
    *,
    build_deps: bool = False,
    progress: Progress | None = None,
) -> AgentRepository:
    """The Lean project at ``location`` (a git URL, at ``commit``; or a local directory) in the
    database: traced (which needs Lean, checked first) unless it is stored at that commit
    already."""
    from leanloop.lean.project import open_project

    text = os.fspath(location)
    if _URL.match(text):
        kind: Literal["github", "local"] = "github"
        found = database.get_repository(text, commit) if commit else None
    else:
        kind = "local"
        text = str(Path(text).expanduser().absolute())
        project = open_project(text, commit=commit)
        stored_commit = commit or project.commit
        found = database.get_repository(project.identity, stored_commit) if stored_commit else None
    if found is None:
        require_lean()
        report = database.trace_repository(
            path=text, commit=commit, build_deps=build_deps, progress=progress
        )
        found = report.repository
    return AgentRepository(repository=found, kind=kind, location=text)


def setup_dataset(
    database: DynamicDatabase, path: str | os.PathLike, *, progress: Progress | None = None
) -> list[AgentRepository]:
    """Import the dataset at ``path``, in any format ``data.open_dataset`` reads (what is stored
    already is left as it is), and return each repository its theorems belong to."""
    from leanloop.data import open_dataset

    location = Path(path).expanduser()
    if not location.exists():
        raise LeanloopError(f"dataset {location}: no such file or directory")
    database.import_dataset(location, progress=progress)
    pairs: dict[tuple[str, str], None] = {}
    for theorem in open_dataset(location).iter_theorems():
        pairs.setdefault((theorem.url, theorem.commit), None)
    found = []
    for url, commit in pairs:
        repository = database.get_repository(url, commit)
        if repository is not None:
            found.append(
                AgentRepository(
                    repository=repository, kind="dataset", location=str(location.absolute())
                )
            )
    if not found:
        raise LeanloopError(f"dataset {location}: it holds no theorem")
    return found
