"""The command-line reference (``docs/cli.md``), written from the ``leanloop`` command itself:
every command with its help and every argument and option as ``--help`` gives them, so that the
page never says other than the code. ``python -m leanloop.cli.reference --write docs/cli.md``
writes it; the tests fail when the page is stale or a command or option has no help."""

from __future__ import annotations

import argparse
import inspect
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer

#: The page's opening: what it is, and how it is kept.
HEADER = """\
# Command-line reference

<!-- Written by 'python -m leanloop.cli.reference --write docs/cli.md' from the leanloop
command itself; tests/test_cli_reference.py fails when this page is stale. Do not edit. -->

Every command of `leanloop` with its arguments and options, as `leanloop COMMAND --help` gives
them. `python -m leanloop` is the same program. Errors are one line each on stderr (which file,
line and field is wrong, and what to do) with a non-zero exit status; Ctrl-C exits with status
130. Most commands take `--config FILE`, a YAML or JSON file of their options (the keys are the
option names, `_` for `-`); options given on the command line override it. Where a command
takes `--db`, it is a SQLite file or a `postgresql://` URL; without it, `$LEANLOOP_DB`, then
`leanloop.db` in the data directory (`$LEANLOOP_DATA_DIR`). The
[getting-started guide](getting-started.md) shows the main commands at work.
"""


@dataclass(frozen=True)
class Entry:
    """One argument or option: how it is written, its help as ``--help`` shows it (with its
    default), and whether it has help of its own."""

    name: str
    help: str | None
    documented: bool


@dataclass(frozen=True)
class Command:
    """One command (or group of commands): its full name, help, usage line and parameters."""

    path: str
    help: str | None
    usage: str
    entries: list[Entry]
    group: bool


def commands(app: typer.Typer | None = None) -> list[Command]:
    """Every command of the ``leanloop`` command (hidden ones left out), groups before their
    commands, in the order ``--help`` lists them."""
    if app is None:
        from leanloop.cli.app import app as leanloop_app

        app = leanloop_app
    root = typer.main.get_command(app)
    return list(_walk(root, root.context_class(root, info_name="leanloop"), "leanloop"))


def _walk(command: Any, ctx: Any, path: str) -> Iterator[Command]:
    entries = []
    for param in command.params:
        if getattr(param, "hidden", False):
            continue
        record = param.get_help_record(ctx)
        own = (getattr(param, "help", None) or "").strip()
        name, text = record if record else (param.human_readable_name, own)
        entries.append(Entry(name, text or own or None, bool(own)))
    group = getattr(command, "commands", None) is not None
    usage = " ".join(command.collect_usage_pieces(ctx))
    yield Command(path, command.help, f"{path} {usage}", entries, group)
    if group:
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is None or sub.hidden:
                continue
            yield from _walk(
                sub, sub.context_class(sub, info_name=name, parent=ctx), f"{path} {name}"
            )


def lacking_help(found: list[Command]) -> list[str]:
    """The commands, arguments and options that have no help text."""
    missing = [c.path for c in found if not (c.help or "").strip()]
    for command in found:
        missing += [f"{command.path} {e.name}" for e in command.entries if not e.documented]
    return missing


def markdown(found: list[Command] | None = None) -> str:
    """The reference page."""
    found = commands() if found is None else found
    lines = [HEADER, "## Commands", ""]
    for command in found:
        depth = command.path.count(" ") - 1
        anchor = _anchor(command.path)
        summary = _first_sentence(command.help)
        lines.append(f"{'    ' * depth}- [`{command.path}`](#{anchor}): {summary}")
    for command in found:
        lines += ["", f"## `{command.path}`", ""]
        lines += [_prose(paragraph) for paragraph in _paragraphs(command.help)]
        lines += ["", "```text", command.usage, "```"]
        if command.entries:
            lines.append("")
            for entry in command.entries:
                lines.append(f"- `{entry.name}`: {_prose(entry.help or '')}")
    return "\n".join(lines).rstrip() + "\n"


def _anchor(path: str) -> str:
    """The anchor of a command's heading (the table of contents' slug of its text)."""
    return path.replace(" ", "-")


def _paragraphs(text: str | None) -> list[str]:
    """The paragraphs of a help text, each on one line (separated by empty lines)."""
    cleaned = inspect.cleandoc(text or "")
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", cleaned) if p.strip()]
    return [item for p in paragraphs for item in (p, "")][:-1]


def _first_sentence(text: str | None) -> str:
    """What a help text says first: up to its first '.', ':' or ';' outside parentheses."""
    first = " ".join((text or "").split())
    depth = 0
    for index, char in enumerate(first):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0 and char in ".:;" and first[index + 1 : index + 2] in ("", " "):
            return _prose(first[:index])
    return _prose(first)


_MARKDOWN = str.maketrans({c: f"\\{c}" for c in "\\*_[]#|"} | {"<": "&lt;", ">": "&gt;"})


def _prose(text: str) -> str:
    """A help text as Markdown: ``code`` (reStructuredText's or Markdown's) as code, the rest
    with Markdown's own characters escaped."""
    parts = re.split(r"``?([^`]+)``?", text)
    return "".join(
        f"`{part}`" if index % 2 else part.translate(_MARKDOWN) for index, part in enumerate(parts)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m leanloop.cli.reference",
        description="Write the command-line reference (Markdown) from the leanloop command.",
    )
    parser.add_argument("--write", metavar="FILE", help="Write it to FILE (default: stdout).")
    args = parser.parse_args(argv)
    text = markdown()
    if args.write:
        from leanloop.atomic import write_text_atomic

        write_text_atomic(Path(args.write), text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
