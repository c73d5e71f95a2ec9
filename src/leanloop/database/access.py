"""Open a leanloop database lazily and hand out read views and write transactions; the tables
are created by the first write, and opening or reading never changes anything."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import URL, Connection, Engine

from leanloop.database import engine as engines
from leanloop.database.schema import LEANLOOP_TABLES, SCHEMA_VERSION, meta, metadata
from leanloop.errors import DatabaseError


class DatabaseAccess:
    """The engine of one database URL, and the checks that it is a leanloop database."""

    def __init__(self, url: URL) -> None:
        self.url = url
        self._engine: Engine | None = None
        self._schema_ready = False

    @property
    def description(self) -> str:
        return engines.describe(self.url)

    @property
    def sqlite_path(self) -> Path | None:
        if self.url.get_backend_name() != "sqlite" or self.url.database in (None, "", ":memory:"):
            return None
        return Path(self.url.database)

    def engine(self) -> Engine:
        if self._engine is None:
            self._engine = engines.create(self.url)
        return self._engine

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None

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
        """One write transaction: committed when the block ends, rolled back if it raises."""
        path = self.sqlite_path
        created = False
        if path is not None and not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            created = True
        try:
            with (
                engines.translate_errors(self.url),
                engines.write_transaction(self.engine()) as conn,
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
