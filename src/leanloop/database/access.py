"""Open a leanloop database lazily and hand out read views and write transactions; the tables
are created by the first write, and opening or reading never changes anything."""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import URL, Connection, Engine

import leanloop.database.engine as engines
from leanloop.database.schema import (
    ADDED_IN,
    COLUMNS_ADDED_IN,
    LEANLOOP_TABLES,
    SCHEMA_VERSION,
    meta,
    metadata,
)
from leanloop.errors import DatabaseError

log = logging.getLogger(__name__)


class DatabaseAccess:
    """The engine of one database URL, and the checks that it is a leanloop database."""

    def __init__(self, url: URL) -> None:
        self.url = url
        self._engine: Engine | None = None
        self._schema_ready_in: object = None  # the file (inode) or server found ready

    @property
    def description(self) -> str:
        return engines.describe(self.url)

    @property
    def sqlite_path(self) -> Path | None:
        if self.url.get_backend_name() != "sqlite" or self.url.database in (None, "", ":memory:"):
            return None
        database = self.url.database
        if self.url.query.get("uri") == "true" and database.startswith("file:"):
            database = database.removeprefix("file:")  # sqlite:///file:PATH?mode=ro&uri=true
        return Path(database)

    def engine(self) -> Engine:
        if self._engine is None:
            self._engine = engines.create(self.url)
        return self._engine

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None

    def _schema_state(self, conn: Connection) -> str:
        """'ready', 'empty' (no tables yet), or 'older' (a version that this one upgrades by
        adding tables); raises for a foreign database or a newer version."""
        where = conn.info.get("inode", "server")
        if self._schema_ready_in == where:
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
            if found is not None and found.isdigit() and 1 <= int(found) < SCHEMA_VERSION:
                return "older"
            raise DatabaseError(
                f"{self.description} has schema version {found}, this leanloop uses "
                f"{SCHEMA_VERSION}",
                hint="open it with the leanloop version that created it (or a newer one)",
            )
        self._schema_ready_in = where
        return "ready"

    def _upgrade(self, conn: Connection) -> None:
        """Add the tables and columns the versions after the database's own added (nothing
        else changes)."""
        found = int(
            conn.execute(sa.select(meta.c.value).where(meta.c.key == "schema_version")).scalar_one()
        )
        for version in range(found + 1, SCHEMA_VERSION + 1):
            metadata.create_all(conn, tables=list(ADDED_IN.get(version, ())))
            for table, names in COLUMNS_ADDED_IN.get(version, ()):
                present = {c["name"] for c in sa.inspect(conn).get_columns(table.name)}
                for name in names:
                    if name not in present:  # a table made by this version has them already
                        column = table.c[name]
                        kind = column.type.compile(dialect=conn.dialect)
                        conn.execute(
                            sa.text(f'ALTER TABLE {table.name} ADD COLUMN "{name}" {kind}')
                        )
        conn.execute(
            meta.update().where(meta.c.key == "schema_version").values(value=str(SCHEMA_VERSION))
        )
        log.info(
            "%s: schema upgraded from version %d to %d", self.description, found, SCHEMA_VERSION
        )

    @contextlib.contextmanager
    def read(self) -> Iterator[Connection | None]:
        """A read-only view; None when there is no database yet (nothing is created)."""
        path = self.sqlite_path
        if path is not None and not path.exists():
            yield None
            return
        with engines.translate_errors(self.url), self.engine().connect() as conn:
            if self._schema_state(conn) == "empty":
                yield None
            else:
                yield conn

    @contextlib.contextmanager
    def write(self) -> Iterator[Connection]:
        """One write transaction: committed when the block ends, rolled back if it raises.

        A SQLite file this call creates is removed again if the transaction fails, unless
        another process wrote to it meanwhile.
        """
        path = self.sqlite_path
        created = _create_new_file(path) if path is not None else None
        try:
            with engines.translate_errors(self.url), self._write_transaction() as conn:
                state = self._schema_state(conn)
                if state == "older":
                    self._upgrade(conn)
                    self._schema_ready_in = conn.info.get("inode", "server")
                elif state == "empty":
                    metadata.create_all(conn)
                    conn.execute(
                        meta.insert().values(key="schema_version", value=str(SCHEMA_VERSION))
                    )
                    self._schema_ready_in = conn.info.get("inode", "server")
                yield conn
        except BaseException:
            self._schema_ready_in = None
            if path is not None and created is not None:  # created only with a path
                self.close()
                _remove_if_untouched(path, created)
            raise

    @contextlib.contextmanager
    def _write_transaction(self) -> Iterator[Connection]:
        """A write transaction on the file the path names now: a connection that still has a
        file open that another process removed or replaced is dropped and opened again."""
        path = self.sqlite_path
        for attempt in range(3):
            with engines.write_transaction(self.engine()) as conn:
                if path is None or _same_file(path, conn.info.get("inode")):
                    yield conn
                    return
            if attempt == 2:
                raise DatabaseError(
                    f"{path} keeps being removed or replaced by another process",
                    hint="make sure only leanloop writes to this file",
                )
            self.close()  # the file was replaced: reconnect to the one the path names now


def _same_file(path: Path, inode: int | None) -> bool:
    try:
        return inode is not None and path.stat().st_ino == inode
    except OSError:
        return False


def _create_new_file(path: Path) -> int | None:
    """Create the SQLite file if it does not exist yet; its inode when this call created it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
    except FileExistsError:
        return None
    try:
        return os.fstat(fd).st_ino
    finally:
        os.close(fd)


def _remove_if_untouched(path: Path, inode: int) -> None:
    """Remove a database file this process created if it still holds no table: nobody else
    wrote to it (every write creates the tables first). The check and the removal happen
    under SQLite's exclusive lock."""
    try:
        conn = sqlite3.connect(path, timeout=5, isolation_level=None)
    except sqlite3.Error:
        return
    try:
        conn.execute("BEGIN EXCLUSIVE")
        tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        if tables == 0 and _same_file(path, inode):
            for leftover in (path, *(path.with_name(path.name + s) for s in ("-wal", "-shm"))):
                leftover.unlink(missing_ok=True)
        conn.execute("ROLLBACK")
    except (sqlite3.Error, OSError):
        pass  # locked or in use by someone else: it is theirs now
    finally:
        conn.close()
