"""Look things up in the tables: repositories by URL and commit, theorems (streamed, with or
without their tactics) by repository, file and status, and premises."""

from __future__ import annotations

from collections.abc import Iterator

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Row

from leanloop.data.records import Premise, Repository, Theorem, TheoremStatus, repository_identity
from leanloop.database.rows import (
    premise_from_row,
    repository_from_row,
    stream,
    stream_proofs,
    theorem_from_rows,
    theorem_without_tactics,
)
from leanloop.database.schema import premises, repositories, theorems
from leanloop.errors import LeanloopError

RepositoryLike = Repository | tuple[str, str]


def repository_id(conn: Connection, repository: RepositoryLike) -> int:
    """The id of a repository at a commit; an error naming it when it is not stored."""
    url, commit = (
        (repository.url, repository.commit) if isinstance(repository, Repository) else repository
    )
    found = conn.execute(
        sa.select(repositories.c.id).where(
            repositories.c.identity == repository_identity(url),
            repositories.c.commit == commit,
        )
    ).scalar()
    if found is None:
        raise LeanloopError(f"repository {url} at commit {commit} is not in the database")
    return found


def find_repository(conn: Connection, url: str, commit: str) -> Repository | None:
    row = conn.execute(
        sa.select(repositories).where(
            repositories.c.identity == repository_identity(url),
            repositories.c.commit == commit,
        )
    ).first()
    return None if row is None else repository_from_row(row)


def all_repositories(conn: Connection) -> list[Repository]:
    """Every repository, in the order they were added."""
    rows = conn.execute(sa.select(repositories).order_by(repositories.c.id))
    return [repository_from_row(r) for r in rows]


def resolve_repositories(
    conn: Connection, wanted: list[RepositoryLike]
) -> list[tuple[int, Repository]]:
    """Each wanted repository's id and stored record, in the order given."""
    resolved = []
    for repository in wanted:
        rid = repository_id(conn, repository)
        row = conn.execute(sa.select(repositories).where(repositories.c.id == rid)).one()
        resolved.append((rid, repository_from_row(row)))
    return resolved


def theorem_row(conn: Connection, theorem: Theorem) -> Row:
    """The stored row (id, status) of a theorem; an error when it is not stored."""
    rid = repository_id(conn, (theorem.url, theorem.commit))
    row = conn.execute(
        sa.select(theorems.c.id, theorems.c.status).where(
            theorems.c.repository_id == rid,
            theorems.c.file_path == theorem.file_path,
            theorems.c.full_name == theorem.full_name,
        )
    ).first()
    if row is None:
        raise LeanloopError(
            f"theorem {theorem.full_name} ({theorem.file_path}) is not in the database"
        )
    return row


def iter_theorems(
    conn: Connection,
    repository: RepositoryLike | None,
    *,
    file_path: str | None,
    status: TheoremStatus | str | None,
    with_tactics: bool,
) -> Iterator[Theorem]:
    """Stream the theorems matching the filters in the order they were added."""
    conditions = []
    if repository is not None:
        conditions.append(theorems.c.repository_id == repository_id(conn, repository))
    if file_path is not None:
        conditions.append(theorems.c.file_path == file_path)
    if status is not None:
        conditions.append(theorems.c.status == TheoremStatus(status).value)
    where = sa.and_(sa.true(), *conditions)
    if with_tactics:
        for proof in stream_proofs(conn, where):
            yield theorem_from_rows(proof)
        return
    query = (
        sa.select(theorems, repositories.c.url, repositories.c.commit)
        .select_from(theorems.join(repositories))
        .where(where)
        .order_by(theorems.c.id)
    )
    for row in stream(conn, query):
        yield theorem_without_tactics(row)


def premises_of(
    conn: Connection, repository: RepositoryLike | None, file_path: str | None
) -> list[Premise]:
    query = sa.select(premises).order_by(
        premises.c.repository_id, premises.c.file_path, premises.c.ordinal
    )
    if repository is not None:
        query = query.where(premises.c.repository_id == repository_id(conn, repository))
    if file_path is not None:
        query = query.where(premises.c.file_path == file_path)
    return [premise_from_row(r) for r in conn.execute(query)]
