"""Premises in tactics: where each named declaration is written, and LeanDojo's marks on the
identifiers of a tactic that name used constants with a known definition (``<a>...</a>``).

Positions follow LeanDojo's convention (1-based columns).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from leanloop.data.records import AnnotatedTactic, Pos, PremiseRef
from leanloop.lean.lexer import Kind, tokenize
from leanloop.lean.scanner import Location, SourceScan


def leandojo_pos(location: Location) -> Pos:
    """Lean's (line, 0-based column) as LeanDojo's (line, 1-based column)."""
    return Pos(location.line, location.column + 1)


@dataclass(frozen=True)
class PremiseLocation:
    path: str
    start: Pos
    end: Pos


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
