"""Turn a database URL or path into a SQLAlchemy engine, and database failures into clear errors."""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Iterator
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import URL, Connection, Engine, make_url

from leanloop.errors import DatabaseError


def resolve_url(target: str | Path) -> URL:
    """A SQLAlchemy URL for ``target``: a URL as given, or a path to a SQLite file.

    ``postgresql://`` without a driver uses psycopg (version 3) when psycopg2 is not installed.
    """
    text = str(target)
    if "://" not in text:
        path = Path(text).expanduser().absolute()
        return URL.create("sqlite", database=str(path))  # a path as it is: '?' and '%' too
    try:
        url = make_url(text)
    except sa.exc.ArgumentError:
        raise DatabaseError(f"not a database URL: {text!r}") from None
    if url.drivername in ("postgresql", "postgres"):
        driver = "psycopg2" if importlib.util.find_spec("psycopg2") else "psycopg"
        url = url.set(drivername=f"postgresql+{driver}")
    return url


def describe(url: URL) -> str:
    return url.render_as_string(hide_password=True)


def create(url: URL) -> Engine:
    kwargs: dict = {"future": True}
    if url.get_backend_name() == "sqlite":
        kwargs["connect_args"] = {"timeout": 60}
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
    if url.get_backend_name() == "sqlite":
        sa.event.listen(engine, "connect", _sqlite_on_connect)
        sa.event.listen(engine, "begin", _sqlite_on_begin)
    return engine


def _sqlite_on_connect(dbapi_connection, _record) -> None:
    # Let SQLAlchemy issue BEGIN itself so a transaction covers reads and writes alike.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def _sqlite_on_begin(connection) -> None:
    # A write transaction takes SQLite's write lock at once, so a second writer waits for it
    # (up to the busy timeout) instead of failing when its read lock cannot be upgraded.
    immediate = connection.get_execution_options().get(WRITE_OPTION)
    connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


#: Execution option marking a connection's transaction as one that writes.
WRITE_OPTION = "leanloop_write"


@contextlib.contextmanager
def write_transaction(engine: Engine) -> Iterator[Connection]:
    """A transaction that writes: committed when the block ends, rolled back if it raises."""
    with engine.connect() as conn:
        conn.execution_options(**{WRITE_OPTION: True})
        with conn.begin():
            yield conn


@contextlib.contextmanager
def translate_errors(url: URL) -> Iterator[None]:
    """Re-raise driver-level failures as ``DatabaseError`` with one line of explanation."""
    try:
        yield
    except sa.exc.OperationalError as exc:
        reason = str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc)
        raise DatabaseError(f"database {describe(url)} is not usable: {reason}") from None
    except sa.exc.DatabaseError as exc:
        reason = str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc)
        raise DatabaseError(f"database {describe(url)}: {reason}") from None
