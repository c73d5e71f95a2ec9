"""``leanloop db check``: a whole database passes (SQLite and PostgreSQL); a SQLite file whose
pages the test overwrites with garbage — still good enough for ``db stats`` — fails ``db export``
with one line pointing to ``db check``, which names what is damaged and what to do, and whose
``--recover-into`` copies the whole theorems into a new database that passes and that a second
import of the dataset completes, with the splits kept; rows that point at nothing, and schemas
of another version or incomplete, are found on both engines."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
import sqlalchemy as sa

from leanloop.database import DynamicDatabase
from leanloop.database.schema import SCHEMA_VERSION
from tests.helpers import assert_one_line_error, run_cli

PAGE = 4096


@pytest.fixture
def imported(capsys, sample_dir, db_url) -> str:
    code, _, err = run_cli(capsys, "db", "import", sample_dir, "--db", db_url)
    assert code == 0, err
    return db_url


def test_a_whole_database_passes(capsys, imported):
    report = DynamicDatabase(imported).check_integrity()
    assert report.ok and report.findings == [] and report.advice == []
    code, out, err = run_cli(capsys, "db", "check", "--db", imported)
    assert code == 0, err
    assert out.strip().splitlines()[-1] == "ok: the database is whole"
    if imported.startswith("postgresql"):
        assert "SQLite" not in out
    else:
        assert "checked: SQLite's integrity_check of every page" in out
    code, out, _ = run_cli(capsys, "db", "check", "--db", imported, "--json", "--quick")
    answer = json.loads(out)
    assert code == 0 and answer["ok"] and answer["problems"] == []


def damage_table(path: Path, table: str, pages: int = 3) -> list[int]:
    """Overwrite ``pages`` leaf pages of ``table`` (from the middle of its pages) with bytes
    that are no page at all."""
    with sqlite3.connect(path) as conn:
        found = [
            page
            for (page,) in conn.execute(
                "SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf' ORDER BY pageno",
                (table,),
            )
        ]
    assert len(found) > pages * 2
    chosen = found[len(found) // 2 : len(found) // 2 + pages]
    with path.open("r+b") as file:
        for page in chosen:
            file.seek((page - 1) * PAGE)
            file.write(b"\xa5" * PAGE)
    return chosen


def splits(export: Path) -> dict[str, str]:
    """Each theorem's split in an export (the random scheme)."""
    found = {}
    for split in ("train", "val", "test"):
        for theorem in json.loads((export / "random" / f"{split}.json").read_text()):
            found[f"{theorem['file_path']}:{theorem['full_name']}"] = split
    return found


def test_a_damaged_file_is_found_and_what_is_whole_is_recovered(capsys, sample_dir, tmp_path):
    path = tmp_path / "lean.db"
    code, _, err = run_cli(capsys, "db", "import", sample_dir, "--db", path)
    assert code == 0, err
    code, _, err = run_cli(capsys, "db", "export", tmp_path / "before", "--db", path)
    assert code == 0, err
    before = splits(tmp_path / "before")
    damage_table(path, "tactics")

    # the counts are still read (from the indexes) ...
    code, out, _ = run_cli(capsys, "db", "stats", "--db", path)
    assert code == 0 and "177 theorems" in out
    # ... the export reads the tactics: one line saying what and where to go
    code, _, err = run_cli(capsys, "db", "export", tmp_path / "after", "--db", path)
    assert_one_line_error(code, err, "is damaged", "malformed", f"leanloop db check --db {path}")

    code, out, _ = run_cli(capsys, "db", "check", "--db", path)
    assert code == 1
    lines = out.strip().splitlines()
    assert "problem (damaged): table 'tactics': database disk image is malformed" in lines
    assert not [line for line in lines if line.startswith("problem") and "'theorems'" in line]
    advice = [line for line in lines if line.startswith("to do: ")]
    recovered = tmp_path / "lean-recovered.db"
    assert any(f"--recover-into {recovered}" in line for line in advice), advice
    assert all(len(line) < 400 for line in lines)

    code, out, err = run_cli(capsys, "db", "check", "--db", path, "--recover-into", recovered)
    assert code == 0, out + err
    assert "tables with rows that could not be read (left out): tactics" in out
    assert out.strip().splitlines()[-1] == "ok: the database is whole"
    held = DynamicDatabase(recovered).stats()
    assert 0 < held.theorems < 177
    # the file it came from is as it was (only read): it still fails
    assert not DynamicDatabase(path).check_integrity().ok

    # importing the dataset again brings the theorems left out back, with the splits they had
    code, _, err = run_cli(capsys, "db", "import", sample_dir, "--db", recovered)
    assert code == 0, err
    assert DynamicDatabase(recovered).stats().theorems == 177
    code, _, err = run_cli(capsys, "db", "export", tmp_path / "again", "--db", recovered)
    assert code == 0, err
    again = splits(tmp_path / "again")
    kept = {name for name in before if name in again}
    assert len(kept) == len(before) and all(before[n] == again[n] for n in kept)

    code, _, err = run_cli(capsys, "db", "check", "--db", path, "--recover-into", recovered)
    assert_one_line_error(code, err, "already exists")


