"""Several writers and readers on one database: writers take turns (on SQLite and on
PostgreSQL, with real processes), a waiting writer says why, readers are not blocked by a
writer, and a failed first import never removes a file someone else wrote to."""

from __future__ import annotations

import logging
import sqlite3
import subprocess
import sys
import threading

import pytest

from leanloop.data.records import AttemptStatus
from leanloop.database import DynamicDatabase
from leanloop.database import engine as engines
from leanloop.database.access import DatabaseAccess
from leanloop.errors import DatabaseError, DataFormatError
from tests.helpers import attempt, renamed, sample_theorems, write_dataset

WRITER = """
import sys
from leanloop.database import DynamicDatabase
db = DynamicDatabase(sys.argv[1])
for path in sys.argv[2:]:
    if path.startswith("export:"):
        db.export_merged_data(db.get_repositories(), path.removeprefix("export:"))
    else:
        db.import_leandojo(path)
"""


def _datasets(sample_dir, tmp_path, writer: str, count: int) -> list[str]:
    theorems = sample_theorems(sample_dir)[:40]
    paths = []
    for batch in range(count):
        url = f"https://example.org/{writer}{batch}"
        copies = [renamed(t, f"_{writer}{batch}", url=url, commit="0" * 40) for t in theorems]
        root = write_dataset(tmp_path / f"{writer}{batch}", {"random/test": copies})
        paths.append(str(root / "random" / "test.json"))
    return paths


def test_concurrent_imports_and_exports_take_turns(db_url, sample_dir, tmp_path):
    """Two processes import and export at once, from an empty database (so both also race to
    create the tables): both succeed and everything arrives."""
    work = {
        writer: [
            *_datasets(sample_dir, tmp_path, writer, 4),
            f"export:{tmp_path / f'export-{writer}'}",
            *_datasets(sample_dir, tmp_path, writer + "x", 2),
            f"export:{tmp_path / f'export-{writer}2'}",
        ]
        for writer in ("a", "b")
    }
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, db_url, *work[writer]],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for writer in ("a", "b")
    ]
    for run in runs:
        _, err = run.communicate(timeout=300)
        assert run.returncode == 0, err.strip().splitlines()[-3:]
    database = DynamicDatabase(db_url)
    assert len(database.get_repositories()) == 12
    assert database.stats().theorems == 12 * 40
    for writer in ("a", "b"):
        assert (tmp_path / f"export-{writer}2" / "metadata.json").is_file()


def test_a_waiting_writer_says_why_and_gives_up_with_a_reason(
    db_url, sample_dir, monkeypatch, caplog
):
    DynamicDatabase(db_url).import_leandojo(sample_dir)
    monkeypatch.setattr(engines, "LOCK_FIRST_NOTICE_S", 0.2)
    monkeypatch.setattr(engines, "LOCK_TIMEOUT_S", 1.5)
    holder = DynamicDatabase(db_url)
    with (
        holder.transaction(),
        caplog.at_level(logging.WARNING),
        pytest.raises(DatabaseError) as err,
    ):
        DynamicDatabase(db_url).reset_splits()
    assert "stayed locked" in str(err.value) and "another process is writing" in str(err.value)
    assert any("another process is writing" in r.getMessage() for r in caplog.records)
    holder.close()


def test_a_waiting_writer_goes_on_when_the_lock_is_free(db_url, sample_dir, monkeypatch):
    DynamicDatabase(db_url).import_leandojo(sample_dir)
    monkeypatch.setattr(engines, "LOCK_FIRST_NOTICE_S", 0.1)
    release = threading.Event()
    holder = DynamicDatabase(db_url)

    def hold():
        with holder.transaction():
            release.wait(10)

    thread = threading.Thread(target=hold)
    thread.start()
    threading.Timer(0.8, release.set).start()
    assert DynamicDatabase(db_url).reset_splits() == 0  # waited, then wrote
    thread.join()


def test_writers_need_not_wait_while_an_export_writes_its_files(
    db_url, sample_dir, tmp_path, monkeypatch
):
    DynamicDatabase(db_url).import_leandojo(sample_dir)
    monkeypatch.setattr(engines, "LOCK_TIMEOUT_S", 1.5)
    exporter, prover = DynamicDatabase(db_url), DynamicDatabase(db_url)
    theorem = sample_theorems(sample_dir)[0]
    recorded = []

    def meanwhile(done, total):  # called while the files are written
        if not recorded:  # an evaluation storing its result as it comes
            prover.record_attempt(attempt(theorem, AttemptStatus.FAILED, run="meanwhile"))
            recorded.append(done)

    report = exporter.export_merged_data(
        exporter.get_repositories(), tmp_path / "out", progress=meanwhile
    )
    assert recorded and report.theorems == 177
    assert [a.full_name for a in exporter.get_attempts("meanwhile")] == [theorem.full_name]
    exporter.close()
    prover.close()


def test_readers_go_on_while_a_writer_holds_the_lock(sample_dir, tmp_path):
    path = tmp_path / "shared.db"
    DynamicDatabase(path).import_leandojo(sample_dir)
    writer = DynamicDatabase(path)
    theorems = [renamed(t, "_new") for t in sample_theorems(sample_dir)]
    seen = {}
    with writer.transaction() as conn:
        conn.exec_driver_sql("PRAGMA cache_size=5")  # spill to the file mid-transaction
        from leanloop.database.loader import add_records

        repo = DynamicDatabase(path).get_repositories()[0]
        add_records(conn, repo, theorems, (), (), source=None, batch_size=20)
        reader = threading.Thread(target=lambda: seen.update(n=DynamicDatabase(path).stats()))
        reader.start()
        reader.join(timeout=15)
        assert not reader.is_alive(), "a reader waited for the writer"
    assert seen["n"].theorems == 177  # the state before the writer's transaction
    assert DynamicDatabase(path).stats().theorems == 354
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_failed_first_import_keeps_a_file_another_process_wrote(sample_dir, tmp_path, monkeypatch):
    path = tmp_path / "new.db"
    bad = write_dataset(tmp_path / "bad", {"random/train": []})
    (bad / "random" / "train.json").write_text('[{"url": 1}]')
    original = DatabaseAccess._write_transaction
    raced = []

    def someone_else_writes_first(self):
        if not raced:  # between creating the file and writing to it
            raced.append(True)
            DynamicDatabase(path).import_leandojo(sample_dir)
        return original(self)

    monkeypatch.setattr(DatabaseAccess, "_write_transaction", someone_else_writes_first)
    with pytest.raises(DataFormatError):
        DynamicDatabase(path).import_leandojo(bad)
    monkeypatch.undo()
    assert DynamicDatabase(path).stats().theorems == 177


def test_a_replaced_file_is_written_where_the_path_points(sample_dir, tmp_path):
    path = tmp_path / "db.sqlite"
    database = DynamicDatabase(path)
    database.import_leandojo(sample_dir)
    path.rename(tmp_path / "moved-away.sqlite")  # someone moves the file away
    database.import_leandojo(sample_dir)
    assert DynamicDatabase(path).stats().theorems == 177
    assert DynamicDatabase(tmp_path / "moved-away.sqlite").stats().theorems == 177
