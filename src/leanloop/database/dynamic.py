"""``DynamicDatabase``: the lifelong store of repositories, theorems, premises, sorries and splits,
on SQLite or PostgreSQL; a facade over loading, queries, export and statistics."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import leanloop.database.attempts as attempts
import leanloop.database.engine as engines
import leanloop.database.queries as queries
from leanloop.data.formats import open_dataset
from leanloop.data.leandojo.format import SCHEMES
from leanloop.data.records import (
    Premise,
    ProofAttempt,
    Repository,
    SourceFile,
    Theorem,
    TheoremKey,
    TheoremStatus,
)
from leanloop.database.access import DatabaseAccess
from leanloop.database.assign import assign_splits, forget_split_settings
from leanloop.database.bulk import without_cycle_collection
from leanloop.database.export import ExportReport, export_merged
from leanloop.database.ingest import IngestCounts
from leanloop.database.integrity import IntegrityReport, check_integrity
from leanloop.database.leandojo_v2 import (
    LEANDOJO_V2_DATABASE,
    dataset_format,
    import_leandojo_v2_database,
)
from leanloop.database.loader import TraceReport, add_records, import_dataset
from leanloop.database.queries import RepositoryLike
from leanloop.database.schema import repositories as repository_table
from leanloop.database.schema import split_assignments, theorems
from leanloop.database.splits import SplitConfig
from leanloop.database.stats import Curriculum, DatabaseStats, collect_stats, curriculum
from leanloop.errors import DataFormatError, LeanloopError

Progress = Callable[[int, int | None], None]


class DynamicDatabase:
    """A database of traced Lean repositories that grows repository by repository.

    ``DynamicDatabase()`` uses ``$LEANLOOP_DB`` or a SQLite file in the user's data directory;
    ``DynamicDatabase("path/to/file.db")`` a SQLite file; ``DynamicDatabase("postgresql://...")``
    a PostgreSQL database. Opening never changes anything: tables are created by the first write,
    and every write is one transaction that either fully happens or leaves no trace.

    ``DynamicDatabase(json_path="dynamic_database.json")`` is LeanDojo-v2's form: the
    repositories of that LeanDojo-v2 database file are imported into this database (``url``, by
    default the default one), what is stored already being skipped. The file is only read:
    unlike LeanDojo-v2, which emptied it whenever a database was made, nothing is ever wiped.

    Args:
        url: A SQLite file path (``~`` is expanded), a ``sqlite://`` or ``postgresql://`` URL,
            or None for ``Settings.default_database`` (``$LEANLOOP_DB``, else ``leanloop.db``
            in the user's data directory).
        json_path: A LeanDojo-v2 database file (``DynamicDatabase.to_json``) to import; one
            that does not exist imports nothing.

    Raises:
        DatabaseError: ``url`` is empty, not a URL of SQLite or PostgreSQL, or its driver is
            not installed.
        DataFormatError: ``json_path`` is not a LeanDojo-v2 database (naming the file and
            field).
    """

    def __init__(
        self,
        url: str | os.PathLike[str] | None = None,
        *,
        json_path: str | os.PathLike[str] | None = None,
    ) -> None:
        if url is None:
            from leanloop.settings import Settings

            url = Settings.from_env().default_database
        self.url = engines.resolve_url(url)
        self._access = DatabaseAccess(self.url)
        #: LeanDojo-v2's attribute: the database file imported (None when none was given)
        self.json_path = Path(json_path).expanduser() if json_path is not None else None
        if self.json_path is not None and self.json_path.exists():
            self.import_dataset(self.json_path)

    @classmethod
    def from_json(
        cls, file_path: str | os.PathLike[str], url: str | os.PathLike[str] | None = None
    ) -> DynamicDatabase:
        """LeanDojo-v2's ``DynamicDatabase.from_json``: a database (``url``, by default the
        default one) holding the repositories of a LeanDojo-v2 database file.

        Args:
            file_path: The LeanDojo-v2 database file (``dynamic_database.json``).
            url: The database to import it into (None: the default database).

        Returns:
            The database, the file's repositories imported.

        Raises:
            DataFormatError: The file does not exist or is not a LeanDojo-v2 database.
        """
        path = Path(file_path).expanduser()
        if not path.is_file():
            raise DataFormatError(path, "no such file", hint="give LeanDojo-v2's database file")
        return cls(url=url, json_path=path)

    def __repr__(self) -> str:
        return f"DynamicDatabase({self.description!r})"

    @property
    def description(self) -> str:
        """The database's URL as shown to users (a password hidden)."""
        return self._access.description

    @property
    def sqlite_path(self) -> Path | None:
        """The SQLite file, or None for PostgreSQL (and an in-memory database)."""
        return self._access.sqlite_path

    def close(self) -> None:
        """Release the database's connections (also done when a ``with`` block ends)."""
        self._access.close()

    def __enter__(self) -> DynamicDatabase:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def check(self) -> None:
        """Raise a ``DatabaseError`` now if the database cannot be used (a file that is not a
        database, a foreign or newer one, a server that cannot be reached), before long work
        whose result it is to hold; creates nothing."""
        with self._access.read():
            pass

    def check_integrity(self, *, quick: bool = False) -> IntegrityReport:
        """Check that the database is whole, without writing to it: SQLite's own check of the
        file, leanloop's tables and schema version, and the references between rows.

        Args:
            quick: SQLite's ``quick_check`` instead of ``integrity_check``.

        Returns:
            What is wrong (nothing when it is whole) and what to do about it.
        """
        return check_integrity(self._access.url, quick=quick)

    def transaction(self):
        """One write transaction: committed when the block ends, rolled back if it raises.

        Returns:
            ContextManager[Connection]: A context manager giving the SQLAlchemy connection; the
            database's write lock is held until the block ends (other writers wait, saying
            so).
        """
        return self._access.write()

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

        Args:
            repository: The repository at its commit.
            theorems: Its theorems (streamed: any iterable).
            source_files: Its files with the premises they define (the corpus).
            traced_files: The paths of the files that were traced.
            source: Where the records came from (e.g. ``trace:URL@COMMIT``), kept with them.
            batch_size: Rows written per statement.

        Returns:
            How many repositories, theorems, tactics, premises and files were added and how
            many were already there.
        """
        with without_cycle_collection(), self.transaction() as conn:
            return add_records(
                conn,
                repository,
                theorems,
                source_files,
                traced_files,
                source=source,
                batch_size=batch_size,
            )

    def import_dataset(
        self,
        path: str | Path,
        *,
        keep_splits: bool = False,
        progress: Progress | None = None,
        batch_size: int = 1000,
    ) -> IngestCounts:
        """Import a dataset in any format ``data.open_dataset`` reads: a LeanDojo-format one (a
        directory, part of one, or one split file; LeanDojo-v2's exports, whose
        ``metadata.json`` lists ``repositories``, with each repository's Lean version and its
        corpus files on their own repositories) or a benchmark of statements (``.jsonl``,
        ``.lean``: a repository of its own, its theorems open sorries); or LeanDojo-v2's
        database file (``dynamic_database.json``: every repository with its theorems, premise
        files and traced files).

        With ``keep_splits`` a LeanDojo dataset's own train/val/test labels become the theorems'
        splits (unless a theorem already has one); otherwise splits are assigned at export time.

        Args:
            path: The dataset: a directory, a split file, a ``.jsonl`` or a ``.lean`` file.
            keep_splits: Keep a LeanDojo dataset's split labels.
            progress: Called as ``progress(done, total)`` while theorems are read (``total``
                is None when unknown).
            batch_size: Rows written per statement.

        Returns:
            How many records were added and how many were already there.

        Raises:
            DataFormatError: The dataset is malformed, or a ``.json`` file is neither a split
                file nor a LeanDojo-v2 database; the message names the file, line and field.
                Nothing of it is stored then.
        """
        path = Path(path).expanduser()
        if dataset_format(path) == LEANDOJO_V2_DATABASE:
            with without_cycle_collection(), self.transaction() as conn:
                return import_leandojo_v2_database(
                    conn, path, progress=progress, batch_size=batch_size
                )
        dataset = open_dataset(path)
        with without_cycle_collection(), self.transaction() as conn:
            return import_dataset(  # the loader's, not this method
                conn, dataset, keep_splits=keep_splits, progress=progress, batch_size=batch_size
            )

    #: The name ``import_dataset`` had when LeanDojo was the only format read.
    import_leandojo = import_dataset

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
        missing): without a ``server_factory`` among the options, elan, lake and lean are
        checked, and the database is checked to be usable, before anything is cloned, built or
        traced. Tracing a commit again changes nothing; the files traced are cached, so a trace
        that was stopped goes on from them.

        Args:
            url: A git URL to clone (give ``url`` or ``path``, not both).
            commit: The commit of ``url`` to trace (a local directory is traced as it is).
            path: A local Lean project directory or a single ``.lean`` file.
            build_deps: Also scan the dependencies' sources for premises.
            build: Build the project with ``lake build`` first.
            workers: Files traced at once, one Lean REPL each.
            **options (Any): Passed to ``leanloop.tracing.trace_project``: ``cache_dir``,
                ``timeout`` and ``memory_limit_mb`` (per file), ``progress(done, total)``.

        Returns:
            TraceReport: The repository, what was added, the files traced (and how many came
            from the cache), the files that failed and what was skipped, with why.

        Raises:
            LeanloopError: Neither or both of ``url`` and ``path`` are given, or the Lean
                toolchain is missing (saying what to install).
        """
        from leanloop.lean.project import is_remote, open_project
        from leanloop.tracing.project import trace_project

        source = url if url is not None else path
        if source is None or (url is not None and path is not None):
            raise LeanloopError("give either a repository url or a local path to trace")
        # a local project as it is costs nothing to open, and a wrong path is said first; a
        # URL or a commit of a local project is cloned, which waits for the checks
        project = open_project(source) if commit is None and not is_remote(source) else None
        if options.get("server_factory") is None:
            from leanloop.lean.toolchain import require_tools

            require_tools()
        self.check()
        if project is None:
            project = open_project(source, commit=commit)
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
        """Store a proof found for an open sorry theorem; it becomes ``sorry_proved``.

        Args:
            theorem: The theorem, as stored (its repository, commit, file and name find it).
            proof: The proof that replaces its ``sorry``.

        Raises:
            LeanloopError: The theorem is not stored, or is not an open sorry.
        """
        with self.transaction() as conn:
            row = queries.theorem_row(conn, theorem)
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
        """Remove a repository at a commit and what belongs to it (split assignments are kept).

        Args:
            url: The repository's URL.
            commit: The commit to remove.

        Raises:
            LeanloopError: No such repository at that commit is stored.
        """
        with self.transaction() as conn:
            rid = queries.repository_id(conn, (url, commit))
            conn.execute(repository_table.delete().where(repository_table.c.id == rid))

    def reset_splits(self, scheme: str | None = None) -> int:
        """Forget the split assignments of ``scheme`` (or of every scheme) and the settings
        that made them: the next export assigns afresh.

        Args:
            scheme: ``random`` or ``novel_premises``; None for both.

        Returns:
            How many assignments were forgotten.

        Raises:
            LeanloopError: ``scheme`` is not a known split scheme.
        """
        if scheme is not None and scheme not in SCHEMES:
            raise LeanloopError(
                f"unknown split scheme {scheme!r}", hint=f"one of: {', '.join(SCHEMES)}"
            )
        with self.transaction() as conn:
            query = split_assignments.delete()
            if scheme is not None:
                query = query.where(split_assignments.c.scheme == scheme)
            forget_split_settings(conn, scheme)
            return conn.execute(query).rowcount

    # -- queries -------------------------------------------------------------------------------

    def get_repositories(self) -> list[Repository]:
        """All repositories.

        Returns:
            The stored repositories, in the order they were added.
        """
        with self._access.read() as conn:
            return [] if conn is None else queries.all_repositories(conn)

    @property
    def repositories(self) -> list[Repository]:
        """All repositories, in the order they were added (as ``get_repositories()``)."""
        return self.get_repositories()

    def get_repository(self, url: str, commit: str) -> Repository | None:
        """One repository at one commit.

        Args:
            url: The repository's URL.
            commit: Its commit.

        Returns:
            The repository, or None when it is not stored.
        """
        with self._access.read() as conn:
            return None if conn is None else queries.find_repository(conn, url, commit)

    def iter_theorems(
        self,
        repository: RepositoryLike | None = None,
        *,
        file_path: str | None = None,
        status: TheoremStatus | str | None = None,
        with_tactics: bool = True,
    ) -> Iterator[Theorem]:
        """Stream theorems, optionally of one repository, one file and one status.

        Args:
            repository: A ``Repository`` or a ``(url, commit)`` pair; None for every one.
            file_path: Only the theorems of this file (relative to the repository).
            status: Only theorems of this status (``proven``, ``sorry``, ``sorry_proved``).
            with_tactics: Read each theorem's traced tactics too (off: faster, ``tactics``
                empty).

        Yields:
            The theorems, one at a time (memory does not grow with their number).
        """
        with self._access.read() as conn:
            if conn is not None:
                yield from queries.iter_theorems(
                    conn, repository, file_path=file_path, status=status, with_tactics=with_tactics
                )

    def get_theorems(
        self,
        repository: RepositoryLike | None = None,
        *,
        file_path: str | None = None,
        status: TheoremStatus | str | None = None,
        with_tactics: bool = True,
    ) -> list[Theorem]:
        """The theorems ``iter_theorems`` streams, as a list.

        Args:
            repository: A ``Repository`` or a ``(url, commit)`` pair; None for every one.
            file_path: Only the theorems of this file (relative to the repository).
            status: Only theorems of this status.
            with_tactics: Read each theorem's traced tactics too.

        Returns:
            The theorems.
        """
        return list(
            self.iter_theorems(
                repository, file_path=file_path, status=status, with_tactics=with_tactics
            )
        )

    def get_sorry_theorems(self, repository: RepositoryLike | None = None) -> list[Theorem]:
        """Theorems whose proof still has a ``sorry`` that no later commit or prover closed.

        Args:
            repository: A ``Repository`` or a ``(url, commit)`` pair; None for every one.

        Returns:
            The open sorry theorems.
        """
        return self.get_theorems(repository, status=TheoremStatus.SORRY)

    def get_premises(
        self, repository: RepositoryLike | None = None, *, file_path: str | None = None
    ) -> list[Premise]:
        """The premises (definitions, lemmas) the stored files define.

        Args:
            repository: A ``Repository`` or a ``(url, commit)`` pair; None for every one.
            file_path: Only the premises of this file.

        Returns:
            The premises.
        """
        with self._access.read() as conn:
            return [] if conn is None else queries.premises_of(conn, repository, file_path)

    # -- proof attempts --------------------------------------------------------------------------

    def record_attempt(self, attempt: ProofAttempt) -> None:
        """Store one attempt of an evaluation run (replacing an earlier record of the same
        run, theorem and attempt), in its own transaction.

        Args:
            attempt: The attempt; its ``run`` names the run.
        """
        with self.transaction() as conn:
            attempts.record_attempt(conn, attempt)

    def get_attempts(self, run: str | None = None) -> list[ProofAttempt]:
        """The stored attempts of a run.

        Args:
            run: The run's name; None for every run.

        Returns:
            The attempts, in the order they finished.
        """
        with self._access.read() as conn:
            return [] if conn is None else list(attempts.iter_attempts(conn, run))

    def finished_attempts(
        self, run: str, *, retry_errors: bool = True
    ) -> set[tuple[TheoremKey, str, int]]:
        """What a rerun of ``run`` skips.

        Args:
            run: The run's name.
            retry_errors: Count attempts that ended in an error as unfinished (tried again).

        Returns:
            (theorem key, commit, attempt number) of the run's finished attempts.
        """
        with self._access.read() as conn:
            if conn is None:
                return set()
            return attempts.finished_attempts(conn, run, retry_errors=retry_errors)

    def run_progress(self, run: str) -> attempts.RunProgress:
        """What ``run`` has finished (errors are tried again) and which theorems it solved:
        how every proving command decides what a rerun skips.

        Args:
            run: The run's name.

        Returns:
            A ``RunProgress`` (empty for a run with no attempts).
        """
        with self._access.read() as conn:
            return attempts.RunProgress() if conn is None else attempts.run_progress(conn, run)

    # -- curriculum ----------------------------------------------------------------------------

    def curriculum(self) -> Curriculum:
        """The curriculum: which repositories to train on first.

        Returns:
            A pair: the repositories easiest first, each with its theorems' difficulty counts;
            and the thresholds (log difficulty at the 33rd and 67th percentiles), None when no
            theorem has proof steps.
        """
        with self._access.read() as conn:
            return ([], None) if conn is None else curriculum(conn)

    def sort_repositories_by_difficulty(self) -> list[Repository]:
        """The repositories in curriculum order.

        Returns:
            The repositories ordered by their share of easy theorems, highest first.
        """
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
        ``keep_splits``); new theorems are placed by the seeded rules with the settings that
        made the stored splits, or ``split_config`` (default ``SplitConfig()``) where there are
        none; a ``split_config`` that differs from the stored settings is reported in the
        report's warnings. Where a theorem is in several commits of a repository, the commit
        added last wins; copies in other repositories (same file, name and position) are
        written once and share one split. Settings that would leave train (or a split asked
        for) empty are refused before anything is stored. ``progress(done, total)`` is called
        with 0 once the splits are stored, then as theorems are written; the dataset appears in
        ``output_path`` only when it is complete.

        Args:
            repositories: ``Repository`` records or ``(url, commit)`` pairs.
            output_path: The dataset's directory; only the dataset's own entries in it are
                replaced, each written aside and renamed into place.
            split_config: How new theorems are split; None keeps the stored settings.
            progress: Called as ``progress(done, total)`` while theorems are written.

        Returns:
            An ``ExportReport``: the directory, the number of theorems, each scheme's split
            sizes, how many theorems were given a split now, and warnings.

        Raises:
            LeanloopError: No repositories are given, one is not stored, or the split
                settings would leave a split empty.
        """
        # the splits are stored first, in a short write; the files are written from a read, so
        # that they only ever hold stored splits and other writers need not wait for them
        with without_cycle_collection():
            with self.transaction() as conn:
                resolved = queries.resolve_repositories(conn, list(repositories))
                if not resolved:
                    raise LeanloopError("no repositories to export")
                assignment = assign_splits(conn, [i for i, _ in resolved], split_config)
            if progress is not None:  # the splits are stored: the writing starts
                progress(0, len(assignment.exported))
            with self._access.read() as conn:
                assert conn is not None  # the transaction above made the schema
                return export_merged(
                    conn, resolved, Path(output_path), assignment, progress=progress
                )

    def stats(self) -> DatabaseStats:
        """What the database holds.

        Returns:
            Counts per repository and in total (theorems, tactics, premises, open sorries,
            ...), with each repository's difficulty profile.
        """
        with self._access.read() as conn:
            return collect_stats(conn, self.description)
