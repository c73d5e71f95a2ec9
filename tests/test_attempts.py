"""Proof attempts of evaluation runs in the database (SQLite and PostgreSQL), and the upgrade of
a database made before the attempts table existed."""

from __future__ import annotations

import sqlite3

import pytest

from leanloop.data.records import AttemptStatus, ProofAttempt, TheoremKey, repository_identity
from leanloop.database import DynamicDatabase
from leanloop.database.schema import SCHEMA_VERSION
from leanloop.errors import DatabaseError
from tests.helpers import attempt, sample_theorems


def test_attempts_are_stored_read_back_and_skipped_on_rerun(db, sample_dir):
    theorems = sample_theorems(sample_dir)[:4]
    stored = [
        attempt(theorems[0], AttemptStatus.PROVED, proof=("intro h", "exact h")),
        attempt(theorems[1], AttemptStatus.FAILED),
        attempt(theorems[2], AttemptStatus.ERROR, error="the Lean REPL exited with status 3"),
        attempt(theorems[0], AttemptStatus.TIMEOUT, run="r2"),
    ]
    for a in stored:
        db.record_attempt(a)
    assert db.get_attempts("r1") == stored[:3]
    assert db.get_attempts() == stored
    key = lambda t: TheoremKey(repository_identity(t.url), t.file_path, t.full_name)  # noqa: E731
    assert db.finished_attempts("r1") == {(key(t), t.commit, 0) for t in theorems[:2]}
    assert len(db.finished_attempts("r1", retry_errors=False)) == 3
    # a rerun replaces the record of the same run, theorem and attempt
    db.record_attempt(attempt(theorems[2], AttemptStatus.PROVED, proof=("simp",)))
    assert [a.status for a in db.get_attempts("r1")] == ["proved", "failed", "proved"]
    assert AttemptStatus.REPLAYED.found_proof and not AttemptStatus.BUDGET.found_proof


def test_an_older_database_is_read_as_it_is_and_upgraded_by_its_next_write(sample_dir, tmp_path):
    path = tmp_path / "v1.db"
    DynamicDatabase(path).import_leandojo(sample_dir)
    with sqlite3.connect(path) as raw:  # as leanloop's schema version 1 left it
        raw.execute("DROP TABLE proof_attempts")
        raw.execute("UPDATE leanloop_meta SET value = '1' WHERE key = 'schema_version'")
    old = DynamicDatabase(path)
    assert old.get_attempts() == [] and old.stats().theorems == 177
    with sqlite3.connect(path) as raw:
        assert raw.execute("SELECT value FROM leanloop_meta").fetchone() == ("1",)  # unchanged
    old.record_attempt(attempt(sample_theorems(sample_dir)[0], AttemptStatus.FAILED))
    with sqlite3.connect(path) as raw:
        version = raw.execute("SELECT value FROM leanloop_meta WHERE key='schema_version'")
        assert version.fetchone() == (str(SCHEMA_VERSION),)
    assert len(DynamicDatabase(path).get_attempts()) == 1
    assert DynamicDatabase(path).stats().theorems == 177


def test_bad_attempts_are_refused_by_the_record():
    with pytest.raises(ValueError):
        ProofAttempt(run="r", url="u", commit="c", file_path="f", full_name="n", status="won")
    with pytest.raises(ValueError):
        ProofAttempt(
            run="r", url="u", commit="c", file_path="f", full_name="n", status="failed", seconds=-1
        )


def test_a_newer_database_is_still_refused(sample_dir, tmp_path):
    path = tmp_path / "new.db"
    DynamicDatabase(path).import_leandojo(sample_dir)
    with sqlite3.connect(path) as raw:
        raw.execute("UPDATE leanloop_meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(DatabaseError, match="schema version 99"):
        DynamicDatabase(path).record_attempt(
            attempt(sample_theorems(sample_dir)[0], AttemptStatus.FAILED)
        )


def test_axioms_and_environment_are_stored_and_a_version_2_database_gains_them(
    sample_dir, tmp_path
):
    theorem = sample_theorems(sample_dir)[0]
    proved = attempt(theorem, AttemptStatus.PROVED, proof=("simp",)).model_copy(
        update={"axioms": ("propext", "Quot.sound"), "environment": "lean"}
    )
    path = tmp_path / "v2.db"
    database = DynamicDatabase(path)
    database.record_attempt(proved)
    assert database.get_attempts() == [proved]
    with sqlite3.connect(path) as raw:  # as leanloop's schema version 2 left it
        raw.execute("ALTER TABLE proof_attempts DROP COLUMN axioms")
        raw.execute("ALTER TABLE proof_attempts DROP COLUMN environment")
        raw.execute("UPDATE leanloop_meta SET value = '2' WHERE key = 'schema_version'")
    old = DynamicDatabase(path)
    (read,) = old.get_attempts()  # read as it is: the new fields are unknown
    assert read.axioms is None and read.environment is None and read.proof == ("simp",)
    assert old.run_progress("r1").solved == {(theorem.key, theorem.commit)}
    with sqlite3.connect(path) as raw:
        assert raw.execute("SELECT value FROM leanloop_meta").fetchone() == ("2",)  # unchanged
    old.record_attempt(proved.model_copy(update={"run": "r2"}))
    with sqlite3.connect(path) as raw:
        version = raw.execute("SELECT value FROM leanloop_meta WHERE key='schema_version'")
        assert version.fetchone() == (str(SCHEMA_VERSION),)
    again = DynamicDatabase(path)
    assert [a.axioms for a in again.get_attempts()] == [None, ("propext", "Quot.sound")]
    assert again.get_attempts("r2")[0].environment == "lean"


def test_run_progress_is_what_a_rerun_skips(db, sample_dir):
    theorems = sample_theorems(sample_dir)[:3]
    for a in [
        attempt(theorems[0], AttemptStatus.FAILED, number=0),
        attempt(theorems[0], AttemptStatus.PROVED, number=1, proof=("simp",)),
        attempt(theorems[1], AttemptStatus.ERROR, number=0, error="the server died"),
        attempt(theorems[2], AttemptStatus.REFUSED, number=0, error="uses sorryAx"),
    ]:
        db.record_attempt(a)
    progress = db.run_progress("r1")
    assert progress.finished == {
        (theorems[0].key, theorems[0].commit, 0),
        (theorems[0].key, theorems[0].commit, 1),
        (theorems[2].key, theorems[2].commit, 0),  # refused is finished; an error is not
    }
    assert progress.solved == {(theorems[0].key, theorems[0].commit)}
    assert db.run_progress("none") == type(progress)()
