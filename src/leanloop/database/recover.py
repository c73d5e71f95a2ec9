"""Copy what can still be read of a damaged SQLite database into a new one (``leanloop db check
--recover-into FILE``): every row SQLite can read (a range of rows that fails is split until the
unreadable rows are found and left out), keeping only what is whole — a theorem with all of its
tactics, rows whose repository and theorem came along — so that the new database passes the
check. The damaged file is only read. (SQLite's own ``.recover`` needs a sqlite3 program built
with the ``sqlite_dbpage`` table, which many distributions' is not.)"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import sqlalchemy as sa
from sqlalchemy.engine import URL

from leanloop.database.access import DatabaseAccess
from leanloop.database.schema import (
    files,
    premises,
    proof_attempts,
    repositories,
    split_assignments,
    tactic_premises,
    tactics,
    theorems,
)
from leanloop.errors import DatabaseError

#: Rows read per query while nothing fails.
CHUNK = 2000
#: Rows inserted per statement.
BATCH = 1000


@dataclass
class RecoveryReport:
    """What was copied into the new database (rows per table), which tables had rows that
    could not be read, and the theorems left out because some of their tactics were lost."""

    target: Path
    copied: dict[str, int] = field(default_factory=dict)
    unreadable: list[str] = field(default_factory=list)
    incomplete_theorems: int = 0
    orphans: int = 0


class _Reader:
    """The readable rows of the damaged file's tables, in rowid order."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True)
        self.failed: set[str] = set()

    def close(self) -> None:
        self.conn.close()

    def columns(self, table: str) -> list[str]:
        try:
            rows = self.conn.execute(f'PRAGMA table_info("{table}")').fetchall()
        except sqlite3.DatabaseError:
            self.failed.add(table)
            return []
        return [str(row[1]) for row in rows]

    def rows(self, table: str) -> Iterator[dict[str, Any]]:
        names = self.columns(table)
        if not names:
            return
        try:
            low, high = self.conn.execute(
                f'SELECT min(rowid), max(rowid) FROM "{table}"'
            ).fetchone()
        except sqlite3.DatabaseError:
            self.failed.add(table)
            low, high = 0, 2**62
        if low is None:
            return
        select = ", ".join(f'"{name}"' for name in names)
        query = f'SELECT {select} FROM "{table}" WHERE rowid BETWEEN ? AND ? ORDER BY rowid'
        for start in range(low, high + 1, CHUNK):
            for row in self._range(table, query, start, min(start + CHUNK - 1, high)):
                yield dict(zip(names, row, strict=True))

    def _range(self, table: str, query: str, low: int, high: int) -> Iterator[tuple]:
        try:
            found = self.conn.execute(query, (low, high)).fetchall()
        except sqlite3.DatabaseError:
            self.failed.add(table)
            if low < high:  # split until the rows that cannot be read are found
                middle = (low + high) // 2
                yield from self._range(table, query, low, middle)
                yield from self._range(table, query, middle + 1, high)
            return
        yield from found


def recover(source: Path, target: Path) -> RecoveryReport:
    """Copy the readable, whole part of the SQLite database ``source`` into a new database
    ``target`` (which must not exist yet).

    Args:
        source: The damaged database file (only read).
        target: Where the new database goes.

    Returns:
        What was copied and what was left out.

    Raises:
        DatabaseError: ``target`` exists, or ``source`` cannot be opened at all.
    """
    if target.exists():
        raise DatabaseError(f"{target} already exists", hint="name a new file to recover into")
    reader = _Reader(source)
    report = RecoveryReport(target)
    try:
        # what is whole: repositories that can be read, theorems with all of their tactics
        kept_repositories = {row["id"] for row in reader.rows(repositories.name)}
        steps = Counter(row["theorem_id"] for row in reader.rows(tactics.name))
        kept_theorems = set()
        for row in reader.rows(theorems.name):
            if row["repository_id"] not in kept_repositories:
                report.orphans += 1
            elif steps.get(row["id"], 0) != row["num_steps"]:
                report.incomplete_theorems += 1
            else:
                kept_theorems.add(row["id"])
        keep = {
            repositories.name: lambda row: True,
            files.name: lambda row: row["repository_id"] in kept_repositories,
            premises.name: lambda row: row["repository_id"] in kept_repositories,
            theorems.name: lambda row: row["id"] in kept_theorems,
            tactics.name: lambda row: row["theorem_id"] in kept_theorems,
            tactic_premises.name: lambda row: row["theorem_id"] in kept_theorems,
            split_assignments.name: lambda row: True,
            proof_attempts.name: lambda row: True,
        }
        access = DatabaseAccess(URL.create("sqlite", database=str(target)))
        try:
            with access.write() as conn:
                for table in (repositories, files, premises, theorems, tactics, tactic_premises,
                              split_assignments, proof_attempts):  # fmt: skip
                    report.copied[table.name] = _copy(conn, table, reader, keep[table.name])
        finally:
            access.close()
    finally:
        reader.close()
    report.unreadable = sorted(reader.failed)
    return report


def _copy(conn: sa.Connection, table: sa.Table, reader: _Reader, keep: Any) -> int:
    """Insert the rows ``keep`` accepts, as SQLite stored them (the values are not converted:
    a date stays the text SQLite holds)."""
    names = [name for name in reader.columns(table.name) if name in table.c]
    columns = ", ".join(f'"{name}"' for name in names)
    marks = ", ".join("?" for _ in names)
    insert = f'INSERT INTO "{table.name}" ({columns}) VALUES ({marks})'
    copied = 0
    batch: list[tuple[Any, ...]] = []
    for row in reader.rows(table.name):
        if keep(row):
            batch.append(tuple(row[name] for name in names))
        if len(batch) >= BATCH:
            conn.exec_driver_sql(insert, batch)
            copied, batch = copied + len(batch), []
    if batch:
        conn.exec_driver_sql(insert, batch)
        copied += len(batch)
    return copied
