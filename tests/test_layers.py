"""The layer rule, checked on every import statement of ``src/leanloop`` (at module level or
inside functions): data flows one way, and no package imports from a layer to its right.

    lean → data → tracing → database → ml → retrieval → trainer | prover → agent | serve → cli

Packages on one step separated by '|' are siblings and do not import each other. The root
modules (errors, settings, configfile, lazy, atomic, words) and ``leanloop.__version__`` may be
imported from anywhere; the root modules import no package."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

import leanloop

SOURCE = Path(leanloop.__file__).parent
LAYERS = (
    ("lean",),
    ("data",),
    ("tracing",),
    ("database",),
    ("ml",),
    ("retrieval",),
    ("trainer", "prover"),
    ("agent", "serve"),
    ("cli",),
)
RANK = {package: rank for rank, step in enumerate(LAYERS) for package in step}
ROOT_MODULES = ("errors", "settings", "configfile", "lazy", "atomic", "words")


def module_name(path: Path) -> tuple[str, list[str]]:
    """The dotted name of a source file and the package its relative imports start from."""
    parts = ["leanloop", *path.relative_to(SOURCE).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
        return ".".join(parts), parts
    return ".".join(parts), parts[:-1]


def imports_of(path: Path) -> set[str]:
    """Every leanloop module an import statement in ``path`` names."""
    _, package = module_name(path)
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *(node.module or "").split(".")]).strip(".")
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return {n for n in names if n == "leanloop" or n.startswith("leanloop.")}


def package_of(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else None


def violations() -> list[str]:
    found = []
    for path in sorted(SOURCE.rglob("*.py")):
        module, _ = module_name(path)
        own = package_of(module)
        if own is None or own == "__main__":
            continue  # the top-level package re-exports lazily; 'python -m leanloop' is the CLI
        for name in sorted(imports_of(path)):
            target = package_of(name)
            if target is None or target == own or target in (*ROOT_MODULES, "__version__"):
                continue
            if own in ROOT_MODULES:
                found.append(f"{module} (a root module) imports {name}")
            elif target not in RANK:
                found.append(f"{module} imports {name}, which is in no layer")
            elif own not in RANK:
                found.append(f"{module} is in no layer")
            elif RANK[target] >= RANK[own]:
                found.append(f"{module} imports {name} ({target} is not left of {own})")
    return found


def test_every_package_is_in_a_layer():
    packages = {p.name for p in SOURCE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert packages <= set(RANK), packages - set(RANK)
    modules = {p.stem for p in SOURCE.glob("*.py")} - {"__init__", "__main__"}
    assert modules <= set(ROOT_MODULES), modules - set(ROOT_MODULES)


def test_no_import_against_the_layer_order():
    assert violations() == []


def test_the_check_sees_imports_inside_functions(tmp_path, monkeypatch):
    """The check itself fails on a violation, also one hidden in a function body."""
    fake = tmp_path / "leanloop"
    (fake / "data").mkdir(parents=True)
    (fake / "data" / "__init__.py").write_text("")
    (fake / "data" / "x.py").write_text(
        "def f():\n    from leanloop.database.dynamic import DynamicDatabase\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "SOURCE", fake)
    assert violations() == [
        "leanloop.data.x imports leanloop.database.dynamic (database is not left of data)",
        "leanloop.data.x imports leanloop.database.dynamic.DynamicDatabase "
        "(database is not left of data)",
    ]


@pytest.mark.parametrize("package", sorted(RANK))
def test_importing_a_package_has_no_side_effects(package, tmp_path, monkeypatch):
    """Importing creates no file or directory (the data, cache and current directories stay
    empty)."""
    import importlib
    import os

    if not (SOURCE / package).is_dir():
        pytest.skip(f"{package} is not built yet")
    monkeypatch.chdir(tmp_path)
    before = {p for p in tmp_path.rglob("*")}
    importlib.import_module(f"leanloop.{package}")
    assert {p for p in tmp_path.rglob("*")} == before
    for variable in ("LEANLOOP_DATA_DIR", "LEANLOOP_CACHE_DIR"):
        assert not Path(os.environ[variable]).exists()
