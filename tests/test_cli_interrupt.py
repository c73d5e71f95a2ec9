"""Ctrl-C: a command that is stopped says in one line what it had stored and that running it
again goes on, exits with status 130 and prints no traceback; and running it again does what
the line says.

``db import`` and ``db export`` run in a subprocess that gets a real SIGINT: the subprocess
holds the command at a chosen point (after a batch of theorems is written inside the import's
transaction; after 50 theorems are written aside by the export) and says so on stderr, which is
when the signal is sent. Proving and tracing are stopped in-process (KeyboardInterrupt raised
where the signal would land) to check their lines and what a rerun does."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from leanloop.database import DynamicDatabase
from tests.helpers import run_cli

#: Runs ``leanloop ARGV`` with ``CLASS.METHOD`` pausing after its ``AFTER``-th call until a
#: signal arrives (saying "paused" on stderr first).
HOLD = """
import signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)  # as a terminal gives it, even when
# started where SIGINT is ignored (a background job)
import {module} as where
from leanloop.cli.app import main
original = where.{cls}.{method}
calls = []
def held(*args, **kwargs):
    result = original(*args, **kwargs)
    calls.append(None)
    if len(calls) == {after}:
        print("paused", file=sys.stderr, flush=True)
        time.sleep(120)
    return result
setattr(where.{cls}, "{method}", held)
sys.exit(main(sys.argv[1:]))
"""


def interrupted(argv: list[str], module: str, cls: str, method: str, after: int):
    """Exit status and stderr of ``leanloop ARGV`` stopped by SIGINT where the hold is."""
    code = HOLD.format(module=module, cls=cls, method=method, after=after)
    process = subprocess.Popen(
        [sys.executable, "-c", code, *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        first = process.stderr.readline()
        assert first.strip() == "paused", first + process.stderr.read()
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=120)
    finally:
        process.kill()
    return process.returncode, err


def assert_interrupted(code: int, err: str, *words: str) -> str:
    assert code == 130 and "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("interrupted: "), err
    for word in words:
        assert word in lines[0], f"{word!r} not in {lines[0]!r}"
    return lines[0]


def content(path: Path) -> tuple:
    """What a database holds: repositories, theorems with their steps, split assignments."""
    database = DynamicDatabase(path)
    stats = database.stats().model_dump(exclude={"database"})
    theorems = [t.model_dump(mode="json") for t in database.iter_theorems()]
    return stats, theorems


def test_ctrl_c_during_an_import_leaves_the_database_as_it_was(capsys, sample_dir, tmp_path):
    db = tmp_path / "lean.db"
    code, err = interrupted(
        ["db", "import", str(sample_dir), "--db", str(db)],
        "leanloop.database.ingest",
        "Ingest",
        "add_theorems",
        after=1,  # the theorems are written, the transaction is not committed
    )
    assert_interrupted(code, err, "nothing of", "was stored", "run the same command again")
    assert not db.exists()  # the file this import created is gone again, as the line says

    code, out, _ = run_cli(capsys, "db", "import", str(sample_dir), "--db", str(db))
    assert code == 0 and "177 theorems (0 already present)" in out
    reference = tmp_path / "reference.db"
    assert run_cli(capsys, "db", "import", str(sample_dir), "--db", str(reference))[0] == 0
    assert content(db) == content(reference)


def test_ctrl_c_during_an_export_keeps_the_old_dataset_and_the_splits(capsys, sample_dir, tmp_path):
    db, reference = tmp_path / "lean.db", tmp_path / "reference.db"
    for path in (db, reference):
        assert run_cli(capsys, "db", "import", str(sample_dir), "--db", str(path))[0] == 0
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    code, err = interrupted(
        ["db", "export", str(out), "--db", str(db)],
        "leanloop.data.leandojo.writer",
        "LeanDojoWriter",
        "write_theorem",
        after=50,
    )
    assert_interrupted(
        code, err, "was left as it was", "split assignments were stored", "run the same command"
    )
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]  # no staging left behind

    code, _, err = run_cli(capsys, "db", "export", str(out), "--db", str(db))
    assert code == 0, err
    assert run_cli(capsys, "db", "export", str(tmp_path / "ref"), "--db", str(reference))[0] == 0
    for split in ("random/train.json", "random/test.json", "novel_premises/val.json"):
        again = json.loads((out / split).read_text())
        assert again == json.loads((tmp_path / "ref" / split).read_text()), split
    assert content(db) == content(reference)


def test_ctrl_c_while_proving_says_what_is_stored_and_a_rerun_goes_on(
    capsys, sample_dir, tmp_path, monkeypatch
):
    db = str(tmp_path / "p.db")
    argv = ["prove", "--dataset", str(sample_dir), "--replay", "--db", db, "--limit", "12"]
    argv += ["--out", str(tmp_path / "report")]
    record = DynamicDatabase.record_attempt
    stored = []

    def stop_after_five(self, attempt):
        record(self, attempt)
        stored.append(attempt)
        if len(stored) == 5:
            raise KeyboardInterrupt  # as SIGINT would, right after the fifth was stored

    monkeypatch.setattr(DynamicDatabase, "record_attempt", stop_after_five)
    code, _, err = run_cli(capsys, *argv)
    line = assert_interrupted(code, err.split("\n", 1)[-1], "has 5 attempts stored")
    assert "run the same command again to continue" in line
    assert "recorded:leandojo_benchmark_4/test:replay" in line

    monkeypatch.setattr(DynamicDatabase, "record_attempt", record)
    code, out, _ = run_cli(capsys, *argv)
    assert code == 0 and "5 attempts were already finished in this run (not run again)" in out
    run = DynamicDatabase(db).get_attempts("recorded:leandojo_benchmark_4/test:replay")
    assert len(run) == 12


def test_ctrl_c_while_tracing_says_nothing_is_stored_and_what_is_cached(
    capsys, tmp_path, monkeypatch
):
    project = tmp_path / "proj"
    project.mkdir()
    (project / "lakefile.lean").write_text("package p\n")

    def traced_two_of_five(self, *args, progress=None, **kwargs):
        progress(2, 5)
        raise KeyboardInterrupt

    monkeypatch.setattr(DynamicDatabase, "trace_repository", traced_two_of_five)
    code, _, err = run_cli(capsys, "trace", str(project), "--db", str(tmp_path / "t.db"))
    assert_interrupted(code, err, "nothing was stored in the database", "2 of 5 files", "cached")
    assert not (tmp_path / "t.db").exists()


def test_any_command_stopped_says_so_in_one_line(capsys, sample_dir, tmp_path, monkeypatch):
    db = str(tmp_path / "s.db")
    assert run_cli(capsys, "db", "import", str(sample_dir), "--db", db)[0] == 0

    def stopped(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(DynamicDatabase, "stats", stopped)
    code, out, err = run_cli(capsys, "db", "stats", "--db", db)
    assert code == 130 and err == "interrupted\n" and out == ""
