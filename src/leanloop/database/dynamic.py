"""``DynamicDatabase``: the lifelong store of repositories, theorems, premises, sorries and splits,
on SQLite or PostgreSQL."""

from __future__ import annotations

import contextlib
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import sqlalchemy as sa
from pydantic import BaseModel
from sqlalchemy.engine import Connection, Engine

from leanloop.data.leandojo.reader import LeanDojoDataset
from leanloop.data.records import (
    Premise,
    Repository,
    SourceFile,
    Theorem,
    TheoremKey,
    TheoremStatus,
    repository_identity,
)
from leanloop.database import engine as engines
from leanloop.database.curriculum import RepositoryDifficulty, Thresholds, rank_repositories
from leanloop.database.export import ExportReport, export_merged
from leanloop.database.ingest import Ingest, IngestCounts
from leanloop.database.rows import (
    key_digest,
    premise_from_row,
    repository_from_row,
    stream,
    stream_proofs,
    theorem_from_rows,
    theorem_without_tactics,
)
from leanloop.database.schema import (
    LEANLOOP_TABLES,
    SCHEMA_VERSION,
    files,
    meta,
    metadata,
    premises,
    split_assignments,
    theorems,
)
from leanloop.database.schema import (
    repositories as repo_table,
)
from leanloop.database.splits import SplitConfig
from leanloop.errors import DatabaseError, DataFormatError, LeanloopError

Progress = Callable[[int, int | None], None]
RepositoryLike = Repository | tuple[str, str]


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


class TraceReport(BaseModel):
    """What tracing a project added (``DynamicDatabase.trace_repository``): the counts, the
    files traced (how many from the cache), the files that failed and what was skipped, with why."""

    repository: Repository
    counts: IngestCounts
    files: int
    cached_files: int
    failures: dict[str, str] = {}
    skipped: dict[str, str] = {}


