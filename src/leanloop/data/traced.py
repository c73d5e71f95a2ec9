"""Turn a traced Lean project into records: theorems with their tactic steps (state before and
after, premises used, marked in the tactic text), the premise corpus and the traced files.

Positions become LeanDojo's convention (1-based columns). Lean's REPL reports the state before
each step, not the state after; :func:`states_after` derives it from the tactic blocks of the
source (see there). A step's premises are the constants Lean reports as used that the tactic
text names and whose definition is known (in the project or a scanned dependency).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from leanloop.data.records import (
    NO_GOALS,
    AnnotatedTactic,
    Pos,
    Premise,
    PremiseRef,
    Repository,
    SourceFile,
    Theorem,
    TheoremStatus,
    TracedTactic,
)
from leanloop.data.states import states_after
from leanloop.lean.elaboration import TacticStep
from leanloop.lean.lexer import Kind, tokenize
from leanloop.lean.project import LeanProject
from leanloop.lean.scanner import THEOREM_KINDS, Declaration, Location, SourceScan
from leanloop.lean.trace import FileTrace, ProjectTrace


def leandojo_pos(location: Location) -> Pos:
    """Lean's (line, 0-based column) as LeanDojo's (line, 1-based column)."""
    return Pos(location.line, location.column + 1)


@dataclass(frozen=True)
class PremiseLocation:
    path: str
    start: Pos
    end: Pos


@dataclass
class TracedProject:
    """The records of one traced project."""

    repository: Repository
    theorems: list[Theorem]
    source_files: list[SourceFile]
    traced_files: list[str]
    skipped: dict[str, str] = field(default_factory=dict)  # theorem or file -> why


def premise_locations(scans: Mapping[str, SourceScan]) -> dict[str, PremiseLocation]:
    """Full name -> where its name is written, for every named declaration."""
    index: dict[str, PremiseLocation] = {}
    for path, scanned in scans.items():
        for declaration in scanned.declarations:
            if declaration.full_name and declaration.name_start and declaration.name_end:
                index.setdefault(
                    declaration.full_name,
                    PremiseLocation(
                        path,
                        leandojo_pos(declaration.name_start),
                        leandojo_pos(declaration.name_end),
                    ),
                )
    return index


def steps_of(declaration: Declaration, tactics: Iterable[TacticStep]) -> list[TacticStep]:
    """The tactic steps inside a declaration, in source order (steps whose state before is
    ``no goals`` carry nothing to learn and are dropped, as LeanDojo does)."""
    inside = [
        t
        for t in tactics
        if declaration.contains(t.line, t.column) and t.goals_before.strip() != NO_GOALS
    ]
    return sorted(inside, key=lambda t: (t.line, t.column, -t.end_line, -t.end_column))


def _resolve(identifier: str, used: Iterable[str], context: Iterable[str]) -> str | None:
    """The used constant an identifier in the tactic refers to."""
    used = list(used)
    if identifier in used:
        return identifier
    candidates = [c for c in used if c.endswith("." + identifier)]
    if not candidates:
        return None
    for prefix in context:  # the enclosing namespaces and the open ones
        qualified = f"{prefix}.{identifier}"
        if qualified in candidates:
            return qualified
    return min(candidates, key=len)


def _longest_reference(
    identifier: str, used: list[str], context: list[str]
) -> tuple[str, int] | None:
    """The constant a dotted identifier names, with the length of the part naming it: the whole
    identifier, or the part before numeric projections (``foo.2`` names ``foo``); ``_root_.x``
    names ``x``. Field notation on a constant (``foo.mp``) names ``Iff.mp``, not ``foo``, and is
    not marked (as in LeanDojo's data)."""
    parts = identifier.split(".")
    projections = len(parts)
    while projections > 1 and parts[projections - 1].isdigit():
        projections -= 1
    for count in range(len(parts), projections - 1, -1):
        written = ".".join(parts[:count])
        name = written.removeprefix("_root_.")
        resolved = _resolve(name, used, context if name == written else [])
        if resolved is not None:
            return resolved, len(written)
    return None


def annotate(
    tactic: str,
    used_constants: Iterable[str],
    index: Mapping[str, PremiseLocation],
    context: Iterable[str] = (),
) -> AnnotatedTactic:
    """Mark the identifiers of ``tactic`` that name used constants with a known definition."""
    used = [c for c in used_constants if c in index]
    context = list(context)
    pieces: list[str] = []
    refs: list[PremiseRef] = []
    last = 0
    for token in tokenize(tactic):
        if token.kind is not Kind.IDENT:
            continue
        found = _longest_reference(token.text, used, context)
        if found is None:
            continue
        name, length = found
        location = index[name]
        pieces.append(tactic[last : token.start])
        pieces.append(f"<a>{tactic[token.start : token.start + length]}</a>")
        last = token.start + length
        refs.append(
            PremiseRef(
                full_name=name,
                def_path=location.path,
                def_pos=location.start,
                def_end_pos=location.end,
            )
        )
    pieces.append(tactic[last:])
    return AnnotatedTactic(text="".join(pieces), premises=tuple(refs))


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
    skipped = {path: f"not traced: {why}" for path, why in trace.failures.items()}
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
    )
