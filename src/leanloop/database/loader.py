"""Load records into the database inside the caller's transaction, in batches: a repository's
traced records, or a whole dataset in any format ``data.formats`` reads (a LeanDojo-format one
with its split labels, corpus and traced files)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable

import orjson
from pydantic import BaseModel
from sqlalchemy.engine import Connection

from leanloop.data.formats import DatasetReader
from leanloop.data.leandojo.reader import LeanDojoDataset
from leanloop.data.records import Repository, SourceFile, Theorem, TheoremKey
from leanloop.database.assign import record_split_settings, stored_split_settings
from leanloop.database.ingest import Ingest, IngestCounts, describe, unstorable
from leanloop.database.rows import key_digest
from leanloop.errors import DataFormatError, LeanloopError

Progress = Callable[[int, int | None], None]


class TraceReport(BaseModel):
    """What tracing a project added (``DynamicDatabase.trace_repository``): the counts, the
    files traced (how many from the cache), the files that failed and what was skipped, with why."""

    repository: Repository
    counts: IngestCounts
    files: int
    cached_files: int
    failures: dict[str, str] = {}
    skipped: dict[str, str] = {}


def _batches(items: Iterable, size: int) -> Iterable[list]:
    batch: list = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def add_records(
    conn: Connection,
    repository: Repository,
    theorems: Iterable[Theorem],
    source_files: Iterable[SourceFile],
    traced_files: Iterable[str],
    *,
    source: str | None,
    batch_size: int,
) -> IngestCounts:
    """Add a repository at a commit with its theorems, corpus files and traced files."""
    ingest = Ingest(conn, batch_size=batch_size)
    repo_id = ingest.repository_id(repository, source=source)

    def checked(record):
        """Records made in code have not been through a file reader's checks: check here."""
        if isinstance(record, Theorem) and (
            record.key.repository != repository.identity or record.commit != repository.commit
        ):
            raise LeanloopError(
                f"theorem {record.full_name} belongs to {record.url}@{record.commit}, "
                f"not to {repository.url}@{repository.commit}"
            )
        found = unstorable(record)
        if found is not None:
            raise LeanloopError(f"cannot store {describe(record)}: field '{found[0]}' {found[1]}")
        return record

    for batch in _batches(map(checked, theorems), batch_size):
        ingest.add_theorems(repo_id, batch)
    for batch in _batches(map(checked, source_files), batch_size):
        ingest.add_source_files(repo_id, batch)
    ingest.mark_traced(repo_id, traced_files)
    ingest.resolve_sorries(repo_id)
    return ingest.counts


def import_dataset(
    conn: Connection,
    dataset: DatasetReader,
    *,
    keep_splits: bool,
    progress: Progress | None,
    batch_size: int,
) -> IngestCounts:
    """Add every theorem of ``dataset`` to the repository and commit it names, then its corpus
    files. A LeanDojo-format dataset is read by its items (its theorems may name several
    repositories, it has traced files and split labels); any other format gives one
    ``repository()`` that all its records belong to."""
    if isinstance(dataset, LeanDojoDataset):
        return _import_leandojo(
            conn, dataset, keep_splits=keep_splits, progress=progress, batch_size=batch_size
        )
    repository = dataset.repository()
    if repository is None:
        raise DataFormatError(str(dataset.path), f"a {dataset.format} dataset without a repository")
    theorems: Iterable[Theorem] = dataset.iter_theorems()
    if progress is not None:
        theorems = _reporting(theorems, progress)
    return add_records(
        conn,
        repository,
        theorems,
        dataset.iter_source_files(),
        (),
        source=f"{dataset.format}:{dataset.path}",
        batch_size=batch_size,
    )


def _reporting(theorems: Iterable[Theorem], progress: Progress) -> Iterable[Theorem]:
    for done, theorem in enumerate(theorems, start=1):
        yield theorem
        progress(done, None)


def _import_leandojo(
    conn: Connection,
    dataset: LeanDojoDataset,
    *,
    keep_splits: bool,
    progress: Progress | None,
    batch_size: int,
) -> IngestCounts:
    """The theorems of a LeanDojo-format dataset, each in the repository and commit it names,
    then its corpus and traced files (to the repository of the theorems in the same file, else
    the one ``metadata.json`` names); with ``keep_splits`` its split labels are stored."""
    source = f"leandojo:{dataset.path}"
    ingest = Ingest(conn, batch_size=batch_size)
    seen: dict[tuple[TheoremKey, str], int] = {}  # theorem at a commit -> hash of its content
    pending: dict[int, list[Theorem]] = defaultdict(list)
    repo_of_path: dict[str, int] = {}
    repo_ids: dict[tuple[str, str], int] = {}
    labels: dict[tuple[str, str], str] = {}
    waiting = 0
    items = dataset.iter_theorem_items(dataset.theorem_files(all_schemes=keep_splits))
    for done, item in enumerate(items, start=1):
        key = item.key
        ident = (key, str(item.raw.get("commit"))) if key is not None else None
        if key is not None and ident in seen:  # ident is None just when key is
            if seen[ident] != _content_hash(item.raw):
                ingest.counts.duplicates_conflicting += 1
                if len(ingest.counts.duplicate_examples) < 5:
                    ingest.counts.duplicate_examples.append(
                        f"{key.full_name} ({item.source.path}, item #{item.index})"
                    )
        else:
            theorem = item.parse()
            key = theorem.key
            seen[key, theorem.commit] = _content_hash(item.raw)
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
    stored = stored_split_settings(conn)
    for scheme in sorted({scheme for _, scheme in labels} - set(stored)):
        record_split_settings(conn, scheme, "imported")

    if dataset.corpus_path is not None or dataset.traced_files_path is not None:
        default_repo = _dataset_repository(dataset, ingest, repo_of_path, source)
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


def _content_hash(raw: object) -> int:
    return hash(orjson.dumps(raw))


def _dataset_repository(
    dataset: LeanDojoDataset, ingest: Ingest, repo_of_path: dict[str, int], source: str
) -> int:
    repo = dataset.repository()
    if repo is not None:
        return ingest.repository_id(repo, source=source)
    if repo_of_path:
        return next(iter(repo_of_path.values()))
    raise DataFormatError(
        dataset.path,
        "cannot tell which repository the corpus belongs to",
        hint="add metadata.json with from_repo {url, commit}, or import it with its theorems",
    )
