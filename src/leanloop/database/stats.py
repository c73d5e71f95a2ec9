"""What the database holds, counted in SQL: each repository's theorems grouped for the curriculum,
and the per-repository statistics ``leanloop db stats`` shows."""

from __future__ import annotations

from collections import defaultdict

import sqlalchemy as sa
from pydantic import BaseModel
from sqlalchemy.engine import Connection

from leanloop.data.records import Repository, TheoremStatus
from leanloop.database.curriculum import (
    CurriculumRow,
    RepositoryDifficulty,
    Thresholds,
    rank_repositories,
)
from leanloop.database.rows import repository_from_row
from leanloop.database.schema import files, premises, repositories, theorems


class RepositoryStats(BaseModel):
    name: str
    url: str
    commit: str
    lean_version: str | None
    theorems: int
    proven: int
    sorry: int
    sorry_proved: int
    tactics: int
    files: int
    premises: int
    difficulty: dict[str, int]


class DatabaseStats(BaseModel):
    database: str
    repositories: list[RepositoryStats]
    theorems: int
    tactics: int
    premises: int
    open_sorries: int
    difficulty_thresholds: tuple[float, float] | None


Curriculum = tuple[list[tuple[Repository, RepositoryDifficulty]], Thresholds | None]


def curriculum(conn: Connection) -> Curriculum:
    """Repositories easiest first, each with its theorems' difficulty counts, and the
    thresholds (log difficulty at the 33rd and 67th percentiles)."""
    repos = {r.id: r for r in conn.execute(sa.select(repositories))}
    grouped = conn.execute(
        sa.select(
            theorems.c.repository_id,
            theorems.c.num_steps,
            theorems.c.status,
            sa.func.count(),
        ).group_by(theorems.c.repository_id, theorems.c.num_steps, theorems.c.status)
    ).all()
    rows = [
        CurriculumRow(rid, repos[rid].name, steps, status, n) for rid, steps, status, n in grouped
    ]
    with_theorems = {row.repository_id for row in rows}
    for rid, repo in repos.items():  # repositories without theorems still appear
        if rid not in with_theorems:
            rows.append(CurriculumRow(rid, repo.name, 0, TheoremStatus.PROVEN.value, 0))
    ranked, limits = rank_repositories(rows)
    return [(repository_from_row(repos[r.repository_id]), r) for r in ranked], limits


def _count_by_repository(conn: Connection, table: sa.Table) -> dict[int, int]:
    query = sa.select(table.c.repository_id, sa.func.count()).group_by(table.c.repository_id)
    return dict(conn.execute(query).all())


def collect_stats(conn: Connection | None, description: str) -> DatabaseStats:
    """Counts per repository and in total, with each repository's difficulty profile (an empty
    summary when there is no database yet, ``conn`` None)."""
    per_repo: list[RepositoryStats] = []
    limits = None
    if conn is not None:
        ranked, limits = curriculum(conn)
        profile = {(r.url, r.commit): d.counts for r, d in ranked}
        theorem_counts: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        steps: dict[int, int] = defaultdict(int)
        for rid, status, n, total_steps in conn.execute(
            sa.select(
                theorems.c.repository_id,
                theorems.c.status,
                sa.func.count(),
                sa.func.coalesce(sa.func.sum(theorems.c.num_steps), 0),
            ).group_by(theorems.c.repository_id, theorems.c.status)
        ):
            theorem_counts[rid][status] = n
            steps[rid] += int(total_steps)
        file_counts = _count_by_repository(conn, files)
        premise_counts = _count_by_repository(conn, premises)
        for row in conn.execute(sa.select(repositories).order_by(repositories.c.id)):
            counts = theorem_counts[row.id]
            per_repo.append(
                RepositoryStats(
                    name=row.name,
                    url=row.url,
                    commit=row.commit,
                    lean_version=row.lean_version,
                    theorems=sum(counts.values()),
                    proven=counts[TheoremStatus.PROVEN.value],
                    sorry=counts[TheoremStatus.SORRY.value],
                    sorry_proved=counts[TheoremStatus.SORRY_PROVED.value],
                    tactics=steps[row.id],
                    files=file_counts.get(row.id, 0),
                    premises=premise_counts.get(row.id, 0),
                    difficulty=dict(profile.get((row.url, row.commit), {})),
                )
            )
    return DatabaseStats(
        database=description,
        repositories=per_repo,
        theorems=sum(r.theorems for r in per_repo),
        tactics=sum(r.tactics for r in per_repo),
        premises=sum(r.premises for r in per_repo),
        open_sorries=sum(r.sorry for r in per_repo),
        difficulty_thresholds=None if limits is None else (limits.easy_max, limits.medium_max),
    )
