"""Every command of ``leanloop``, enumerated from the app (a new command fails here until it is
declared below), given a database file that is not a database and an input that does not exist:
one line on stderr naming the file, no traceback, a non-zero exit."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import typer

from leanloop.cli.app import app
from tests.helpers import run_cli


def command_names(group=None, prefix: str = "") -> list[str]:
    """``db import``, ``train sft``, ``prove``, ...: every command the app runs."""
    group = group or typer.main.get_command(app)
    names = []
    for name, command in sorted(group.commands.items()):
        if hasattr(command, "commands"):  # a group
            names += command_names(command, f"{prefix}{name} ")
        else:
            names.append(f"{prefix}{name}")
    return names


def takes_db(name: str) -> bool:
    command = typer.main.get_command(app)
    for part in name.split():
        command = command.commands[part]
    return any("--db" in p.opts for p in command.params)


@dataclass(frozen=True)
class Drive:
    """How to reach a command's database and its input: arguments (``{bad}``: the file that is
    not a database, ``{missing}``: a path that does not exist, ``{db}``: a fresh database,
    ``{stored}``: a database holding the real LeanDojo sample, ``{sample}``: that sample,
    ``{project}``: a Lean project directory, ``{tmp}``: a scratch directory), or the reason
    the case does not apply."""

    bad_db: tuple[str, ...] | str
    missing: tuple[str, ...] | str


#: Commands whose answer about a damaged or missing database is a report, not an error.
DIAGNOSES = frozenset({"db check"})

TRAIN = Drive(("--model", "{tmp}", "--db", "{bad}"), ("--config", "{missing}", "--db", "{stored}"))
EVALUATE = Drive(
    ("--checkpoint", "{tmp}", "--db", "{bad}", "--data", "{tmp}/data"),
    ("--checkpoint", "{missing}", "--dataset", "{sample}"),
)
DRIVES = {
    "data download": Drive(
        "no database: it downloads a published dataset",
        ("leandojo-benchmark-4", "--archive", "{missing}", "--dest", "{tmp}/datasets"),
    ),
    "db export": Drive(("{tmp}/out", "--db", "{bad}"), ("{tmp}/out", "--db", "{missing}")),
    "db import": Drive(("{sample}", "--db", "{bad}"), ("{missing}", "--db", "{db}")),
    "db reset-splits": Drive(("--db", "{bad}"), ("--db", "{missing}")),
    "db sorries": Drive(("--db", "{bad}"), ("--db", "{missing}")),
    "db check": Drive(
        "it diagnoses databases: a damaged one is its report (tests/test_database_check.py)",
        "a missing database is its report too (tests/test_database_check.py)",
    ),
    "db stats": Drive(("--db", "{bad}"), ("--db", "{missing}")),
    "doctor": Drive("no database: it looks for Lean tooling", ("{missing}",)),
    "evaluate progress": EVALUATE,
    "evaluate retrieval": EVALUATE,
    "evaluate tactics": EVALUATE,
    "prove": Drive(
        ("--dataset", "{sample}", "--replay", "--db", "{bad}"),
        ("--dataset", "{missing}", "--replay", "--db", "{db}"),
    ),
    "run": Drive(
        ("--data", "{sample}", "--out", "{tmp}/run", "--db", "{bad}", "--quick"),
        ("--data", "{missing}", "--out", "{tmp}/run", "--db", "{db}"),
    ),
    "serve": Drive("no database: it serves models", ("--config", "{missing}")),
    "trace": Drive(("{project}", "--db", "{bad}"), ("{missing}", "--db", "{db}")),
    "train grpo": TRAIN,
    "train progress": TRAIN,
    "train retrieval": TRAIN,
    "train sft": TRAIN,
}

#: More forms of a command, each with its own input: (command, arguments).
MORE_MISSING = {
    "prove --project": (
        "prove",
        ("--project", "{missing}", "--generator", "hf:{tmp}", "--db", "{db}"),
    ),
    "prove --benchmark": ("prove", ("--benchmark", "{missing}.jsonl", "--generator", "recorded")),
    "prove --generator hf:": (
        "prove",
        ("--dataset", "{sample}", "--generator", "hf:{missing}", "--replay", "--db", "{db}"),
    ),
    "db export --config": ("db export", ("--config", "{missing}")),
}


def test_every_command_is_declared():
    names = command_names()
    assert {"db import", "trace", "prove", "train sft"} <= set(names)  # the walk finds them
    undeclared = sorted(set(names) - set(DRIVES))
    assert not undeclared, f"declare how to drive {undeclared} in DRIVES"
    assert not set(DRIVES) - set(names), "DRIVES names a command that is gone"
    for name, drive in DRIVES.items():  # a command with --db is given a bad one
        assert isinstance(drive.bad_db, tuple) == takes_db(name) or name in DIAGNOSES, name


@pytest.fixture(scope="module")
def stored(tmp_path_factory, sample_dir) -> str:
    """A database holding the real sample (the commands below fail before they write)."""
    from leanloop.database import DynamicDatabase

    path = tmp_path_factory.mktemp("stored") / "sample.db"
    DynamicDatabase(path).import_dataset(sample_dir)
    return str(path)


@pytest.fixture
def places(tmp_path, sample_dir, stored):
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"these are notes, not a database\n")
    project = tmp_path / "proj"
    project.mkdir()
    (project / "lakefile.lean").write_text("package p\n")
    (project / "lean-toolchain").write_text("leanprover/lean4:v4.9.0\n")
    return {
        "bad": str(bad),
        "missing": str(tmp_path / "missing"),
        "db": str(tmp_path / "fresh.db"),
        "stored": stored,
        "sample": str(sample_dir),
        "project": str(project),
        "tmp": str(tmp_path),
    }


def run(capsys, name: str, arguments: tuple[str, ...], places: dict) -> tuple[int, str, str]:
    argv = [*name.split(), *(a.format(**places) for a in arguments)]
    return run_cli(capsys, *argv)


def assert_one_line(code: int, err: str, *words: str) -> None:
    assert code not in (0, 130) and "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for word in words:
        assert word in lines[0], f"{word!r} not in {lines[0]!r}"
    print(lines[0])  # shown with -s: what each command says


@pytest.mark.parametrize("name", command_names())
def test_a_file_that_is_not_a_database_is_one_line(name, capsys, places):
    drive = DRIVES[name]
    if isinstance(drive.bad_db, str):
        pytest.skip(drive.bad_db)
    before = Path(places["bad"]).read_bytes()
    code, _, err = run(capsys, name, drive.bad_db, places)
    assert_one_line(code, err, places["bad"], "not a database")
    assert Path(places["bad"]).read_bytes() == before  # left as it was


@pytest.mark.parametrize("name", command_names())
def test_a_missing_input_is_one_line(name, capsys, places):
    drive = DRIVES[name]
    if isinstance(drive.missing, str):
        pytest.skip(drive.missing)
    code, _, err = run(capsys, name, drive.missing, places)
    assert_one_line(code, err, places["missing"])


@pytest.mark.parametrize("form", sorted(MORE_MISSING))
def test_a_missing_input_of_each_form_is_one_line(form, capsys, places):
    name, arguments = MORE_MISSING[form]
    code, _, err = run(capsys, name, arguments, places)
    assert_one_line(code, err, places["missing"])


URL = "https://github.com/leanprover-community/mathlib4"
NEEDS_LEAN = {
    "trace URL": ("trace", URL, "--db", "{db}"),
    "trace URL --commit": ("trace", URL, "--commit", "abc123", "--db", "{db}"),
    "prove --project URL": ("prove", "--project", URL, "--generator", "hf:{tmp}", "--db", "{db}"),
    "prove --benchmark --mode search": (
        "prove",
        "--benchmark",
        "{fixtures}/minif2f/minif2f_valid_few_shot.jsonl",
        "--split",
        "valid",
        "--generator",
        "recorded",
        "--mode",
        "search",
        "--project",
        "{tmp}",
        "--db",
        "{db}",
    ),
}


@pytest.mark.parametrize("form", sorted(NEEDS_LEAN))
def test_without_lean_a_command_says_so_before_cloning_or_storing(
    form, capsys, places, fixtures, tmp_path, monkeypatch
):
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))  # no elan, lake, lean (nor git)
    monkeypatch.setenv("ELAN_HOME", str(tmp_path / "elan"))
    monkeypatch.setenv("LEANLOOP_CACHE_DIR", str(tmp_path / "cache"))
    clones = []
    monkeypatch.setattr(
        "leanloop.lean.project._from_url", lambda *args, **kwargs: clones.append(args)
    )
    argv = [a.format(fixtures=fixtures, **places) for a in NEEDS_LEAN[form]]
    code, _, err = run_cli(capsys, *argv)
    assert_one_line(code, err, "Lean", "elan")
    assert "not installed" in err or "no Lean toolchain" in err
    assert "GITHUB_TOKEN" not in err and "leanloop doctor" in err
    assert clones == [] and not (tmp_path / "cache").exists()  # nothing cloned
    assert not (tmp_path / "fresh.db").exists()  # nothing stored
