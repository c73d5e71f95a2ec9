"""Scans of the sources a project depends on (its Lake packages and its toolchain's library), for
the premises defined there."""

from __future__ import annotations

from pathlib import Path

from leanloop.lean.project import LeanProject
from leanloop.lean.scanner import SourceScan, scan


def scan_dependencies(project: LeanProject) -> dict[str, SourceScan]:
    """Scans of the ``.lean`` files of the project's packages and of its toolchain's sources,
    keyed by path (relative to the project root, or under the toolchain's ``src/lean``)."""
    from leanloop.lean.toolchain import toolchain_sources

    roots: list[tuple[Path, Path]] = [(root, project.root) for _, root in project.package_roots()]
    if project.toolchain:
        sources = toolchain_sources(project.toolchain)
        if sources is not None:
            roots.append((sources, sources.parent.parent))
    scans: dict[str, SourceScan] = {}
    for root, base in roots:
        for file in sorted(root.rglob("*.lean")):
            if ".lake" in file.relative_to(root).parts:
                continue
            try:
                text = file.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            scans[str(file.relative_to(base))] = scan(text)
    return scans
