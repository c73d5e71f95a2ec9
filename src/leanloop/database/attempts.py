"""Proof attempts of evaluation runs: stored one at a time as each theorem finishes, read back
for reports, and looked up so that a rerun skips the theorems it already finished."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

import orjson
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from leanloop.data.records import AttemptStatus, ProofAttempt, TheoremKey
from leanloop.database.rows import key_digest, stream
from leanloop.database.schema import proof_attempts


def has_attempts_table(conn: Connection) -> bool:
    """False for a database of an older version not written to since (it gains the table then)."""
    return sa.inspect(conn).has_table(proof_attempts.name)


def record_attempt(conn: Connection, attempt: ProofAttempt) -> None:
    """Store ``attempt``, replacing an earlier record of the same run, theorem and attempt."""
    key = key_digest(attempt.key)
    t = proof_attempts.c
    conn.execute(
        proof_attempts.delete().where(
            t.run == attempt.run,
            t.theorem_key == key,
            t.commit == attempt.commit,
            t.attempt == attempt.attempt,
        )
    )
    conn.execute(
        proof_attempts.insert().values(
            run=attempt.run,
            theorem_key=key,
            url=attempt.url,
            commit=attempt.commit,
            file_path=attempt.file_path,
            full_name=attempt.full_name,
            attempt=attempt.attempt,
            status=attempt.status.value,
            proof=None if attempt.proof is None else orjson.dumps(list(attempt.proof)).decode(),
            prover=attempt.prover,
            expansions=attempt.expansions,
            tree_size=attempt.tree_size,
            seconds=attempt.seconds,
            lean_seconds=attempt.lean_seconds,
            model_seconds=attempt.model_seconds,
            error=attempt.error,
            finished_at=datetime.now(UTC),
            axioms=None if attempt.axioms is None else orjson.dumps(list(attempt.axioms)).decode(),
            environment=attempt.environment,
            tokens=attempt.tokens,
            worker=attempt.worker,
        )
    )


def iter_attempts(conn: Connection, run: str | None) -> Iterator[ProofAttempt]:
    """The stored attempts (of one run, or all), in the order they finished."""
    if not has_attempts_table(conn):
        return
    present = {c["name"] for c in sa.inspect(conn).get_columns(proof_attempts.name)}
    columns = [c for c in proof_attempts.c if c.name in present]  # an older database lacks some
    query = sa.select(*columns).order_by(proof_attempts.c.id)
    if run is not None:
        query = query.where(proof_attempts.c.run == run)
    for row in stream(conn, query):
        axioms = getattr(row, "axioms", None)
        yield ProofAttempt(
            run=row.run,
            url=row.url,
            commit=row.commit,
            file_path=row.file_path,
            full_name=row.full_name,
            attempt=row.attempt,
            status=AttemptStatus(row.status),
            proof=None if row.proof is None else tuple(orjson.loads(row.proof)),
            prover=row.prover,
            expansions=row.expansions,
            tree_size=row.tree_size,
            seconds=row.seconds,
            lean_seconds=row.lean_seconds,
            model_seconds=row.model_seconds,
            error=row.error,
            axioms=None if axioms is None else tuple(orjson.loads(axioms)),
            environment=getattr(row, "environment", None),
            tokens=getattr(row, "tokens", None),
            worker=getattr(row, "worker", None),
        )


@dataclass(frozen=True)
class RunProgress:
    """What a run has finished, as its rerun sees it: ``finished`` holds (theorem key, commit,
    attempt) of every stored attempt that did not end in an error (errors are tried again);
    ``solved`` holds (theorem key, commit) of the theorems an attempt found a proof of. The one
    notion of "finished" every proving command uses."""

    finished: frozenset[tuple[TheoremKey, str, int]] = frozenset()
    solved: frozenset[tuple[TheoremKey, str]] = frozenset()

    @classmethod
    def of(cls, attempts: Iterable[ProofAttempt], *, retry_errors: bool = True) -> RunProgress:
        """The progress the stored ``attempts`` of a run stand for."""
        finished: set[tuple[TheoremKey, str, int]] = set()
        solved: set[tuple[TheoremKey, str]] = set()
        for attempt in attempts:
            if attempt.status.found_proof:
                solved.add((attempt.key, attempt.commit))
            if retry_errors and attempt.status is AttemptStatus.ERROR:
                continue
            finished.add((attempt.key, attempt.commit, attempt.attempt))
        return cls(frozenset(finished), frozenset(solved))


def run_progress(conn: Connection, run: str, *, retry_errors: bool = True) -> RunProgress:
    """The run's progress (see ``RunProgress``)."""
    return RunProgress.of(iter_attempts(conn, run), retry_errors=retry_errors)


def finished_attempts(
    conn: Connection, run: str, *, retry_errors: bool = True
) -> set[tuple[TheoremKey, str, int]]:
    """(theorem key, commit, attempt) of the run's finished attempts; with ``retry_errors``
    an attempt that ended in an error does not count as finished."""
    return set(run_progress(conn, run, retry_errors=retry_errors).finished)
