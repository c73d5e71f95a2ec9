"""Write repositories and their files, premises and theorems into the tables, in batches, inside
one transaction the caller owns."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from leanloop.data.jsonstream import unstorable_text
from leanloop.data.records import MAX_POSITION, Repository, SourceFile, Theorem, TheoremStatus
from leanloop.database.raw import insert_many, iter_rows
from leanloop.database.rows import (
    PREMISE_COLUMNS,
    REF_COLUMNS,
    TACTIC_COLUMNS,
    THEOREM_COLUMNS,
    dumps_list,
    key_digest,
    premise_row,
    tactic_rows,
    theorem_row,
)
from leanloop.database.schema import (
    files,
    premises,
    repositories,
    split_assignments,
    tactic_premises,
    tactics,
    theorems,
)
from leanloop.errors import LeanloopError


@dataclass
class IngestCounts:
    """What a write added (things already present are counted as skipped)."""

    repositories_added: int = 0
    theorems_added: int = 0
    theorems_skipped: int = 0
    tactics_added: int = 0
    files_added: int = 0
    premises_added: int = 0
    sorries_resolved: int = 0
    split_labels_added: int = 0
    split_labels_conflicting: int = 0
    #: theorems found again (same repository, commit, file and name) with other content: the
    #: first occurrence is kept
    duplicates_conflicting: int = 0
    duplicate_examples: list[str] = field(default_factory=list)
    repositories: list[Repository] = field(default_factory=list)


def unstorable(record: Theorem | SourceFile) -> tuple[str, str] | None:
    """(field, problem) for a record holding text or a number no database column can hold."""
    data = record.model_dump(mode="python")
    found = unstorable_text(data)
    if found is not None:
        return found
    stack: list[tuple[str, object]] = [("", data)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, bool):
            continue
        if isinstance(value, int) and not 0 <= value <= MAX_POSITION:
            return path, f"is {value}, outside the range a database column holds"
        if isinstance(value, dict):
            stack.extend((f"{path}.{k}" if path else str(k), v) for k, v in value.items())
        elif isinstance(value, list | tuple):
            stack.extend((f"{path}.{i}", v) for i, v in enumerate(value))
    return None


def describe(record: Theorem | SourceFile) -> str:
    if isinstance(record, Theorem):
        return f"theorem {record.full_name} ({record.file_path})"
    return f"file {record.path}"


@contextlib.contextmanager
def explain_unstorable(batch: list[Theorem] | list[SourceFile]) -> Iterator[None]:
    """Turn a failure to store a batch into an error naming the record and field at fault
    (records made in code skip the checks reading a file does)."""
    try:
        yield
    except (UnicodeEncodeError, OverflowError, sa.exc.DataError, sa.exc.StatementError) as exc:
        for record in batch:
            found = unstorable(record)
            if found is not None:
                raise LeanloopError(
                    f"cannot store {describe(record)}: field '{found[0]}' {found[1]}"
                ) from exc
        raise


class Ingest:
    """Adds content to the database through ``conn``; idempotent: present items are skipped."""

    def __init__(self, conn: Connection, *, batch_size: int = 1000) -> None:
        self.conn = conn
        self.batch_size = batch_size
        self.counts = IngestCounts()
        self._repo_ids: dict[tuple[str, str], int] = {}

    def repository_id(self, repo: Repository, *, source: str | None = None) -> int:
        """The id of ``repo`` (by canonical url and commit), adding the repository if new."""
        ident = (repo.identity, repo.commit)
        if ident in self._repo_ids:
            return self._repo_ids[ident]
        found = self.conn.execute(
            sa.select(repositories.c.id, repositories.c.lean_version).where(
                repositories.c.identity == repo.identity, repositories.c.commit == repo.commit
            )
        ).first()
        if found is not None:
            repo_id = found.id
            if found.lean_version is None and repo.lean_version:
                self.conn.execute(
                    repositories.update()
                    .where(repositories.c.id == repo_id)
                    .values(lean_version=repo.lean_version)
                )
        else:
            inserted = self.conn.execute(
                repositories.insert().values(
                    url=repo.url,
                    identity=repo.identity,
                    commit=repo.commit,
                    name=repo.name,
                    lean_version=repo.lean_version,
                    added_at=datetime.now(UTC),
                    source=source,
                )
            ).inserted_primary_key
            assert inserted is not None  # one row inserted
            repo_id = inserted[0]
            self.counts.repositories_added += 1
            self.counts.repositories.append(repo)
        self._repo_ids[ident] = repo_id
        return repo_id

    def add_theorems(self, repo_id: int, batch: list[Theorem]) -> None:
        """Insert the theorems of ``batch`` not yet stored for this repository."""
        if not batch:
            return
        with explain_unstorable(batch):
            self._add_theorems(repo_id, batch)

    def _add_theorems(self, repo_id: int, batch: list[Theorem]) -> None:
        unique: dict[str, Theorem] = {}
        for theorem in batch:
            unique.setdefault(key_digest(theorem.key), theorem)
        present = self._theorem_ids(repo_id, list(unique))
        fresh = {k: t for k, t in unique.items() if k not in present}
        self.counts.theorems_skipped += len(batch) - len(fresh)
        if not fresh:
            return
        insert_many(
            self.conn,
            theorems,
            THEOREM_COLUMNS,
            [theorem_row(repo_id, key, theorem) for key, theorem in fresh.items()],
        )
        ids = self._theorem_ids(repo_id, list(fresh))
        steps: list[tuple] = []
        refs: list[tuple] = []
        for key, theorem in fresh.items():
            tactic_rows(ids[key], theorem, steps, refs)
        insert_many(self.conn, tactics, TACTIC_COLUMNS, steps)
        insert_many(self.conn, tactic_premises, REF_COLUMNS, refs)
        self.counts.theorems_added += len(fresh)
        self.counts.tactics_added += len(steps)

    def _theorem_ids(self, repo_id: int, keys: list[str]) -> dict[str, int]:
        """Key -> id of this repository's stored theorems among ``keys``."""
        query = sa.select(theorems.c.key, theorems.c.id).where(
            theorems.c.repository_id == repo_id, theorems.c.key.in_(keys)
        )
        return {row.key: row.id for row in iter_rows(self.conn, query)}

    def add_source_files(self, repo_id: int, batch: list[SourceFile]) -> None:
        """Insert files (with their premises) of ``batch`` whose path is new for the repository;
        a file known only as traced becomes part of the corpus."""
        if not batch:
            return
        with explain_unstorable(batch):
            self._add_source_files(repo_id, batch)

    def _add_source_files(self, repo_id: int, batch: list[SourceFile]) -> None:
        paths = [f.path for f in batch]
        present = {
            row.path: row
            for row in self.conn.execute(
                sa.select(files.c.id, files.c.path, files.c.in_corpus).where(
                    files.c.repository_id == repo_id, files.c.path.in_(paths)
                )
            )
        }
        fresh: list[dict[str, Any]] = []
        premise_rows: list[tuple] = []
        seen: set[str] = set()
        for source in batch:
            if source.path in seen:
                continue
            seen.add(source.path)
            row = present.get(source.path)
            if row is not None and row.in_corpus:
                continue
            if row is not None:
                self.conn.execute(
                    files.update()
                    .where(files.c.id == row.id)
                    .values(in_corpus=1, imports=dumps_list(source.imports))
                )
            else:
                fresh.append(
                    {
                        "repository_id": repo_id,
                        "path": source.path,
                        "imports": dumps_list(source.imports),
                        "in_corpus": 1,
                        "traced": 0,
                    }
                )
            premise_rows.extend(
                premise_row(repo_id, i, premise) for i, premise in enumerate(source.premises)
            )
        if fresh:
            self.conn.execute(files.insert(), fresh)
        insert_many(self.conn, premises, PREMISE_COLUMNS, premise_rows)
        self.counts.files_added += len(fresh)
        self.counts.premises_added += len(premise_rows)

    def mark_traced(self, repo_id: int, paths: Iterable[str]) -> None:
        """Record that these files of the repository were traced (adding unknown ones)."""
        paths = list(dict.fromkeys(paths))
        if not paths:
            return
        known = set(
            self.conn.execute(
                sa.select(files.c.path).where(
                    files.c.repository_id == repo_id, files.c.path.in_(paths)
                )
            ).scalars()
        )
        if known:
            self.conn.execute(
                files.update()
                .where(files.c.repository_id == repo_id, files.c.path.in_(list(known)))
                .values(traced=1)
            )
        fresh = [
            {"repository_id": repo_id, "path": p, "imports": "[]", "in_corpus": 0, "traced": 1}
            for p in paths
            if p not in known
        ]
        if fresh:
            self.conn.execute(files.insert(), fresh)

    def add_split_labels(self, labels: Mapping[tuple[str, str], str]) -> None:
        """Record ``(theorem key digest, scheme) -> split``; an existing assignment always wins."""
        if not labels:
            return
        keys = list({k for k, _ in labels})
        present: dict[tuple[str, str], str] = {}
        for start in range(0, len(keys), 5000):
            chunk = keys[start : start + 5000]
            for row in self.conn.execute(
                sa.select(split_assignments).where(split_assignments.c.theorem_key.in_(chunk))
            ):
                present[row.theorem_key, row.scheme] = row.split
        fresh = []
        for (key, scheme), split in labels.items():
            old = present.get((key, scheme))
            if old is None:
                fresh.append({"theorem_key": key, "scheme": scheme, "split": split})
            elif old != split:
                self.counts.split_labels_conflicting += 1
        if fresh:
            self.conn.execute(split_assignments.insert(), fresh)
        self.counts.split_labels_added += len(fresh)

    def resolve_sorries(self, repo_id: int) -> None:
        """Mark open sorries of other commits of this repository as proved when this commit
        proves the same theorem; the proof recorded is this commit's tactic script."""
        identity = self.conn.execute(
            sa.select(repositories.c.identity).where(repositories.c.id == repo_id)
        ).scalar_one()
        old, new = theorems.alias("old"), theorems.alias("new")
        matches = self.conn.execute(
            sa.select(old.c.id, new.c.id.label("new_id"))
            .select_from(
                old.join(new, old.c.key == new.c.key).join(
                    repositories, repositories.c.id == old.c.repository_id
                )
            )
            .where(
                repositories.c.identity == identity,
                old.c.repository_id != repo_id,
                old.c.status == TheoremStatus.SORRY.value,
                new.c.repository_id == repo_id,
                new.c.status == TheoremStatus.PROVEN.value,
            )
        ).all()
        for old_id, new_id in matches:
            script = (
                self.conn.execute(
                    sa.select(tactics.c.tactic)
                    .where(tactics.c.theorem_id == new_id)
                    .order_by(tactics.c.idx)
                )
                .scalars()
                .all()
            )
            self.conn.execute(
                theorems.update()
                .where(theorems.c.id == old_id)
                .values(
                    status=TheoremStatus.SORRY_PROVED.value,
                    proof="\n".join(script) if script else None,
                )
            )
        self.counts.sorries_resolved += len(matches)
