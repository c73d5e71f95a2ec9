"""Tracing sits between the records and the database: ``leanloop.tracing`` may use ``lean/`` and
``data/`` but nothing to its right, ``lean/`` does not use it, and ``data/`` holds records only
(no Lean server, no tracing). Checked on every import statement, at module level or inside
functions."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import leanloop

SOURCE = Path(leanloop.__file__).parent
#: The layers to the right of tracing (the root modules may be imported from anywhere).
RIGHT_OF_TRACING = ("database", "ml", "retrieval", "trainer", "prover", "agent", "serve", "cli")


def imports_of(package: str) -> dict[str, set[str]]:
    """Module of ``leanloop.<package>`` -> the modules its import statements name."""
    found: dict[str, set[str]] = {}
    for path in sorted((SOURCE / package).rglob("*.py")):
        parts = ["leanloop", *path.relative_to(SOURCE).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
            package_parts = parts
        else:
            package_parts = parts[:-1]
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = package_parts[: len(package_parts) - node.level + 1] if node.level else []
                module = ".".join([*base, *(node.module or "").split(".")]).strip(".")
                names.add(module)
                names.update(f"{module}.{alias.name}" for alias in node.names)
        found[".".join(parts)] = names
    return found


def offending(package: str, forbidden: tuple[str, ...]) -> list[tuple[str, str]]:
    return [
        (module, name)
        for module, names in imports_of(package).items()
        for name in sorted(names)
        if any(name == f or name.startswith(f + ".") for f in forbidden)
    ]


def test_the_import_walk_sees_every_kind_of_import():
    """The check itself: imports at module level and inside functions are both seen."""
    imports = imports_of("tracing")
    project = imports["leanloop.tracing.project"]
    assert "leanloop.tracing.records" in project  # module level
    assert "leanloop.lean.build" in project and "leanloop.settings" in project  # in a function
    assert len(imports) >= 8


def test_tracing_does_not_import_the_database_or_anything_right_of_it():
    assert offending("tracing", tuple(f"leanloop.{layer}" for layer in RIGHT_OF_TRACING)) == []


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("lean", ("leanloop.tracing", "leanloop.data")),
        ("data", ("leanloop.tracing", "leanloop.lean.repl", "leanloop.lean.pool")),
    ],
)
def test_layers_left_of_tracing_do_not_import_it(package, forbidden):
    assert offending(package, forbidden) == []
