"""Map records to table rows and back, and stream theorems with their tactics out of the tables."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Row

from leanloop.data.records import (
    AnnotatedTactic,
    Pos,
    Premise,
    PremiseRef,
    Repository,
    Theorem,
    TheoremKey,
    TheoremStatus,
    TracedTactic,
)
from leanloop.database.raw import iter_rows
from leanloop.database.schema import repositories, tactic_premises, tactics, theorems


def key_digest(key: TheoremKey) -> str:
    """The stored form of a theorem's identity (stable across commits of its repository)."""
    raw = "\0".join(key).encode("utf-8")
    return hashlib.sha1(raw, usedforsecurity=False).hexdigest()


def repository_from_row(row: Row) -> Repository:
    return Repository(url=row.url, commit=row.commit, lean_version=row.lean_version, name=row.name)


#: Columns filled from a record, in the order the row functions give their values.
THEOREM_COLUMNS = (
    "repository_id",
    "key",
    "file_path",
    "full_name",
    "start_line",
    "start_column",
    "end_line",
    "end_column",
    "statement",
    "status",
    "proof",
    "num_steps",
)
TACTIC_COLUMNS = ("theorem_id", "idx", "tactic", "annotated", "state_before", "state_after")
REF_COLUMNS = (
    "theorem_id",
    "tactic_idx",
    "idx",
    "full_name",
    "def_path",
    "def_line",
    "def_column",
    "def_end_line",
    "def_end_column",
)
PREMISE_COLUMNS = (
    "repository_id",
    "file_path",
    "ordinal",
    "full_name",
    "start_line",
    "start_column",
    "end_line",
    "end_column",
    "code",
    "kind",
)


def theorem_row(repository_id: int, key: str, theorem: Theorem) -> tuple:
    """The values of ``THEOREM_COLUMNS`` for a theorem (``key`` is its ``key_digest``)."""
    return (
        repository_id,
        key,
        theorem.file_path,
        theorem.full_name,
        *theorem.start,
        *theorem.end,
        theorem.statement,
        theorem.status.value,
        theorem.proof,
        theorem.num_steps,
    )


def tactic_rows(theorem_id: int, theorem: Theorem, steps: list[tuple], refs: list[tuple]) -> None:
    """Append the values of ``TACTIC_COLUMNS`` and ``REF_COLUMNS`` for a theorem's tactics."""
    for idx, tactic in enumerate(theorem.traced_tactics):
        annotated = tactic.annotated_tactic
        steps.append(
            (
                theorem_id,
                idx,
                tactic.tactic,
                annotated.text,
                tactic.state_before,
                tactic.state_after,
            )
        )
        for pidx, ref in enumerate(annotated.premises):
            refs.append(
                (theorem_id, idx, pidx, ref.full_name, ref.def_path, *ref.def_pos, *ref.def_end_pos)
            )


def premise_row(repository_id: int, ordinal: int, premise: Premise) -> tuple:
    """The values of ``PREMISE_COLUMNS`` for a premise of a file."""
    return (
        repository_id,
        premise.file_path,
        ordinal,
        premise.full_name,
        *premise.start,
        *premise.end,
        premise.code,
        premise.kind,
    )


def premise_from_row(row: Row) -> Premise:
    return Premise(
        full_name=row.full_name,
        file_path=row.file_path,
        start=Pos(row.start_line, row.start_column),
        end=Pos(row.end_line, row.end_column),
        code=row.code,
        kind=row.kind,
    )


def dumps_list(values) -> str:
    return orjson.dumps(list(values)).decode()


def loads_list(text: str) -> list:
    return orjson.loads(text)


@dataclass(slots=True)
class ProofRows:
    """A theorem row (with its repository's url and commit) and its tactics' rows: each a
    tuple of ``TACTIC_COLUMNS`` values with its premises' tuples of ``REF_COLUMNS`` values."""

    theorem: Any
    tactics: list[tuple[Any, list[Any]]]


def stream(conn: Connection, query: sa.ClauseElement, batch: int = 5000) -> Iterator[Any]:
    """The rows of ``query`` as named tuples, fetched in batches (a server-side cursor on
    PostgreSQL); the connection stays usable for writes."""
    return iter_rows(conn, query, batch)


def stream_proofs(conn: Connection, where: sa.ColumnElement[bool]) -> Iterator[ProofRows]:
    """Theorems matching ``where`` in id order, each with its tactics and their premise refs.

    Three ordered queries are merged as they stream, so memory holds one theorem at a time.
    """
    base = theorems.join(repositories, theorems.c.repository_id == repositories.c.id)
    theorem_query = (
        sa.select(theorems, repositories.c.url, repositories.c.commit)
        .select_from(base)
        .where(where)
        .order_by(theorems.c.id)
    )
    # 'theorem_id IN (...)' walks the primary key in order; a join would sort afterwards;
    # tactic and premise rows (most of the rows) come as plain tuples in the *_COLUMNS order
    matching = sa.select(theorems.c.id).where(where)
    tactic_query = (
        sa.select(*(tactics.c[name] for name in TACTIC_COLUMNS))
        .where(tactics.c.theorem_id.in_(matching))
        .order_by(tactics.c.theorem_id, tactics.c.idx)
    )
    ref_query = (
        sa.select(*(tactic_premises.c[name] for name in REF_COLUMNS))
        .where(tactic_premises.c.theorem_id.in_(matching))
        .order_by(tactic_premises.c.theorem_id, tactic_premises.c.tactic_idx, tactic_premises.c.idx)
    )
    tactic_rows_iter = iter_rows(conn, tactic_query, named=False)
    ref_rows_iter = iter_rows(conn, ref_query, named=False)
    next_tactic = next(tactic_rows_iter, None)
    next_ref = next(ref_rows_iter, None)
    for theorem in stream(conn, theorem_query):
        theorem_id = theorem.id
        steps: list[tuple[tuple, list[tuple]]] = []
        while next_tactic is not None and next_tactic[0] == theorem_id:
            refs: list[tuple] = []
            idx = next_tactic[1]
            while next_ref is not None and next_ref[0] == theorem_id and next_ref[1] == idx:
                refs.append(next_ref)
                next_ref = next(ref_rows_iter, None)
            steps.append((next_tactic, refs))
            next_tactic = next(tactic_rows_iter, None)
        yield ProofRows(theorem, steps)


def theorem_from_rows(proof: ProofRows) -> Theorem:
    row = proof.theorem
    traced = tuple(
        TracedTactic(
            tactic=tactic,
            annotated_tactic=AnnotatedTactic(
                text=annotated,
                premises=tuple(
                    PremiseRef(
                        full_name=name,
                        def_path=path,
                        def_pos=Pos(line, column),
                        def_end_pos=Pos(end_line, end_column),
                    )
                    for _, _, _, name, path, line, column, end_line, end_column in refs
                ),
            ),
            state_before=before,
            state_after=after,
        )
        for (_, _, tactic, annotated, before, after), refs in proof.tactics
    )
    return Theorem(
        url=row.url,
        commit=row.commit,
        file_path=row.file_path,
        full_name=row.full_name,
        start=Pos(row.start_line, row.start_column),
        end=Pos(row.end_line, row.end_column),
        statement=row.statement,
        traced_tactics=traced,
        status=TheoremStatus(row.status),
        proof=row.proof,
    )


def theorem_without_tactics(row: Row) -> Theorem:
    return theorem_from_rows(ProofRows(row, []))
