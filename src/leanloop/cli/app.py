"""The ``leanloop`` command line: its command groups, the logging of warnings to stderr, and the
error handling of every command."""

from __future__ import annotations

import logging
import sys

import typer
from rich.markup import escape

from leanloop.cli import (
    common,
    data_cmd,
    db_cmd,
    evaluate_cmd,
    lean_cmd,
    prove_cmd,
    run_cmd,
    serve_cmd,
    train_cmd,
)
from leanloop.cli.common import err_console, new_app
from leanloop.errors import LeanloopError

app = new_app(
    name="leanloop",
    help="AI-assisted theorem proving in Lean 4: trace, remember, train, prove, serve.",
)
app.add_typer(db_cmd.app, name="db")
app.add_typer(data_cmd.app, name="data")
app.add_typer(train_cmd.app, name="train")
app.add_typer(evaluate_cmd.app, name="evaluate")
app.command("run")(run_cmd.run)
app.command("doctor")(lean_cmd.doctor)
app.command("trace")(lean_cmd.trace)
app.command("prove")(prove_cmd.prove)
app.command("serve")(serve_cmd.serve)


def _print_version(value: bool) -> None:
    if value:
        from leanloop import __version__

        typer.echo(f"leanloop {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False,
        "--version",
        help="Print the version and exit.",
        callback=_print_version,
        is_eager=True,
    ),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Also show progress notes."),
) -> None:
    _configure_logging(logging.INFO if verbose else logging.WARNING)


class _ConsoleHandler(logging.Handler):
    """Log records of leanloop and the libraries it drives, one line each on stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        label = "warning: " if record.levelno >= logging.WARNING else ""
        err_console.print(f"{label}{escape(record.getMessage())}", highlight=False)


def _configure_logging(level: int) -> None:
    root = logging.getLogger("leanloop")
    root.handlers = [h for h in root.handlers if not isinstance(h, _ConsoleHandler)]
    root.addHandler(_ConsoleHandler())
    root.setLevel(level)


#: The extra of leanloop that installs each optional library a command may need.
EXTRAS = {
    **dict.fromkeys(("uvicorn", "fastapi", "starlette", "httpx"), "serve"),
    **dict.fromkeys(("openai", "anthropic", "google"), "serve"),
    **dict.fromkeys(
        ("torch", "transformers", "trl", "peft", "lightning", "datasets", "accelerate"), "train"
    ),
    **dict.fromkeys(("gguf", "rank_bm25", "matplotlib", "numpy"), "train"),
    "ray": "dist",
    "psycopg": "postgres",
}


def main(argv: list[str] | None = None) -> int:
    """Run the command line; user errors become one line on stderr and a non-zero exit."""
    command = typer.main.get_command(app)
    common.remember_invocation(list(sys.argv[1:] if argv is None else argv))
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
    except ModuleNotFoundError as exc:  # an optional part of leanloop that is not installed
        extra = EXTRAS.get((exc.name or "").partition(".")[0])
        if extra is None:
            raise
        err_console.print(
            f"[bold red]error:[/] this command needs {exc.name}, which is not installed",
            highlight=False,
        )
        err_console.print(escape(f"  hint: pip install 'leanloop[{extra}]'"), highlight=False)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
