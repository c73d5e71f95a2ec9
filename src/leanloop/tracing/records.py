"""Turn a traced Lean project into records: theorems with their tactic steps (state before and
after, premises used, marked in the tactic text), the premise corpus and the traced files.

Positions become LeanDojo's convention (1-based columns). Lean's REPL reports the state before
each step, not the state after; :func:`~leanloop.tracing.states.states_after` derives it from the
tactic blocks of the source (see there). A step's premises are the constants Lean reports as used
that the tactic text names and whose definition is known (in the project or a scanned dependency).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from leanloop.data.records import (
    NO_GOALS,
    Premise,
    Repository,
    SourceFile,
    Theorem,
    TheoremStatus,
    TracedTactic,
)
from leanloop.lean.elaboration import TacticStep
from leanloop.lean.project import LeanProject
from leanloop.lean.scanner import THEOREM_KINDS, Declaration, SourceScan
from leanloop.tracing.file_trace import FileTrace
from leanloop.tracing.premises import PremiseLocation, annotate, leandojo_pos, premise_locations
from leanloop.tracing.states import states_after
from leanloop.tracing.tracer import ProjectTrace


@dataclass
class TracedProject:
    """The records of one traced project, and how its tracing went: the files that could not be
    traced (with why), how many traced files came from the cache, and what was skipped."""

    repository: Repository
    theorems: list[Theorem]
    source_files: list[SourceFile]
    traced_files: list[str]
    skipped: dict[str, str] = field(default_factory=dict)  # theorem -> why (Lean's error)
    failures: dict[str, str] = field(default_factory=dict)  # file -> why it was not traced
    cached: int = 0  # traced files that came from the cache


def steps_of(declaration: Declaration, tactics: Iterable[TacticStep]) -> list[TacticStep]:
    """The tactic steps inside a declaration, in source order (steps whose state before is
    ``no goals`` carry nothing to learn and are dropped, as LeanDojo does)."""
    inside = [
        t
        for t in tactics
        if declaration.contains(t.line, t.column) and t.goals_before.strip() != NO_GOALS
    ]
    return sorted(inside, key=lambda t: (t.line, t.column, -t.end_line, -t.end_column))


def _context(declaration: Declaration) -> list[str]:
    namespaces = [
        ".".join(declaration.namespace[:i]) for i in range(len(declaration.namespace), 0, -1)
    ]
    return namespaces + list(declaration.opens)


def repository_of(project: LeanProject, files: Iterable[FileTrace]) -> Repository:
    """The repository record; a directory that is not a git checkout is identified by the
    content of its traced files."""
    commit = project.commit
    if not commit:
        digest = hashlib.sha256()
        for file in sorted(files, key=lambda f: f.path):
            digest.update(file.path.encode() + b"\0" + file.source.encode() + b"\0")
        commit = "content-" + digest.hexdigest()[:16]
    return Repository(
        url=project.identity, commit=commit, lean_version=project.lean_version, name=project.name
    )


def theorem_records(
    file: FileTrace,
    repository: Repository,
    index: Mapping[str, PremiseLocation],
    *,
    kinds: frozenset[str] = THEOREM_KINDS,
) -> tuple[list[Theorem], dict[str, str]]:
    """The theorems of one traced file, and those skipped with the reason."""
    theorems, skipped = [], {}
    errors = file.errors
    for declaration in file.scan.declarations:
        if declaration.kind not in kinds or not declaration.full_name:
            continue
        failing = [
            e for e in errors if e.line is not None and declaration.contains(e.line, e.column or 0)
        ]
        if failing:
            skipped[declaration.full_name] = f"Lean reported an error: {failing[0].text[:200]}"
            continue
        steps = steps_of(declaration, file.tactics)
        after = states_after(steps, file.source)
        context = _context(declaration)
        traced = tuple(
            TracedTactic(
                tactic=step.tactic,
                annotated_tactic=annotate(step.tactic, step.used_constants, index, context),
                state_before=step.goals_before,
                state_after=state_after,
            )
            for step, state_after in zip(steps, after, strict=True)
        )
        has_sorry = declaration.has_sorry or any(
            s.line is not None and declaration.contains(s.line, s.column or 0) for s in file.sorries
        )
        theorems.append(
            Theorem(
                url=repository.url,
                commit=repository.commit,
                file_path=file.path,
                full_name=declaration.full_name,
                start=leandojo_pos(declaration.start),
                end=leandojo_pos(declaration.end),
                statement=declaration.statement,
                traced_tactics=traced,
                status=TheoremStatus.SORRY if has_sorry else TheoremStatus.PROVEN,
            )
        )
    return theorems, skipped


def source_file_record(path: str, scanned: SourceScan, project: LeanProject) -> SourceFile:
    imports = [project.module_path(m) or m.replace(".", "/") + ".lean" for m in scanned.imports]
    premises = [
        Premise(
            full_name=d.full_name,
            file_path=path,
            start=leandojo_pos(d.code_start),
            end=leandojo_pos(d.end),
            code=d.code,
            kind=d.kind,
        )
        for d in scanned.declarations
        if d.full_name
    ]
    return SourceFile(path=path, imports=tuple(imports), premises=tuple(premises))


def records_from_trace(trace: ProjectTrace) -> TracedProject:
    """All records of a traced project (dependencies contribute premises, not theorems)."""
    scans = {f.path: f.scan for f in trace.files}
    index = premise_locations({**trace.dependencies, **scans})
    repository = repository_of(trace.project, trace.files)
    theorems: list[Theorem] = []
    skipped: dict[str, str] = {}  # theorems only: the files not traced are trace.failures
    for file in trace.files:
        found, problems = theorem_records(file, repository, index)
        theorems.extend(found)
        skipped.update(problems)
    files = [source_file_record(path, s, trace.project) for path, s in scans.items()]
    files += [source_file_record(path, s, trace.project) for path, s in trace.dependencies.items()]
    return TracedProject(
        repository=repository,
        theorems=theorems,
        source_files=files,
        traced_files=[f.path for f in trace.files],
        skipped=skipped,
        failures=dict(trace.failures),
        cached=trace.cached,
    )
