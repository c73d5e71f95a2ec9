"""Turn a database URL or path into a SQLAlchemy engine, take the write lock one writer at a time
(saying what is waiting and why), and turn database failures into clear one-line errors."""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import sqlalchemy as sa
import tenacity
from sqlalchemy.engine import URL, Connection, Engine, make_url

from leanloop.errors import DatabaseError

log = logging.getLogger(__name__)

#: How long a writer waits for another one to finish before giving up, and how often it says so.
LOCK_TIMEOUT_S = 600.0
LOCK_FIRST_NOTICE_S = 2.0
LOCK_NOTICE_EVERY_S = 10.0
#: The PostgreSQL advisory lock every leanloop writer takes (an arbitrary 63-bit constant).
PG_WRITE_LOCK = 0x1EA7_100B
#: SQLite's own busy timeout for statements (a reader waiting on a checkpoint, for example).
_SQLITE_BUSY_MS = 60_000

_SUPPORTED = ("sqlite", "postgresql")


def resolve_url(target: str | os.PathLike[str]) -> URL:
    """A SQLAlchemy URL for ``target``: a URL as given, or a path to a SQLite file (``~`` is
    expanded). ``postgresql://`` without a driver uses psycopg (version 3) when psycopg2 is not
    installed. Databases other than SQLite and PostgreSQL are refused."""
    text = os.fspath(target) if isinstance(target, os.PathLike) else str(target)
    if not text.strip():
        raise DatabaseError(
            "the database is an empty string", hint="give a SQLite file path or a database URL"
        )
    if "://" not in text:
        path = Path(text).expanduser().absolute()
        if path.suffix == ".json":
            from leanloop.database.leandojo_v2 import is_leandojo_v2_database

            if is_leandojo_v2_database(path):
                raise DatabaseError(
                    f"{path} is a LeanDojo-v2 database file, not a database leanloop stores in",
                    hint="DynamicDatabase(json_path=...) or 'leanloop db import' imports it into "
                    "a SQLite or PostgreSQL database",
                )
        return URL.create("sqlite", database=str(path))  # a path as it is: '?' and '%' too
    try:
        url = make_url(text)
    except (sa.exc.ArgumentError, ValueError) as exc:
        raise DatabaseError(
            f"not a database URL: {_hide_password(text)!r} ({exc})",
            hint="e.g. postgresql://user@host:5432/name, or a SQLite file path",
        ) from None
    backend = url.get_backend_name()
    if backend not in _SUPPORTED:
        raise DatabaseError(
            f"{describe(url)}: leanloop stores its data in SQLite or PostgreSQL, not {backend}",
            hint="give a SQLite file path or a postgresql://user@host/name URL",
        )
    if url.drivername in ("postgresql", "postgres"):
        driver = "psycopg2" if importlib.util.find_spec("psycopg2") else "psycopg"
        url = url.set(drivername=f"postgresql+{driver}")
    if backend == "sqlite" and url.database and url.database != ":memory:":
        url = url.set(database=str(Path(url.database).expanduser()))
    return url


def _hide_password(text: str) -> str:
    scheme, sep, rest = text.partition("://")
    credentials, at, host = rest.rpartition("@")
    if not at or ":" not in credentials:
        return text
    return f"{scheme}{sep}{credentials.split(':', 1)[0]}:***@{host}"


def describe(url: URL) -> str:
    return url.render_as_string(hide_password=True)


def is_sqlite(url: URL) -> bool:
    return url.get_backend_name() == "sqlite"


def create(url: URL) -> Engine:
    kwargs: dict = {"future": True}
    if is_sqlite(url):
        kwargs["connect_args"] = {"timeout": _SQLITE_BUSY_MS / 1000}
        if url.database not in (None, "", ":memory:"):
            # a connection per use, closed after it: the last one to close folds the
            # write-ahead log back into the file, which is then all there is on disk
            kwargs["poolclass"] = sa.pool.NullPool
    else:
        kwargs["pool_pre_ping"] = True
    try:
        engine = sa.create_engine(url, **kwargs)
    except ModuleNotFoundError as exc:
        raise DatabaseError(
            f"cannot use {describe(url)}: the database driver {exc.name!r} is not installed",
            hint="pip install 'leanloop[postgres]'",
        ) from None
    except sa.exc.ArgumentError as exc:
        raise DatabaseError(f"cannot use {describe(url)}: {exc}") from None
    if is_sqlite(url):
        sa.event.listen(engine, "connect", _sqlite_on_connect)
        sa.event.listen(engine, "begin", _sqlite_on_begin)
    return engine


def _sqlite_on_connect(dbapi_connection, record) -> None:
    # Let SQLAlchemy issue BEGIN itself so a transaction covers reads and writes alike.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    path = cursor.execute("PRAGMA database_list").fetchone()[2]
    cursor.close()
    if path:
        with contextlib.suppress(OSError):
            record.info["inode"] = os.stat(path).st_ino  # which file this connection has open


def _sqlite_on_begin(connection) -> None:
    if not connection.get_execution_options().get(WRITE_OPTION):
        connection.exec_driver_sql("BEGIN")
        return
    # A write transaction takes SQLite's write lock at once, so a second writer waits for it
    # instead of failing when its read lock cannot be upgraded; waiting is said, not silent.
    raw = connection.connection.dbapi_connection

    def begin_immediate() -> None:
        if raw.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
            # write-ahead logging: readers go on while a writer works (kept in the file; the
            # switch itself needs the file to itself, so it may wait too)
            raw.execute("PRAGMA journal_mode=WAL")
        raw.execute("BEGIN IMMEDIATE")

    # each try waits up to 250 ms inside SQLite, so the tries follow each other directly
    raw.execute("PRAGMA busy_timeout=250")
    try:
        _LockWait(connection).until(
            begin_immediate, retry=tenacity.retry_if_exception(_locked), pause=0.0
        )
    finally:
        raw.execute(f"PRAGMA busy_timeout={_SQLITE_BUSY_MS}")


