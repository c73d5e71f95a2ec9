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
from leanloop.database.leandojo_v2 import metadata_repositories
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
    ingest: Ingest | None = None,
) -> IngestCounts:
    """Add a repository at a commit with its theorems, corpus files and traced files (counted
    in ``ingest``'s counts when given, to add several repositories in one count)."""
    ingest = ingest or Ingest(conn, batch_size=batch_size)
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
    """The repositories ``metadata.json`` lists (with their Lean versions), the theorems of a
    LeanDojo-format dataset, each in the repository and commit it names, then its corpus and
    traced files, each to the repository it belongs to (see ``CorpusOwners``); with
    ``keep_splits`` its split labels are stored."""
    source = f"leandojo:{dataset.path}"
    ingest = Ingest(conn, batch_size=batch_size)
    listed = metadata_repositories(dataset.metadata, dataset.metadata_path)
    owners = CorpusOwners()
    seen: dict[tuple[TheoremKey, str], int] = {}  # theorem at a commit -> hash of its content
    pending: dict[int, list[Theorem]] = defaultdict(list)
    repo_ids: dict[tuple[str, str], int] = {}
    for repository in listed:  # first, so that the stored record has its Lean version
        repo_ids[repository.identity, repository.commit] = ingest.repository_id(
            repository, source=source
        )
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
            repo_id = repo_ids.get((key.repository, theorem.commit))
            if repo_id is None:
                repo_id = ingest.repository_id(
                    Repository(url=theorem.url, commit=theorem.commit), source=source
                )
                repo_ids[key.repository, theorem.commit] = repo_id
            owners.add_theorem(repo_id, theorem)
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
        owners.default = _dataset_repository(dataset, ingest, owners, source, listed)
        _import_corpus(dataset, ingest, owners, batch_size)
    for rid in repo_ids.values():  # every commit read, also several of one repository
        ingest.resolve_sorries(rid)
    return ingest.counts


def _import_corpus(
    dataset: LeanDojoDataset, ingest: Ingest, owners: CorpusOwners, batch_size: int
) -> None:
    chunks: dict[int, list[SourceFile]] = defaultdict(list)
    for source_file in dataset.iter_source_files():
        rid = owners.owner(source_file.path)
        chunks[rid].append(source_file)
        if len(chunks[rid]) >= batch_size:
            ingest.add_source_files(rid, chunks.pop(rid))
    for rid, chunk in chunks.items():
        ingest.add_source_files(rid, chunk)
    traced: dict[int, list[str]] = defaultdict(list)
    for traced_path in dataset.iter_traced_files():
        traced[owners.owner(traced_path)].append(traced_path)
    for rid, paths in traced.items():
        ingest.mark_traced(rid, paths)


class CorpusOwners:
    """Which repository a corpus or traced file of a merged export belongs to (the corpus does
    not say): the repository whose theorems are in that file; else the one repository whose
    proofs use premises defined there; else the one repository with theorems under the same
    top-level directory (``Mathlib/``, or ``.lake/packages/NAME/`` for a dependency); else
    ``default`` (the repository ``metadata.json`` names first)."""

    def __init__(self) -> None:
        self.default: int | None = None
        self._files: dict[str, int] = {}
        self._definitions: dict[str, set[int]] = defaultdict(set)
        self._tops: dict[str, set[int]] = defaultdict(set)

    def add_theorem(self, repo_id: int, theorem: Theorem) -> None:
        """Learn from a theorem of repository ``repo_id``: its file, the files defining the
        premises its proof uses, and its file's top-level directory."""
        self._files.setdefault(theorem.file_path, repo_id)
        top = _top_directory(theorem.file_path)
        if top:
            self._tops[top].add(repo_id)
        for step in theorem.traced_tactics:
            for premise in step.premises:
                self._definitions[premise.def_path].add(repo_id)

    @property
    def known(self) -> bool:
        """Whether any theorem was seen."""
        return bool(self._files)

    def first(self) -> int:
        """The repository of the first theorem seen."""
        return next(iter(self._files.values()))

    def owner(self, path: str) -> int:
        """The repository ``path`` belongs to."""
        found = self._files.get(path)
        if found is not None:
            return found
        for candidates in (self._definitions.get(path), self._tops.get(_top_directory(path))):
            if candidates is not None and len(candidates) == 1:
                return next(iter(candidates))
        assert self.default is not None  # set before the corpus is read
        return self.default


def _top_directory(path: str) -> str:
    parts = path.split("/")
    if len(parts) > 3 and parts[0] == ".lake" and parts[1] == "packages":
        return "/".join(parts[:3])
    return parts[0] if len(parts) > 1 else ""


def _content_hash(raw: object) -> int:
    return hash(orjson.dumps(raw))


def _dataset_repository(
    dataset: LeanDojoDataset,
    ingest: Ingest,
    owners: CorpusOwners,
    source: str,
    listed: list[Repository],
) -> int:
    repo = dataset.repository()
    if repo is None and listed:
        repo = listed[0]  # LeanDojo-v2 merges the corpus keeping a path's first repository
    if repo is not None:
        return ingest.repository_id(repo, source=source)
    if owners.known:
        return owners.first()
    raise DataFormatError(
        dataset.path,
        "cannot tell which repository the corpus belongs to",
        hint="add metadata.json with from_repo {url, commit}, or import it with its theorems",
    )