def test_a_file_that_is_no_database_and_one_that_is_missing(capsys, tmp_path):
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"\x00garbage" * 1000)
    code, out, _ = run_cli(capsys, "db", "check", "--db", junk)
    assert code == 1 and "problem (damaged): SQLite cannot read the file: file is not a " in out
    code, out, _ = run_cli(capsys, "db", "check", "--db", tmp_path / "absent.db")
    assert code == 1 and f"problem (missing): no database at {tmp_path / 'absent.db'}" in out
    assert not (tmp_path / "absent.db").exists()  # checking creates nothing


def _without_reference_checks(conn: sa.Connection) -> None:
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql("PRAGMA foreign_keys=OFF")
    else:  # a superuser's session that fires no foreign-key triggers
        conn.exec_driver_sql("SET session_replication_role = replica")


def test_rows_that_point_at_nothing(capsys, imported):
    engine = sa.create_engine(DynamicDatabase(imported)._access.url)
    try:
        with engine.connect() as conn:
            _without_reference_checks(conn)
            conn.exec_driver_sql("DELETE FROM tactics WHERE idx = 0")
            conn.exec_driver_sql("DELETE FROM repositories")
            conn.commit()
    finally:
        engine.dispose()
    report = DynamicDatabase(imported).check_integrity()
    texts = [f.text for f in report.findings if f.kind == "references"]
    assert texts[0] == "theorems: 177 rows of table 'theorems' point at no row of 'repositories'"
    assert any(
        t.startswith("premise uses: ") and "point at no row of 'tactics'" in t for t in texts
    )
    assert any("have another number of tactics than their num_steps" in t for t in texts)
    assert report.advice and not report.ok
    code, out, _ = run_cli(capsys, "db", "check", "--db", imported)
    assert code == 1 and "problem (references): theorems: 177 rows" in out


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            "UPDATE leanloop_meta SET value = '99' WHERE key = 'schema_version'",
            f"schema version 99 is newer than this leanloop's ({SCHEMA_VERSION})",
        ),
        ("DROP TABLE tactic_premises", "table 'tactic_premises' is missing"),
        ("DELETE FROM leanloop_meta", "the schema version is not recorded (None)"),
    ],
)
def test_schemas_of_another_version_or_incomplete(imported, change, expected):
    engine = sa.create_engine(DynamicDatabase(imported)._access.url)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(change)
    finally:
        engine.dispose()
    report = DynamicDatabase(imported).check_integrity()
    assert [f.text for f in report.findings] == [expected]
    assert report.findings[0].kind == "schema" and report.advice


def test_an_older_version_passes_and_says_the_next_write_upgrades_it(tmp_path, sample_dir):
    path = tmp_path / "old.db"
    database = DynamicDatabase(path)
    database.import_dataset(sample_dir)
    database.close()
    with sqlite3.connect(path) as conn:  # as version 3 left it: no tokens or worker columns
        conn.execute("ALTER TABLE proof_attempts DROP COLUMN tokens")
        conn.execute("ALTER TABLE proof_attempts DROP COLUMN worker")
        conn.execute("UPDATE leanloop_meta SET value = '3' WHERE key = 'schema_version'")
    report = DynamicDatabase(path).check_integrity()
    assert report.ok, report.findings
    assert f"schema version 3: the next write upgrades it to {SCHEMA_VERSION}" in report.checked