def _locked(exc: BaseException) -> bool:
    """sqlite3.OperationalError: database is locked (or busy): another writer has the file."""
    return "locked" in str(exc) or "busy" in str(exc)


class _LockWait:
    """Tries to take a database's write lock until it is free (tenacity), logging a notice
    now and then while another writer has it, and gives up with an error that says why
    after ``LOCK_TIMEOUT_S``."""

    def __init__(self, connection) -> None:
        self.what = describe(connection.engine.url)
        self.noticed = 0.0

    def until(self, attempt: Callable[[], Any], *, retry: tenacity.retry_base, pause: float):
        """Call ``attempt`` until ``retry`` no longer asks for another try, ``pause`` seconds
        apart; an exception ``retry`` does not ask to retry is raised as it is.

        Returns:
            What the last call of ``attempt`` returned.

        Raises:
            DatabaseError: The lock stayed taken for ``LOCK_TIMEOUT_S`` seconds.
        """
        retrying = tenacity.Retrying(
            retry=retry,
            stop=tenacity.stop_after_delay(LOCK_TIMEOUT_S),
            wait=tenacity.wait_fixed(pause),
            before_sleep=self._still_waiting,
            retry_error_callback=self._give_up,
        )
        started = time.monotonic()
        result = retrying(attempt)
        if self.noticed:
            log.warning(
                "the other writer finished; writing to %s (waited %.0f s)",
                self.what,
                time.monotonic() - started,
            )
        return result

    def _still_waiting(self, state: tenacity.RetryCallState) -> None:
        waited = state.seconds_since_start or 0.0
        due = LOCK_NOTICE_EVERY_S if self.noticed else LOCK_FIRST_NOTICE_S
        if waited - self.noticed >= due:
            self.noticed = waited
            log.warning(
                "waiting for %s: another process is writing to it (%.0f s so far; leanloop "
                "writes one transaction at a time)",
                self.what,
                waited,
            )

    def _give_up(self, state: tenacity.RetryCallState) -> None:
        raise DatabaseError(
            f"database {self.what} stayed locked for {state.seconds_since_start or 0.0:.0f} s: "
            "another process is writing to it (an import, an export or a trace)",
            hint="wait until the other leanloop command finishes, or stop it, then run "
            "this one again",
        )


def _pg_take_write_lock(conn: Connection) -> None:
    """Serialise PostgreSQL writers (schema creation included) with one advisory lock held
    until the transaction ends, as SQLite's write lock does."""
    take = sa.text("SELECT pg_try_advisory_xact_lock(:key)")
    _LockWait(conn).until(
        lambda: conn.execute(take, {"key": PG_WRITE_LOCK}).scalar(),
        retry=tenacity.retry_if_not_result(bool),
        pause=0.25,
    )


#: Execution option marking a connection's transaction as one that writes.
WRITE_OPTION = "leanloop_write"


@contextlib.contextmanager
def write_transaction(engine: Engine) -> Iterator[Connection]:
    """A transaction that writes, holding the database's write lock: committed when the block
    ends, rolled back if it raises."""
    with engine.connect() as conn:
        conn.execution_options(**{WRITE_OPTION: True})
        with conn.begin():
            if not is_sqlite(engine.url):
                _pg_take_write_lock(conn)
            yield conn


def _reason(exc: sa.exc.DBAPIError) -> str:
    return str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc)


_READ_ONLY = ("readonly database", "read-only transaction", "read only")


def damaged(url: URL, reason: str) -> DatabaseError:
    """The error for a SQLite file whose pages are damaged: what SQLite said, and the command
    that says what is wrong and how to recover."""
    target = url.database if is_sqlite(url) and url.database else describe(url)
    return DatabaseError(
        f"database {describe(url)} is damaged (SQLite: {reason})",
        hint=f"'leanloop db check --db {target}' says what is wrong and how to recover",
    )


@contextlib.contextmanager
def translate_errors(url: URL) -> Iterator[None]:
    """Re-raise driver-level failures as ``DatabaseError`` with one line of explanation."""
    try:
        yield
    except sa.exc.DBAPIError as exc:
        reason = _reason(exc)
        if any(marker in reason.lower() for marker in _READ_ONLY):
            raise DatabaseError(
                f"database {describe(url)} is read-only ({reason})",
                hint="this command writes to the database (an export stores each theorem's "
                "split there, so that it never changes); use a copy you can write to",
            ) from None
        if is_sqlite(url) and "malformed" in reason.lower():
            raise damaged(url, reason) from None
        if isinstance(exc, sa.exc.OperationalError):
            raise DatabaseError(f"database {describe(url)} is not usable: {reason}") from None
        raise DatabaseError(f"database {describe(url)}: {reason}") from None
    except sqlite3.DatabaseError as exc:  # raised where leanloop talks to SQLite itself
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        if "malformed" in reason.lower():
            raise damaged(url, reason) from None
        raise DatabaseError(
            f"database {describe(url)} is not usable: {reason}",
            hint="give a leanloop database, or a path where a new one is to be made",
        ) from None
