"""The ``leanloop`` command line: its command groups, the logging of warnings to stderr, and the
error handling of every command."""

from __future__ import annotations

import functools
import logging
import sys

import typer
from rich.markup import escape

import leanloop.cli.common as common
import leanloop.cli.data_cmd as data_cmd
import leanloop.cli.db_cmd as db_cmd
import leanloop.cli.evaluate_cmd as evaluate_cmd
import leanloop.cli.lean_cmd as lean_cmd
import leanloop.cli.prove_cmd as prove_cmd
import leanloop.cli.run_cmd as run_cmd
import leanloop.cli.serve_cmd as serve_cmd
import leanloop.cli.train_cmd as train_cmd
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
    verbose: bool = typer.Option(
        False,
        "--verbose",
        "-v",
        help="Also show progress notes, and the libraries' warnings and notices that 'run' "
        "otherwise writes to its log.",
    ),
) -> None:
    common.set_verbose(verbose)
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


_error = common.print_error


def _interruptible(command) -> None:
    """Make Ctrl-C in ``command`` (and in every command of a group) an ``Interrupted`` that
    ``main`` reports in one line, instead of typer's silent exit 130."""
    group = getattr(command, "commands", None)  # a group (typer's own click classes)
    if group is not None:
        for sub in group.values():
            _interruptible(sub)
        return
    callback = command.callback
    if callback is None:
        return

    @functools.wraps(callback)
    def run(*args, **kwargs):
        try:
            return callback(*args, **kwargs)
        except KeyboardInterrupt:
            raise common.Interrupted() from None

    command.callback = run


def main(argv: list[str] | None = None) -> int:
    """Run the command line; user errors become one line on stderr and a non-zero exit, Ctrl-C
    one line saying what was stored and exit status 130."""
    command = typer.main.get_command(app)
    _interruptible(command)
    common.remember_invocation(list(sys.argv[1:] if argv is None else argv))
    try:
        command.main(args=argv, prog_name="leanloop", standalone_mode=True)
    except SystemExit as exc:  # usage errors (2), --help and normal ends
        code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
        if code == 130:  # Ctrl-C outside a command's own work (while starting)
            err_console.print("interrupted", highlight=False)
        return code
    except common.Interrupted as exc:
        said = f"interrupted: {exc.note}" if exc.note else "interrupted"
        err_console.print(escape(said), highlight=False, soft_wrap=True)
        return 130
    except LeanloopError as exc:
        _error(exc)
        return 1
    except OSError as exc:  # a path the user gave that cannot be read or written
        where = f" ({exc.filename})" if exc.filename else ""
        _error((exc.strerror or str(exc)) + where)
        return 1
    except KeyboardInterrupt:
        err_console.print("interrupted", highlight=False)
        return 130
    except ModuleNotFoundError as exc:  # an optional part of leanloop that is not installed
        extra = EXTRAS.get((exc.name or "").partition(".")[0])
        if extra is None:
            raise
        _error(
            f"this command needs {exc.name}, which is not installed",
            f"pip install 'leanloop[{extra}]'",
        )
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