class DynamicDatabase:
    """A database of traced Lean repositories that grows repository by repository.

    ``DynamicDatabase()`` uses ``$LEANLOOP_DB`` or a SQLite file in the user's data directory;
    ``DynamicDatabase("path/to/file.db")`` a SQLite file; ``DynamicDatabase("postgresql://...")``
    a PostgreSQL database. Opening never changes anything: tables are created by the first write,
    and every write is one transaction that either fully happens or leaves no trace.
    """

    def __init__(self, url: str | Path | None = None) -> None:
        if url is None:
            from leanloop.settings import Settings

            url = Settings.from_env().default_database
        self.url = engines.resolve_url(url)
        self._engine: Engine | None = None
        self._schema_ready = False

    def __repr__(self) -> str:
        return f"DynamicDatabase({engines.describe(self.url)!r})"

    @property
    def description(self) -> str:
        return engines.describe(self.url)

    # -- connections ---------------------------------------------------------------------------

    @property
    def sqlite_path(self) -> Path | None:
        if self.url.get_backend_name() != "sqlite" or self.url.database in (None, "", ":memory:"):
            return None
        return Path(self.url.database)

    def _get_engine(self) -> Engine:
        if self._engine is None:
            self._engine = engines.create(self.url)
        return self._engine

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None

    def __enter__(self) -> DynamicDatabase:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _schema_state(self, conn: Connection) -> str:
        """'ready', 'empty' (no tables yet); raises for a foreign or incompatible database."""
        if self._schema_ready:
            return "ready"
        names = set(sa.inspect(conn).get_table_names())
        if meta.name not in names:
            if names & LEANLOOP_TABLES or names:
                raise DatabaseError(
                    f"{self.description} is not a leanloop database (it has other tables)",
                    hint="use a new file or an empty database",
                )
            return "empty"
        version = conn.execute(sa.select(meta.c.value).where(meta.c.key == "schema_version"))
        found = version.scalar()
        if found != str(SCHEMA_VERSION):
            raise DatabaseError(
                f"{self.description} has schema version {found}, this leanloop uses "
                f"{SCHEMA_VERSION}",
                hint="open it with the leanloop version that created it",
            )
        self._schema_ready = True
        return "ready"

    @contextlib.contextmanager
    def _read(self) -> Iterator[Connection | None]:
        """A read-only view; None when there is no database yet (nothing is created)."""
        path = self.sqlite_path
        if path is not None and not path.exists():
            yield None
            return
        with engines.translate_errors(self.url), self._get_engine().connect() as conn:
            if self._schema_state(conn) == "empty":
                yield None
            else:
                yield conn

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Connection]:
        """One write transaction: committed when the block ends, rolled back if it raises."""
        path = self.sqlite_path
        created = False
        if path is not None and not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            created = True
        try:
            with (
                engines.translate_errors(self.url),
                engines.write_transaction(self._get_engine()) as conn,
            ):
                if self._schema_state(conn) == "empty":
                    metadata.create_all(conn)
                    conn.execute(
                        meta.insert().values(key="schema_version", value=str(SCHEMA_VERSION))
                    )
                    self._schema_ready = True
                yield conn
        except BaseException:
            self._schema_ready = False
            if created and path is not None:
                self.close()
                path.unlink(missing_ok=True)
            raise

    # -- adding --------------------------------------------------------------------------------

    def add_repository(
        self,
        repository: Repository,
        theorems: Iterable[Theorem] = (),
        source_files: Iterable[SourceFile] = (),
        traced_files: Iterable[str] = (),
        *,
        source: str | None = None,
        batch_size: int = 1000,
    ) -> IngestCounts:
        """Add a repository at a commit with its theorems, corpus files and traced files.

        Adding what is already there changes nothing. Theorems of another commit of the same
        repository that were open sorries and are proved in this commit become ``sorry_proved``.
        """
        with self.transaction() as conn:
            ingest = Ingest(conn, batch_size=batch_size)
            repo_id = ingest.repository_id(repository, source=source)
            batch: list[Theorem] = []
            for theorem in theorems:
                if repository_identity(theorem.url) != repository.identity or (
                    theorem.commit != repository.commit
                ):
                    raise LeanloopError(
                        f"theorem {theorem.full_name} belongs to {theorem.url}@{theorem.commit}, "
                        f"not to {repository.url}@{repository.commit}"
                    )
                batch.append(theorem)
                if len(batch) >= batch_size:
                    ingest.add_theorems(repo_id, batch)
                    batch = []
            ingest.add_theorems(repo_id, batch)
            chunk: list[SourceFile] = []
            for source_file in source_files:
                chunk.append(source_file)
                if len(chunk) >= batch_size:
                    ingest.add_source_files(repo_id, chunk)
                    chunk = []
            ingest.add_source_files(repo_id, chunk)
            ingest.mark_traced(repo_id, traced_files)
            ingest.resolve_sorries(repo_id)
            return ingest.counts

    def import_leandojo(
        self,
        path: str | Path,
        *,
        keep_splits: bool = False,
        progress: Progress | None = None,
        batch_size: int = 1000,
    ) -> IngestCounts:
        """Import a LeanDojo-format dataset (a directory, part of one, or one split file).

        With ``keep_splits`` the dataset's own train/val/test labels become the theorems' splits
        (unless a theorem already has one); otherwise splits are assigned at export time.
        """
        dataset = LeanDojoDataset(path)
        source = f"leandojo:{dataset.path}"
        with self.transaction() as conn:
            ingest = Ingest(conn, batch_size=batch_size)
            seen: set[tuple[TheoremKey, str]] = set()
            pending: dict[int, list[Theorem]] = defaultdict(list)
            repo_of_path: dict[str, int] = {}
            repo_ids: dict[tuple[str, str], int] = {}
            labels: dict[tuple[str, str], str] = {}
            waiting = 0
            items = dataset.iter_theorem_items(dataset.theorem_files(all_schemes=keep_splits))
            for done, item in enumerate(items, start=1):
                key = item.key
                ident = (key, str(item.raw.get("commit"))) if key is not None else None
                if ident is None or ident not in seen:
                    theorem = item.parse()
                    key = theorem.key
                    seen.add((key, theorem.commit))
                    repo_id = repo_ids.get((theorem.url, theorem.commit))
                    if repo_id is None:
                        repo_id = ingest.repository_id(
                            Repository(url=theorem.url, commit=theorem.commit), source=source
                        )
                        repo_ids[theorem.url, theorem.commit] = repo_id
                    repo_of_path.setdefault(theorem.file_path, repo_id)
                    pending[repo_id].append(theorem)
                    waiting += 1
                    if waiting >= batch_size:
                        for rid, batch in pending.items():
                            ingest.add_theorems(rid, batch)
                        pending.clear()
                        waiting = 0
                if keep_splits and item.source.scheme and item.source.split:
                    labels[key_digest(key), item.source.scheme] = item.source.split
                if progress is not None:
                    progress(done, None)
            for rid, batch in pending.items():
                ingest.add_theorems(rid, batch)
            ingest.add_split_labels(labels)

            if dataset.corpus_path is not None or dataset.traced_files_path is not None:
                default_repo = self._dataset_repository(dataset, ingest, repo_of_path, source)
                chunks: dict[int, list[SourceFile]] = defaultdict(list)
                for source_file in dataset.iter_source_files():
                    rid = repo_of_path.get(source_file.path, default_repo)
                    chunks[rid].append(source_file)
                    if len(chunks[rid]) >= batch_size:
                        ingest.add_source_files(rid, chunks.pop(rid))
                for rid, chunk in chunks.items():
                    ingest.add_source_files(rid, chunk)
                traced: dict[int, list[str]] = defaultdict(list)
                for traced_path in dataset.iter_traced_files():
                    traced[repo_of_path.get(traced_path, default_repo)].append(traced_path)
                for rid, paths in traced.items():
                    ingest.mark_traced(rid, paths)
            for rid in repo_ids.values():  # every commit read, also several of one repository
                ingest.resolve_sorries(rid)
            return ingest.counts

    @staticmethod
    def _dataset_repository(
        dataset: LeanDojoDataset, ingest: Ingest, repo_of_path: dict[str, int], source: str
    ) -> int:
        repo = dataset.repository
        if repo is not None:
            return ingest.repository_id(repo, source=source)
        if repo_of_path:
            return next(iter(repo_of_path.values()))
        raise DataFormatError(
            dataset.path,
            "cannot tell which repository the corpus belongs to",
            hint="add metadata.json with from_repo {url, commit}, or import it with its theorems",
        )

    def trace_repository(
        self,
        url: str | None = None,
        commit: str | None = None,
        *,
        path: str | Path | None = None,
        build_deps: bool = False,
        build: bool = True,
        workers: int = 1,
        **options,
    ):
        """Trace a Lean project (a git ``url`` at ``commit``, or a local ``path``: a directory or
        a ``.lean`` file) and add its theorems, premises and files; returns a ``TraceReport``.

        ``build_deps`` also scans the dependencies' sources, so that premises defined there are
        known. Needs a Lean toolchain and the Lean REPL (``leanloop doctor`` says what is
        missing). Tracing a commit again changes nothing.
        """
        from leanloop.lean.project import open_project
        from leanloop.tracing.project import trace_project

        if (url is None) == (path is None):
            raise LeanloopError("give either a repository url or a local path to trace")
        project = open_project(url if url is not None else path, commit=commit)
        traced = trace_project(
            project, build=build, dependencies=build_deps, workers=workers, **options
        )
        counts = self.add_repository(
            traced.repository,
            traced.theorems,
            traced.source_files,
            traced.traced_files,
            source=f"trace:{project.identity}",
        )
        return TraceReport(
            repository=traced.repository,
            counts=counts,
            files=len(traced.traced_files),
            cached_files=traced.cached,
            failures=traced.failures,
            skipped=traced.skipped,
        )

    def record_proof(self, theorem: Theorem, proof: str) -> None:
        """Store a proof found for an open sorry theorem; it becomes ``sorry_proved``."""
        with self.transaction() as conn:
            row = self._theorem_row(conn, theorem)
            if row.status != TheoremStatus.SORRY.value:
                raise LeanloopError(
                    f"{theorem.full_name} is not an open sorry (status: {row.status})"
                )
            conn.execute(
                theorems.update()
                .where(theorems.c.id == row.id)
                .values(status=TheoremStatus.SORRY_PROVED.value, proof=proof)
            )

    def delete_repository(self, url: str, commit: str) -> None:
        """Remove a repository at a commit and what belongs to it (split assignments are kept)."""
        with self.transaction() as conn:
            repo_id = self._repository_id(conn, (url, commit))
            conn.execute(repo_table.delete().where(repo_table.c.id == repo_id))

    def reset_splits(self) -> int:
        """Forget every split assignment (the next export assigns afresh); returns how many."""
        with self.transaction() as conn:
            return conn.execute(split_assignments.delete()).rowcount

    # -- queries -------------------------------------------------------------------------------

    def _repository_id(self, conn: Connection, repository: RepositoryLike) -> int:
        url, commit = (
            (repository.url, repository.commit)
            if isinstance(repository, Repository)
            else repository
        )
        found = conn.execute(
            sa.select(repo_table.c.id).where(
                repo_table.c.identity == repository_identity(url),
                repo_table.c.commit == commit,
            )
        ).scalar()
        if found is None:
            raise LeanloopError(f"repository {url} at commit {commit} is not in the database")
        return found

    def _theorem_row(self, conn: Connection, theorem: Theorem):
        repo_id = self._repository_id(conn, (theorem.url, theorem.commit))
        row = conn.execute(
            sa.select(theorems.c.id, theorems.c.status).where(
                theorems.c.repository_id == repo_id,
                theorems.c.file_path == theorem.file_path,
                theorems.c.full_name == theorem.full_name,
            )
        ).first()
        if row is None:
            raise LeanloopError(
                f"theorem {theorem.full_name} ({theorem.file_path}) is not in the database"
            )
        return row

    def get_repositories(self) -> list[Repository]:
        """All repositories, in the order they were added."""
        with self._read() as conn:
            if conn is None:
                return []
            rows = conn.execute(sa.select(repo_table).order_by(repo_table.c.id))
            return [repository_from_row(r) for r in rows]

    @property
    def repositories(self) -> list[Repository]:
        return self.get_repositories()

    def get_repository(self, url: str, commit: str) -> Repository | None:
        with self._read() as conn:
            if conn is None:
                return None
            row = conn.execute(
                sa.select(repo_table).where(
                    repo_table.c.identity == repository_identity(url),
                    repo_table.c.commit == commit,
                )
            ).first()
            return None if row is None else repository_from_row(row)

    def iter_theorems(
        self,
        repository: RepositoryLike | None = None,
        *,
        file_path: str | None = None,
        status: TheoremStatus | str | None = None,
        with_tactics: bool = True,
    ) -> Iterator[Theorem]:
        """Stream theorems, optionally of one repository, one file and one status."""
        with self._read() as conn:
            if conn is None:
                return
            conditions = []
            if repository is not None:
                conditions.append(theorems.c.repository_id == self._repository_id(conn, repository))
            if file_path is not None:
                conditions.append(theorems.c.file_path == file_path)
            if status is not None:
                conditions.append(theorems.c.status == TheoremStatus(status).value)
            where = sa.and_(sa.true(), *conditions)
            if with_tactics:
                for proof in stream_proofs(conn, where):
                    yield theorem_from_rows(proof)
            else:
                query = (
                    sa.select(theorems, repo_table.c.url, repo_table.c.commit)
                    .select_from(theorems.join(repo_table))
                    .where(where)
                    .order_by(theorems.c.id)
                )
                for row in stream(conn, query):
                    yield theorem_without_tactics(row)

    def get_theorems(
        self,
        repository: RepositoryLike | None = None,
        *,
        file_path: str | None = None,
        status: TheoremStatus | str | None = None,
        with_tactics: bool = True,
    ) -> list[Theorem]:
        return list(
            self.iter_theorems(
                repository, file_path=file_path, status=status, with_tactics=with_tactics
            )
        )

    def get_sorry_theorems(self, repository: RepositoryLike | None = None) -> list[Theorem]:
        """Theorems whose proof still has a ``sorry`` that no later commit or prover closed."""
        return self.get_theorems(repository, status=TheoremStatus.SORRY)

    def get_premises(
        self, repository: RepositoryLike | None = None, *, file_path: str | None = None
    ) -> list[Premise]:
        with self._read() as conn:
            if conn is None:
                return []
            query = sa.select(premises).order_by(
                premises.c.repository_id, premises.c.file_path, premises.c.ordinal
            )
            if repository is not None:
                query = query.where(
                    premises.c.repository_id == self._repository_id(conn, repository)
                )
            if file_path is not None:
                query = query.where(premises.c.file_path == file_path)
            return [premise_from_row(r) for r in conn.execute(query)]

    # -- curriculum ----------------------------------------------------------------------------

    def curriculum(self) -> tuple[list[tuple[Repository, RepositoryDifficulty]], Thresholds | None]:
        """Repositories easiest first, each with its theorems' difficulty counts, and the
        thresholds (log difficulty at the 33rd and 67th percentiles)."""
        with self._read() as conn:
            if conn is None:
                return [], None
            repos = {r.id: r for r in conn.execute(sa.select(repo_table))}
            grouped = conn.execute(
                sa.select(
                    theorems.c.repository_id,
                    theorems.c.num_steps,
                    theorems.c.status,
                    sa.func.count(),
                ).group_by(theorems.c.repository_id, theorems.c.num_steps, theorems.c.status)
            ).all()
        rows = [(rid, repos[rid].name, steps, status, n) for rid, steps, status, n in grouped]
        for rid, row in repos.items():  # repositories without theorems still appear
            if not any(r[0] == rid for r in rows):
                rows.append((rid, row.name, 0, TheoremStatus.PROVEN.value, 0))
        ranked, limits = rank_repositories(rows)
        return [(repository_from_row(repos[r.repository_id]), r) for r in ranked], limits

    def sort_repositories_by_difficulty(self) -> list[Repository]:
        """Repositories ordered by their share of easy theorems, highest first."""
        return [repo for repo, _ in self.curriculum()[0]]

    # -- export and statistics -----------------------------------------------------------------

    def export_merged_data(
        self,
        repositories: Sequence[RepositoryLike],
        output_path: str | Path,
        *,
        split_config: SplitConfig | None = None,
        progress: Progress | None = None,
    ) -> ExportReport:
        """Write the LeanDojo-format dataset of the given repositories to ``output_path``.

        Theorems keep the split they were given by an earlier export (or an import with
        ``keep_splits``); new theorems are assigned by the seeded rules of ``split_config``.
        Where a theorem is in several commits of a repository, the commit added last wins.
        """
        config = split_config or SplitConfig()
        with self.transaction() as conn:
            resolved = []
            for repository in repositories:
                repo_id = self._repository_id(conn, repository)
                row = conn.execute(sa.select(repo_table).where(repo_table.c.id == repo_id)).one()
                resolved.append((repo_id, repository_from_row(row)))
            if not resolved:
                raise LeanloopError("no repositories to export")
            return export_merged(conn, resolved, Path(output_path), config, progress=progress)

    def stats(self) -> DatabaseStats:
        """Counts per repository and in total, with each repository's difficulty profile."""
        ranked, limits = self.curriculum()
        profile = {(r.url, r.commit): d.counts for r, d in ranked}
        per_repo: list[RepositoryStats] = []
        with self._read() as conn:
            if conn is not None:
                theorem_counts = defaultdict(lambda: defaultdict(int))
                steps = defaultdict(int)
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
                file_counts = dict(
                    conn.execute(
                        sa.select(files.c.repository_id, sa.func.count()).group_by(
                            files.c.repository_id
                        )
                    ).all()
                )
                premise_counts = dict(
                    conn.execute(
                        sa.select(premises.c.repository_id, sa.func.count()).group_by(
                            premises.c.repository_id
                        )
                    ).all()
                )
                for row in conn.execute(sa.select(repo_table).order_by(repo_table.c.id)):
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
            database=self.description,
            repositories=per_repo,
            theorems=sum(r.theorems for r in per_repo),
            tactics=sum(r.tactics for r in per_repo),
            premises=sum(r.premises for r in per_repo),
            open_sorries=sum(r.sorry for r in per_repo),
            difficulty_thresholds=None if limits is None else (limits.easy_max, limits.medium_max),
        )
