"""What the commands share: consoles, the ``--db`` option, progress bars and output helpers."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

console = Console(soft_wrap=True)
err_console = Console(stderr=True, soft_wrap=True)

DB_OPTION = typer.Option(
    None,
    "--db",
    help="Database URL or SQLite file [default: $LEANLOOP_DB, then a file in the data directory]",
    show_default=False,
)


def open_database(db: str | None, *, must_exist: bool = False):
    """The database named by ``--db`` (or the default); with ``must_exist``, a SQLite file that
    does not exist is an error instead of an empty database."""
    from leanloop.database import DynamicDatabase
    from leanloop.errors import DatabaseError

    database = DynamicDatabase(db)
    path = database.sqlite_path
    if must_exist and path is not None and not path.exists():
        raise DatabaseError(
            f"no database at {path}",
            hint="import data first with 'leanloop db import', or pass --db",
        )
    return database


@contextlib.contextmanager
def progress_bar(description: str, total: int | None = None) -> Iterator:
    """A progress bar on stderr; yields ``update(done, total)``."""
    columns = [SpinnerColumn(), TextColumn("{task.description}")]
    if total is not None:
        columns += [BarColumn(), MofNCompleteColumn()]
    else:
        columns += [TextColumn("{task.completed:,.0f}")]
    columns.append(TimeElapsedColumn())
    with Progress(*columns, console=err_console, disable=not err_console.is_terminal) as bar:
        task = bar.add_task(description, total=total)

        def update(done: int, new_total: int | None = None) -> None:
            if new_total is not None:
                bar.update(task, completed=done, total=new_total)
            else:
                bar.update(task, completed=done)

        yield update


def existing_path(value: str, what: str) -> Path:
    from leanloop.errors import LeanloopError

    path = Path(value).expanduser()
    if not path.exists():
        raise LeanloopError(f"{what} {path}: no such file or directory")
    return path
