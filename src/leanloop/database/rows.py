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
from leanloop.database.schema import repositories, tactic_premises, tactics, theorems


def key_digest(key: TheoremKey) -> str:
    """The stored form of a theorem's identity (stable across commits of its repository)."""
    raw = "\0".join(key).encode("utf-8")
    return hashlib.sha1(raw, usedforsecurity=False).hexdigest()


def repository_from_row(row: Row) -> Repository:
    return Repository(url=row.url, commit=row.commit, lean_version=row.lean_version, name=row.name)


def theorem_row(repository_id: int, theorem: Theorem) -> dict[str, Any]:
    return {
        "repository_id": repository_id,
        "key": key_digest(theorem.key),
        "file_path": theorem.file_path,
        "full_name": theorem.full_name,
        "start_line": theorem.start.line,
        "start_column": theorem.start.column,
        "end_line": theorem.end.line,
        "end_column": theorem.end.column,
        "statement": theorem.statement,
        "status": theorem.status.value,
        "proof": theorem.proof,
        "num_steps": theorem.num_steps,
    }


def tactic_rows(
    theorem_id: int, theorem: Theorem
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    steps, refs = [], []
    for idx, tactic in enumerate(theorem.traced_tactics):
        steps.append(
            {
                "theorem_id": theorem_id,
                "idx": idx,
                "tactic": tactic.tactic,
                "annotated": tactic.annotated_tactic.text,
                "state_before": tactic.state_before,
                "state_after": tactic.state_after,
            }
        )
        for pidx, ref in enumerate(tactic.premises):
            refs.append(
                {
                    "theorem_id": theorem_id,
                    "tactic_idx": idx,
                    "idx": pidx,
                    "full_name": ref.full_name,
                    "def_path": ref.def_path,
                    "def_line": ref.def_pos.line,
                    "def_column": ref.def_pos.column,
                    "def_end_line": ref.def_end_pos.line,
                    "def_end_column": ref.def_end_pos.column,
                }
            )
    return steps, refs


def premise_row(repository_id: int, ordinal: int, premise: Premise) -> dict[str, Any]:
    return {
        "repository_id": repository_id,
        "file_path": premise.file_path,
        "ordinal": ordinal,
        "full_name": premise.full_name,
        "start_line": premise.start.line,
        "start_column": premise.start.column,
        "end_line": premise.end.line,
        "end_column": premise.end.column,
        "code": premise.code,
        "kind": premise.kind,
    }


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
    """A theorem row (with its repository's url and commit) and its tactics' rows."""

    theorem: Row
    tactics: list[tuple[Row, list[Row]]]


def stream(conn: Connection, query: sa.Executable, batch: int = 2000):
    """Execute ``query`` with its rows fetched in batches (a server-side cursor on PostgreSQL);
    the option is set on the statement, so the connection stays usable for writes."""
    return conn.execute(query.execution_options(stream_results=True, yield_per=batch))


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
    tactic_query = (
        sa.select(tactics)
        .select_from(base.join(tactics, tactics.c.theorem_id == theorems.c.id))
        .where(where)
        .order_by(tactics.c.theorem_id, tactics.c.idx)
    )
    ref_query = (
        sa.select(tactic_premises)
        .select_from(base.join(tactic_premises, tactic_premises.c.theorem_id == theorems.c.id))
        .where(where)
        .order_by(tactic_premises.c.theorem_id, tactic_premises.c.tactic_idx, tactic_premises.c.idx)
    )
    tactic_rows_iter = iter(stream(conn, tactic_query))
    ref_rows_iter = iter(stream(conn, ref_query))
    next_tactic = next(tactic_rows_iter, None)
    next_ref = next(ref_rows_iter, None)
    for theorem in stream(conn, theorem_query):
        steps: list[tuple[Row, list[Row]]] = []
        while next_tactic is not None and next_tactic.theorem_id == theorem.id:
            refs: list[Row] = []
            while (
                next_ref is not None
                and next_ref.theorem_id == theorem.id
                and next_ref.tactic_idx == next_tactic.idx
            ):
                refs.append(next_ref)
                next_ref = next(ref_rows_iter, None)
            steps.append((next_tactic, refs))
            next_tactic = next(tactic_rows_iter, None)
        yield ProofRows(theorem, steps)


def theorem_from_rows(proof: ProofRows) -> Theorem:
    row = proof.theorem
    traced = tuple(
        TracedTactic(
            tactic=step.tactic,
            annotated_tactic=AnnotatedTactic(
                text=step.annotated,
                premises=tuple(
                    PremiseRef(
                        full_name=ref.full_name,
                        def_path=ref.def_path,
                        def_pos=Pos(ref.def_line, ref.def_column),
                        def_end_pos=Pos(ref.def_end_line, ref.def_end_column),
                    )
                    for ref in refs
                ),
            ),
            state_before=step.state_before,
            state_after=step.state_after,
        )
        for step, refs in proof.tactics
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
