"""Export the merged data of some repositories as a LeanDojo-format dataset, assigning splits to
theorems that have none (within the caller's transaction) and streaming everything else."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from leanloop.data.leandojo.format import (
    SCHEMES,
    premise_ref_dict,
    tactic_dict,
    theorem_dict,
)
from leanloop.data.leandojo.writer import LeanDojoWriter
from leanloop.data.records import Repository, TheoremStatus
from leanloop.database.rows import loads_list, stream, stream_proofs
from leanloop.database.schema import (
    files,
    premises,
    split_assignments,
    tactic_premises,
    theorems,
)
from leanloop.database.splits import SplitConfig, assign_novel_premises, assign_random

_CHUNK = 5000


@dataclass
class ExportReport:
    """What an export wrote."""

    output_path: Path
    theorems: int = 0
    split_sizes: dict[str, dict[str, int]] = field(default_factory=dict)
    new_assignments: int = 0
    source_files: int = 0
    premises: int = 0
    traced_files: int = 0


def _winners(conn: Connection, repo_ids: Sequence[int]) -> dict[str, int]:
    """Theorem key -> id of the proven theorem exported for it. A key names a theorem of one
    repository, so only commits of the same repository compete: the commit added to the
    database last wins, whatever order the commits are listed in (a curriculum may list an
    older commit after a newer one)."""
    best: dict[str, tuple[int, int]] = {}  # key -> (repository id, theorem id)
    query = sa.select(theorems.c.id, theorems.c.key, theorems.c.repository_id).where(
        theorems.c.repository_id.in_(list(repo_ids)),
        theorems.c.status == TheoremStatus.PROVEN.value,
    )
    for theorem_id, key, repo_id in conn.execute(query):
        current = best.get(key)
        if current is None or repo_id > current[0]:  # ids grow as commits are added
            best[key] = (repo_id, theorem_id)
    return {key: theorem_id for key, (_, theorem_id) in best.items()}


def _existing_splits(conn: Connection, keys: list[str]) -> dict[str, dict[str, str]]:
    found: dict[str, dict[str, str]] = defaultdict(dict)
    for start in range(0, len(keys), _CHUNK):
        chunk = keys[start : start + _CHUNK]
        for row in conn.execute(
            sa.select(split_assignments).where(split_assignments.c.theorem_key.in_(chunk))
        ):
            found[row.scheme][row.theorem_key] = row.split
    return found


def _premises_used(
    conn: Connection, repo_ids: Sequence[int], winners: dict[str, int]
) -> dict[str, set[str]]:
    key_of = {theorem_id: key for key, theorem_id in winners.items()}
    used: dict[str, set[str]] = {key: set() for key in winners}
    query = (
        sa.select(tactic_premises.c.theorem_id, tactic_premises.c.full_name)
        .select_from(tactic_premises.join(theorems))
        .where(theorems.c.repository_id.in_(list(repo_ids)))
    )
    for theorem_id, name in stream(conn, query, 20000):
        key = key_of.get(theorem_id)
        if key is not None:
            used[key].add(name)
    return used


def assign_splits(
    conn: Connection, repo_ids: Sequence[int], config: SplitConfig
) -> tuple[dict[str, int], dict[str, dict[str, str]], int]:
    """Give every exported theorem a split in every scheme, storing the new assignments.

    Returns the theorems to export (key -> id), the split of each (scheme -> key -> split) and
    how many assignments were new.
    """
    winners = _winners(conn, repo_ids)
    keys = sorted(winners)
    existing = _existing_splits(conn, keys)
    assigned: dict[str, dict[str, str]] = {}
    fresh_rows = []
    for scheme in SCHEMES:
        old = existing.get(scheme, {})
        if scheme == "random":
            new = assign_random(keys, old, config)
        else:
            new = assign_novel_premises(_premises_used(conn, repo_ids, winners), old, config)
        fresh_rows.extend({"theorem_key": k, "scheme": scheme, "split": s} for k, s in new.items())
        assigned[scheme] = {**old, **new}
    for start in range(0, len(fresh_rows), _CHUNK):
        conn.execute(split_assignments.insert(), fresh_rows[start : start + _CHUNK])
    return winners, assigned, len(fresh_rows)


def export_merged(
    conn: Connection,
    repos: Sequence[tuple[int, Repository]],
    output_path: Path,
    config: SplitConfig,
    *,
    progress=None,
) -> ExportReport:
    """Write the dataset for ``repos`` (id and record, in curriculum order) to ``output_path``."""
    repo_ids = [repo_id for repo_id, _ in repos]
    winners, assigned, fresh = assign_splits(conn, repo_ids, config)
    report = ExportReport(output_path=output_path, new_assignments=fresh)
    exported_ids = {theorem_id: key for key, theorem_id in winners.items()}
    with LeanDojoWriter(output_path) as writer:
        where = theorems.c.repository_id.in_(repo_ids)
        for proof in stream_proofs(conn, where):
            row = proof.theorem
            key = exported_ids.get(row.id)
            if key is None:
                continue
            traced = [
                tactic_dict(
                    step.tactic,
                    step.annotated,
                    (
                        premise_ref_dict(
                            r.full_name,
                            r.def_path,
                            (r.def_line, r.def_column),
                            (r.def_end_line, r.def_end_column),
                        )
                        for r in refs
                    ),
                    step.state_before,
                    step.state_after,
                )
                for step, refs in proof.tactics
            ]
            writer.write_theorem(
                theorem_dict(
                    row.url,
                    row.commit,
                    row.file_path,
                    row.full_name,
                    (row.start_line, row.start_column),
                    (row.end_line, row.end_column),
                    traced,
                    row.statement,
                ),
                {scheme: assigned[scheme][key] for scheme in SCHEMES},
            )
            report.theorems += 1
            if progress is not None:
                progress(report.theorems, len(winners))
        _write_corpus(conn, repo_ids, writer)
        writer.write_metadata(_metadata(repos, config))
    report.split_sizes = {
        scheme: {split: writer.counts[scheme, split] for split in ("train", "val", "test")}
        for scheme in SCHEMES
    }
    report.source_files = writer.num_source_files
    report.premises = writer.num_premises
    report.traced_files = writer.num_traced_files
    return report


def _write_corpus(conn: Connection, repo_ids: Sequence[int], writer: LeanDojoWriter) -> None:
    """corpus.jsonl and traced_files.jsonl: each path once, from the last repository having it."""
    rank = {repo_id: i for i, repo_id in enumerate(repo_ids)}
    chosen: dict[str, tuple[int, int]] = {}
    for file_id, repo_id, path in conn.execute(
        sa.select(files.c.id, files.c.repository_id, files.c.path).where(
            files.c.repository_id.in_(list(repo_ids))
        )
    ):
        if path not in chosen or rank[repo_id] > rank[chosen[path][1]]:
            chosen[path] = (file_id, repo_id)
    keep = {file_id for file_id, _ in chosen.values()}

    file_query = (
        sa.select(files)
        .where(files.c.repository_id.in_(list(repo_ids)), files.c.in_corpus == 1)
        .order_by(files.c.id)
    )
    premise_query = (
        sa.select(files.c.id.label("file_id"), premises)
        .select_from(
            premises.join(
                files,
                sa.and_(
                    files.c.repository_id == premises.c.repository_id,
                    files.c.path == premises.c.file_path,
                ),
            )
        )
        .where(files.c.repository_id.in_(list(repo_ids)), files.c.in_corpus == 1)
        .order_by(files.c.id, premises.c.ordinal)
    )
    premise_rows = iter(stream(conn, premise_query))
    pending = next(premise_rows, None)
    for file in stream(conn, file_query):
        items = []
        while pending is not None and pending.file_id == file.id:
            items.append(
                {
                    "full_name": pending.full_name,
                    "code": pending.code,
                    "start": [pending.start_line, pending.start_column],
                    "end": [pending.end_line, pending.end_column],
                    "kind": pending.kind,
                }
            )
            pending = next(premise_rows, None)
        if file.id in keep:
            writer.write_source_file(
                {"path": file.path, "imports": loads_list(file.imports), "premises": items}
            )
    traced_query = (
        sa.select(files.c.id, files.c.path)
        .where(files.c.repository_id.in_(list(repo_ids)), files.c.traced == 1)
        .order_by(files.c.id)
    )
    for file_id, path in conn.execute(traced_query):
        if file_id in keep:
            writer.write_traced_file(path)


def _metadata(repos: Sequence[tuple[int, Repository]], config: SplitConfig) -> dict:
    from leanloop import __version__

    listed = [
        {"url": r.url, "commit": r.commit, "name": r.name, "lean_version": r.lean_version}
        for _, r in repos
    ]
    data: dict = {
        "dataset_name": "leanloop export of " + ", ".join(r.name for _, r in repos),
        "creation_time": str(datetime.now()),
    }
    if repos:
        data["from_repo"] = {"url": repos[-1][1].url, "commit": repos[-1][1].commit}
    data["repositories"] = listed
    data["leanloop_version"] = __version__
    data["splits"] = {"val": config.val, "test": config.test, "seed": config.seed}
    return data
