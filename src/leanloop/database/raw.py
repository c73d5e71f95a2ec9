"""The hot statements of import and export, run through the database driver directly: bulk
inserts, and selects streamed as light named tuples. Statements are still built and compiled
by SQLAlchemy for the connection's dialect; only the per-row work of its result layer is
skipped. Driver errors become SQLAlchemy's, so the usual translation into one-line errors
applies."""

from __future__ import annotations

import collections
import contextlib
import itertools
from collections.abc import Iterator, Sequence
from functools import lru_cache
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.sql.compiler import SQLCompiler

_cursor_names = itertools.count()


def _driver(conn: Connection):
    return conn.connection.dbapi_connection


@contextlib.contextmanager
def _driver_errors(conn: Connection, statement: str) -> Iterator[None]:
    dbapi = conn.dialect.loaded_dbapi
    try:
        yield
    except dbapi.Error as exc:
        raise sa.exc.DBAPIError.instance(statement, None, exc, dbapi.Error) from exc


def _compile(conn: Connection, statement: sa.ClauseElement) -> tuple[str, Any]:
    """SQL text and parameters of ``statement`` in the driver's parameter style."""
    compiled = cast(  # a statement's compiler is a SQLCompiler
        SQLCompiler,
        statement.compile(dialect=conn.dialect, compile_kwargs={"render_postcompile": True}),
    )
    params = compiled.construct_params()
    if compiled.positional:  # then positiontup is set
        return str(compiled), tuple(params[name] for name in compiled.positiontup or ())
    return str(compiled), params


@lru_cache(maxsize=64)
def _row_type(names: tuple[str, ...]):
    return collections.namedtuple("Row", names, rename=True)


def iter_rows(
    conn: Connection, statement: sa.ClauseElement, batch: int = 5000, *, named: bool = True
) -> Iterator[Any]:
    """The rows of a select as named tuples (plain tuples, in the select's column order, when
    not ``named``), fetched ``batch`` at a time (with a server-side cursor on PostgreSQL, so
    memory holds one batch)."""
    sql, params = _compile(conn, statement)
    raw = _driver(conn)
    if conn.dialect.name == "postgresql":
        cursor = raw.cursor(name=f"leanloop_{next(_cursor_names)}")
    else:
        cursor = raw.cursor()
    try:
        with _driver_errors(conn, sql):
            cursor.execute(sql, params)
            rows = cursor.fetchmany(batch)
        if not rows:
            return
        make = _row_type(tuple(column[0] for column in cursor.description))._make
        while rows:
            yield from map(make, rows) if named else rows
            with _driver_errors(conn, sql):
                rows = cursor.fetchmany(batch)
    finally:
        cursor.close()


def insert_many(
    conn: Connection, table: sa.Table, columns: Sequence[str], rows: Sequence[Sequence[Any]]
) -> None:
    """Insert ``rows`` (tuples of values in the order of ``columns``) in one batch."""
    if not rows:
        return
    statement = table.insert().values({name: sa.bindparam(name) for name in columns})
    compiled = statement.compile(dialect=conn.dialect)
    sql = str(compiled)
    if compiled.positional:
        order = [columns.index(name) for name in compiled.positiontup or ()]
        params: Any = (
            rows
            if order == list(range(len(columns)))
            else [tuple(row[i] for i in order) for row in rows]
        )
    else:
        params = [dict(zip(columns, row, strict=True)) for row in rows]
    cursor = _driver(conn).cursor()
    try:
        with _driver_errors(conn, sql):
            cursor.executemany(sql, params)
    finally:
        cursor.close()
