"""The ``leanloop`` command line: its command groups and the error handling of every command."""

from __future__ import annotations

import sys

import typer
from rich.markup import escape

from leanloop.cli import data_cmd, db_cmd, lean_cmd, run_cmd
from leanloop.cli.common import err_console
from leanloop.errors import LeanloopError

app = typer.Typer(
    name="leanloop",
    help="AI-assisted theorem proving in Lean 4: trace, remember, train, prove, serve.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(db_cmd.app, name="db")
app.add_typer(data_cmd.app, name="data")
app.command("run")(run_cmd.run)
app.command("doctor")(lean_cmd.doctor)
app.command("trace")(lean_cmd.trace)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", help="Print the version and exit."),
) -> None:
    if version:
        from leanloop import __version__

        typer.echo(f"leanloop {__version__}")
        raise typer.Exit()


def main(argv: list[str] | None = None) -> int:
    """Run the command line; user errors become one line on stderr and a non-zero exit."""
    command = typer.main.get_command(app)
    try:
        command.main(args=argv, prog_name="leanloop", standalone_mode=True)
    except SystemExit as exc:  # usage errors (2), --help and normal ends
        return exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
    except LeanloopError as exc:
        err_console.print(f"[bold red]error:[/] {escape(exc.message)}", highlight=False)
        if exc.hint:
            err_console.print(f"  hint: {escape(exc.hint)}", highlight=False)
        return 1
    except OSError as exc:  # a path the user gave that cannot be read or written
        where = f" ({exc.filename})" if exc.filename else ""
        err_console.print(
            f"[bold red]error:[/] {escape((exc.strerror or str(exc)) + where)}", highlight=False
        )
        return 1
    except KeyboardInterrupt:
        err_console.print("interrupted", highlight=False)
        return 130
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
