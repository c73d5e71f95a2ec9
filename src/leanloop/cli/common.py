"""What the commands share: the command-group factory, consoles, the ``--db`` option and its
checks, ``--repo`` selection, configuration files with options on top, progress bars and path
arguments."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from leanloop.errors import LeanloopError

if TYPE_CHECKING:
    from leanloop.configfile import ConfigBase
    from leanloop.data.records import Repository
    from leanloop.database import DynamicDatabase

Config = TypeVar("Config", bound="ConfigBase")

console = Console(soft_wrap=True)
err_console = Console(stderr=True, soft_wrap=True)


def print_error(error: LeanloopError | str, hint: str | None = None) -> None:
    """An error on stderr, one line each: what went wrong and, where there is one, the next
    step; a configuration's problems (``ConfigError``) one line per problem."""
    from leanloop.configfile import ConfigError
    from leanloop.errors import DataFormatError

    if isinstance(error, ConfigError):
        said = [
            (str(DataFormatError(error.source, p.problem, line=p.line, field=p.field)), p.hint)
            for p in error.problems
        ]
    elif isinstance(error, LeanloopError):
        said = [(error.message, error.hint)]
    else:
        said = [(error, hint)]
    for message, next_step in said:
        text = f"{message}; hint: {next_step}" if next_step else message
        err_console.print(f"[bold red]error:[/] {escape(text)}", highlight=False, soft_wrap=True)


def new_app(**kwargs) -> typer.Typer:
    """A command group with plain help texts (brackets such as '[default: ...]' are shown as
    written, not read as terminal markup)."""
    return typer.Typer(
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
        **kwargs,
    )


DB_OPTION = typer.Option(
    None,
    "--db",
    metavar="URL|FILE",
    help="Database URL (postgresql://...) or SQLite file "
    "[default: $LEANLOOP_DB, then leanloop.db in the data directory]",
    show_default=False,
)


def open_database(db: str | None, *, must_exist: bool = False) -> DynamicDatabase:
    """The database named by ``--db`` (or the default), checked to be usable before the
    command does any work; with ``must_exist``, a SQLite file that does not exist is an error
    instead of an empty database. An empty name and an in-memory SQLite database (gone when
    the command ends) are refused."""
    from leanloop.database import DynamicDatabase
    from leanloop.errors import DatabaseError

    check_database_name(db)
    database = DynamicDatabase(db)
    path = database.sqlite_path
    if must_exist and path is not None and not path.exists():
        raise DatabaseError(
            f"no database at {path}",
            hint="import data first with 'leanloop db import', or pass --db",
        )
    database.check()  # a file that is not a database, a server out of reach: said now
    return database


def check_database_name(db: str | None) -> None:
    """Refuse an empty ``--db`` and an in-memory SQLite database (gone when the command ends)."""
    from leanloop.errors import DatabaseError

    if db is None:
        return
    if not db.strip():
        raise DatabaseError("--db is empty", hint="give a SQLite file path or a postgresql:// URL")
    if db.strip().rstrip("/") in ("sqlite:", "sqlite:/", "sqlite://") or ":memory:" in db:
        raise DatabaseError(
            f"--db {db}: an in-memory database would be gone when the command ends",
            hint="give a SQLite file path or a postgresql:// URL",
        )


def select_repositories(database: DynamicDatabase, specs: list[str]) -> list[Repository]:
    """Repositories named by ``--repo URL|NAME[@COMMIT]``, in the order given; all if none."""
    from leanloop.data.records import repository_identity

    known = database.get_repositories()
    if not specs:
        return known
    chosen: list[Repository] = []
    for spec in specs:
        name, _, commit = spec.partition("@")
        matches = [
            r
            for r in known
            if (r.identity == repository_identity(name) or r.name == name)
            and (not commit or r.commit.startswith(commit))
        ]
        if not matches:
            raise LeanloopError(
                f"no repository {spec!r} in the database",
                hint="'leanloop db stats' lists the repositories",
            )
        chosen.extend(m for m in matches if m not in chosen)
    return chosen


def load_config(
    config_class: type[Config], config: Path | None, overrides: dict[str, Any], *, extra: tuple = ()
) -> tuple[Config, dict[str, Any]]:
    """The configuration in the file ``config`` (else the defaults) with the ``overrides`` that
    were given (not None) on top, and the values of the ``extra`` keys the file may hold
    besides the configuration's fields. Errors name the file, or "the options"."""
    from leanloop.configfile import read_config_file

    given = {name: value for name, value in overrides.items() if value is not None}
    if config is None:
        return config_class.from_dict(given, "the options"), {}
    path = user_path(config)
    data = read_config_file(path)
    extras: dict[str, Any] = {}
    if data is None or isinstance(data, dict):
        data = dict(data or {})
        extras = {key: data.pop(key) for key in extra if key in data}
        data.update(given)
    return config_class.from_dict(data, str(path)), extras


