"""Export the merged data of some repositories as a LeanDojo-format dataset: splits assigned
within the caller's transaction, theorems and the corpus streamed from the same commits."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from leanloop.data.leandojo.format import (
    SCHEMES,
    corpus_line,
    corpus_premise,
    encode_premise_ref,
    encode_tactic,
    encode_theorem,
)
from leanloop.data.leandojo.writer import LeanDojoWriter
from leanloop.data.records import Repository
from leanloop.database.assign import Assignment, SplitOrigin, describe_origin
from leanloop.database.rows import loads_list, stream, stream_proofs
from leanloop.database.schema import files, premises, repositories, theorems
from leanloop.database.splits import SplitConfig

Progress = Callable[[int, int | None], None]


@dataclass
class ExportReport:
    """What an export wrote, and what it noticed."""

    output_path: Path
    theorems: int = 0
    split_sizes: dict[str, dict[str, int]] = field(default_factory=dict)
    new_assignments: int = 0
    source_files: int = 0
    premises: int = 0
    traced_files: int = 0
    #: copies of a theorem in other repositories (same file, name and position): exported once
    copies_merged: int = 0
    #: corpus files left out because another repository has a file of the same path
    corpus_dropped: list[str] = field(default_factory=list)
    #: val/test theorems of novel_premises that no longer use a premise unseen in train
    novel_premises_violations: list[str] = field(default_factory=list)
    #: scheme -> what produced its splits
    split_settings: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def export_merged(
    conn: Connection,
    repos: Sequence[tuple[int, Repository]],
    output_path: Path,
    assignment: Assignment,
    *,
    progress: Progress | None = None,
) -> ExportReport:
    """Write the dataset for ``repos`` (id and record, in curriculum order) to ``output_path``
    with the splits of ``assignment`` (made by ``assign_splits`` and stored before: ``conn`` may be
    read-only)."""
    repo_ids = [repo_id for repo_id, _ in repos]
    report = ExportReport(
        output_path=output_path,
        new_assignments=assignment.new_assignments,
        copies_merged=assignment.copies,
        novel_premises_violations=assignment.novel_premises_violations,
        split_settings={s: describe_origin(o) for s, o in assignment.settings.items()},
        warnings=list(assignment.warnings),
    )
    total = len(assignment.exported)
    with LeanDojoWriter(output_path) as writer:
        for proof in stream_proofs(conn, theorems.c.repository_id.in_(repo_ids)):
            row = proof.theorem
            key = assignment.exported.get(row.id)
            if key is None:
                continue
            traced = [
                encode_tactic(
                    tactic,
                    annotated,
                    [
                        encode_premise_ref(name, path, (line, col), (end_line, end_col))
                        for _, _, _, name, path, line, col, end_line, end_col in refs
                    ],
                    before,
                    after,
                )
                for (_, _, tactic, annotated, before, after), refs in proof.tactics
            ]
            writer.write_theorem(
                encode_theorem(
                    row.url,
                    row.commit,
                    row.file_path,
                    row.full_name,
                    (row.start_line, row.start_column),
                    (row.end_line, row.end_column),
                    traced,
                    row.statement,
                ),
                {scheme: assignment.splits[scheme][key] for scheme in SCHEMES},
            )
            report.theorems += 1
            if progress is not None:
                progress(report.theorems, total)
        report.corpus_dropped = _write_corpus(conn, repo_ids, writer)
        writer.write_metadata(_metadata(repos, assignment.settings))
    report.split_sizes = {
        scheme: {split: writer.counts[scheme, split] for split in ("train", "val", "test")}
        for scheme in SCHEMES
    }
    report.source_files = writer.num_source_files
    report.premises = writer.num_premises
    report.traced_files = writer.num_traced_files
    return report


def _chosen_files(conn: Connection, repo_ids: Sequence[int]) -> tuple[set[int], list[str]]:
    """The file rows the corpus takes: for each path the one of the repository (and commit)
    added last, as for theorems; and the files of other repositories left out for it."""
    identity: dict[int, str] = {}
    names: dict[int, str] = {}
    for row in conn.execute(sa.select(repositories).where(repositories.c.id.in_(list(repo_ids)))):
        identity[row.id] = row.identity
        names[row.id] = f"{row.name}@{row.commit[:12]}"
    by_path: dict[str, list[tuple[int, int]]] = {}
    query = sa.select(files.c.id, files.c.repository_id, files.c.path).where(
        files.c.repository_id.in_(list(repo_ids))
    )
    for file_id, repo_id, path in conn.execute(query):
        by_path.setdefault(path, []).append((repo_id, file_id))
    keep: set[int] = set()
    dropped: list[str] = []
    for path, found in sorted(by_path.items()):
        found.sort()
        winner_repo, winner = found[-1]
        keep.add(winner)
        others = {identity[r] for r, _ in found} - {identity[winner_repo]}
        dropped.extend(
            f"{path} of {names[r]} (kept: {names[winner_repo]})"
            for r, _ in found
            if identity[r] in others
        )
    return keep, dropped


def _write_corpus(conn: Connection, repo_ids: Sequence[int], writer: LeanDojoWriter) -> list[str]:
    """corpus.jsonl and traced_files.jsonl: each path once; returns the files left out."""
    keep, dropped = _chosen_files(conn, repo_ids)
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
                corpus_premise(
                    pending.full_name,
                    pending.code,
                    (pending.start_line, pending.start_column),
                    (pending.end_line, pending.end_column),
                    pending.kind,
                )
            )
            pending = next(premise_rows, None)
        if file.id in keep:
            writer.write_source_file(corpus_line(file.path, loads_list(file.imports), items))
    traced_query = (
        sa.select(files.c.id, files.c.path)
        .where(files.c.repository_id.in_(list(repo_ids)), files.c.traced == 1)
        .order_by(files.c.id)
    )
    for file_id, path in conn.execute(traced_query):
        if file_id in keep:
            writer.write_traced_file(path)
    return dropped


def _metadata(
    repos: Sequence[tuple[int, Repository]], settings: dict[str, SplitOrigin | None]
) -> dict:
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
    # what produced the stored splits of each scheme: settings, imported labels, or unknown
    data["splits"] = {
        scheme: origin.model_dump() if isinstance(origin, SplitConfig) else origin
        for scheme, origin in settings.items()
    }
    return data
