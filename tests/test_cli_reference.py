"""The command-line reference (docs/cli.md) is written from the ``leanloop`` command: it is the
page the generator writes now (regenerate it with ``python -m leanloop.cli.reference --write
docs/cli.md``), every command and option has help text, and every command has its section."""

from __future__ import annotations

import typer

from leanloop.cli.reference import commands, lacking_help, markdown
from tests.conftest import REPO_ROOT

PAGE = REPO_ROOT / "docs" / "cli.md"


def test_the_page_is_what_the_command_says_now():
    written = PAGE.read_text(encoding="utf-8")
    assert written == markdown(), (
        "docs/cli.md is stale: run 'python -m leanloop.cli.reference --write docs/cli.md'"
    )


def test_every_command_and_option_has_help():
    assert lacking_help(commands()) == []


def test_every_command_has_its_section_with_each_option():
    found = commands()
    paths = {c.path for c in found}
    assert {"leanloop db check", "leanloop serve", "leanloop train sft", "leanloop prove"} <= paths
    page = markdown(found)
    for command in found:
        assert f"\n## `{command.path}`\n" in page
        assert f"(#{command.path.replace(' ', '-')})" in page  # listed at the top, linked
    check = next(c for c in found if c.path == "leanloop db check")
    assert [e.name for e in check.entries] == [
        "--db URL|FILE",
        "--quick / --full",
        "--json / --table",
        "--recover-into FILE",
        "--config FILE",
    ]
    assert "- `--recover-into FILE`: Copy what can still be read" in page


def test_a_command_without_help_is_found_and_text_is_escaped():
    app = typer.Typer(help="A command of two.", rich_markup_mode=None)

    @app.command()
    def first(name: str = typer.Option("x", help="The *name* <of> it [default: x].")) -> None:
        """Say ``hello`` to NAME_1."""

    @app.command()
    def second(count: int = typer.Option(1)) -> None:
        pass

    found = commands(app)
    assert lacking_help(found) == ["leanloop second", "leanloop second --count <int>"]
    page = markdown(found)
    assert "Say `hello` to NAME\\_1." in page
    assert "The \\*name\\* &lt;of&gt; it \\[default: x\\]." in page