@contextlib.contextmanager
def progress_bar(
    description: str, total: int | None = None, *, finishing: str | None = None
) -> Iterator[Callable[..., None]]:
    """A progress bar on stderr (with the time left once the total is known), shown only on a
    terminal; yields ``update(done, total, note)`` (``note`` follows the description).
    ``finishing`` replaces the description when done reaches total (what happens after the
    counted work, e.g. committing)."""
    columns = [
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
    ]
    with Progress(*columns, console=err_console, disable=not err_console.is_terminal) as bar:
        task = bar.add_task(description, total=total)

        def update(done: int, new_total: int | None = None, note: str | None = None) -> None:
            bar.update(task, completed=done, total=new_total)
            if note is not None:
                bar.update(task, description=f"{description} {note}")
            if finishing and new_total is not None and done >= new_total:
                bar.update(task, description=finishing)

        yield update


CONFIG_OPTION = typer.Option(
    None,
    "--config",
    metavar="FILE",
    help="A YAML or JSON file of this command's options (keys are the option names, '_' for "
    "'-'); options given on the command line override it.",
    show_default=False,
)


def command_settings(
    config: Path | None, fields: dict[str, tuple[Any, Any]], given: dict[str, Any]
) -> Any:
    """A command's settings: each field's default, then the value in the ``--config`` file,
    then the value given on the command line (None: not given). ``fields`` maps each name to
    its type and default; a wrong or unknown key in the file is an error naming it."""
    from types import SimpleNamespace

    from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

    from leanloop.configfile import explain, read_config_file
    from leanloop.errors import DataFormatError

    # an option named like a pydantic attribute ('json') is a field with that alias
    definitions: dict[str, Any] = {
        (f"{name}_" if hasattr(BaseModel, name) else name): (kind, Field(default, alias=name))
        for name, (kind, default) in fields.items()
    }
    model = create_model(
        "CommandSettings",
        __config__=ConfigDict(extra="forbid", populate_by_name=True),
        **definitions,
    )
    values: dict[str, Any] = {}
    where: str = "the command line"
    if config is not None:
        path = user_path(config)
        loaded = read_config_file(path) or {}
        if not isinstance(loaded, dict):
            raise DataFormatError(path, "expected a mapping of option names to values")
        values.update({str(k).replace("-", "_"): v for k, v in loaded.items()})
        where = str(path)
    values.update({name: value for name, value in given.items() if value is not None})
    try:
        return SimpleNamespace(**model.model_validate(values).model_dump(by_alias=True))
    except ValidationError as exc:
        raise explain(exc, model, where, values, unknown="option") from None


def user_path(value: str | Path) -> Path:
    """A path the user typed, with ``~`` expanded."""
    return Path(value).expanduser()


def existing_path(value: str | Path, what: str) -> Path:
    path = user_path(value)
    if not path.exists():
        raise LeanloopError(f"{what} {path}: no such file or directory")
    return path


class Interrupted(Exception):
    """Ctrl-C stopped a command; ``note`` says what it had stored and what a re-run does (None:
    the command says nothing more than that it was interrupted)."""

    def __init__(self, note: str | None = None) -> None:
        super().__init__(note or "interrupted")
        self.note = note


@contextlib.contextmanager
def on_interrupt(note: Callable[[], str]) -> Iterator[None]:
    """Ctrl-C in the block ends the command with ``note()``: one line saying what was stored
    and what running the command again does (said only after checking what it does)."""
    try:
        yield
    except KeyboardInterrupt:
        try:
            said = note()
        except Exception:  # what was stored cannot be told now: say only that it stopped
            said = None
        raise Interrupted(said) from None


_INVOCATION: list[str] = []
_VERBOSE = [False]


def set_verbose(on: bool) -> None:
    """Record whether ``-v/--verbose`` was given (commands that keep the libraries' messages
    off the console show them then)."""
    _VERBOSE[0] = on


def verbose() -> bool:
    """Whether ``-v/--verbose`` was given."""
    return _VERBOSE[0]


def remember_invocation(argv: list[str]) -> None:
    """The arguments ``leanloop`` was started with (what ``--nproc`` starts again)."""
    _INVOCATION[:] = argv


def invocation() -> list[str]:
    return list(_INVOCATION)
