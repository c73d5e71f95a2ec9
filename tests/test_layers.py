"""The layer rule, checked on every import statement of ``src/leanloop`` (at module level or
inside functions): data flows one way, and no package imports from a layer to its right.

    lean → data → tracing → database → ml → retrieval → trainer | prover → agent | serve → cli

Packages on one step separated by '|' are siblings and do not import each other. The root
modules (errors, settings, configfile, lazy, atomic, words) and ``leanloop.__version__`` may be
imported from anywhere; the root modules import no package.

Inside a package (its sub-packages included) the modules import each other without a cycle:

- **No module imports its own package's facade.** A package's ``__init__`` is for callers
  outside it: inside, ``from leanloop.database import engine`` (or ``from . import x``) names
  the module instead (``import leanloop.database.engine as engine``), at module level or in a
  function alike. (A facade importing its package's modules, as every facade does, would
  otherwise close a cycle with the module importing it.)
- **Module-level imports form no cycle.** The graph has one node per module (a package's
  ``__init__`` stands for the package) and an edge for each import statement run when the
  module is imported: at module level, in ``if``/``try``/``with`` blocks there, not under
  ``if TYPE_CHECKING:`` (never run) and not inside a function or method (run when called: an
  import there, for lazy loading or to break a cycle, is allowed). ``from P import n`` points
  at ``P.n`` where that is a module, else at ``P``. A facade's lazy exports
  (``leanloop.lazy.lazy_exports``) count as its imports: reading the name runs the module.
  Python's own import of a module's parent packages is not counted: it is no statement, and it
  runs before the module, whose package is then already in ``sys.modules``."""

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


def _module_level(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """The import statements run when the module is imported (see the module's text)."""
    found: list[ast.Import | ast.ImportFrom] = []

    def walk(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                found.append(node)
            elif isinstance(node, ast.If):
                test = node.test
                name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", None)
                if name != "TYPE_CHECKING":
                    walk(node.body)
                walk(node.orelse)
            elif isinstance(node, ast.Try):
                walk(node.body)
                walk(node.orelse)
                walk(node.finalbody)
                for handler in node.handlers:
                    walk(handler.body)
            elif isinstance(node, ast.With | ast.ClassDef):
                walk(node.body)

    walk(tree.body)
    return found


def _named(path: Path, node: ast.Import | ast.ImportFrom, modules: set[str]) -> set[str]:
    """The leanloop modules an import statement points at (see the module's text)."""
    _, package = module_name(path)
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names} & modules
    base = package[: len(package) - node.level + 1] if node.level else []
    source = ".".join([*base, *(node.module or "").split(".")]).strip(".")
    targets = set()
    for alias in node.names:
        inner = f"{source}.{alias.name}"
        targets.add(inner if inner in modules else source)
    return targets & modules


def _lazy_exports(tree: ast.Module) -> set[str]:
    """The modules a facade's ``_EXPORTS`` of ``lazy_exports`` names."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "_EXPORTS" for t in node.targets
        ):
            value = ast.literal_eval(node.value)
            return set(value.values()) if isinstance(value, dict) else set()
    return set()


def _top(name: str) -> str:
    return ".".join(name.split(".")[:2])


def facade_imports() -> list[str]:
    """Each import, anywhere in a module, of the facade of the module's own package."""
    found = []
    for path in sorted(SOURCE.rglob("*.py")):
        module, package = module_name(path)
        own = ".".join(package)
        if package == ["leanloop"]:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                source = ".".join([*base, *(node.module or "").split(".")]).strip(".")
                if source == own and module != own:
                    names = ", ".join(a.name for a in node.names)
                    found.append(f"{module} imports {names} from its package's facade {own}")
    return found


def cycles() -> list[str]:
    """Each cycle of module-level imports between the modules of one package."""
    paths = {module_name(p)[0]: p for p in SOURCE.rglob("*.py")}
    modules = set(paths)
    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        targets: set[str] = set(_lazy_exports(tree)) & modules
        for node in _module_level(tree):
            targets |= _named(path, node, modules)
        graph[module] = {t for t in targets if t != module and _top(t) == _top(module)}
    found = []
    for component in _strongly_connected(graph):
        if len(component) > 1 and _top(component[0]) != "leanloop":
            found.append(" <-> ".join(sorted(component)))
    return sorted(found)


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of ``graph``."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            components.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def test_no_module_imports_its_own_package_s_facade():
    assert facade_imports() == []


def test_no_import_cycle_between_the_modules_of_a_package():
    assert cycles() == []


def test_the_cycle_check_sees_a_cycle_and_allows_a_lazy_import(tmp_path, monkeypatch):
    """The checks themselves fail on a cycle of module-level imports and on a facade imported
    from inside its package; an import in a function that would close a cycle is allowed."""
    fake = tmp_path / "leanloop"
    (fake / "data").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "data" / "__init__.py").write_text(
        "from leanloop.lazy import lazy_exports\n_EXPORTS = {'X': 'leanloop.data.x'}\n"
    )
    (fake / "data" / "x.py").write_text("from leanloop.data.y import Y\n")
    (fake / "data" / "y.py").write_text(
        "import typing\nif typing.TYPE_CHECKING:\n    from leanloop.data.x import X\n"
        "def f():\n    from leanloop.data.x import X\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "SOURCE", fake)
    assert cycles() == [] and facade_imports() == []
    (fake / "data" / "y.py").write_text(
        "try:\n    from leanloop.data import x\nexcept ImportError:\n    pass\n"
    )
    assert cycles() == ["leanloop.data.x <-> leanloop.data.y"]
    assert facade_imports() == ["leanloop.data.y imports x from its package's facade leanloop.data"]
    (fake / "data" / "y.py").write_text("def f():\n    from leanloop.data import X\n")
    (fake / "data" / "x.py").write_text("from leanloop.data.y import f\n")
    assert cycles() == []  # the facade is imported in a function only
    assert facade_imports() == ["leanloop.data.y imports X from its package's facade leanloop.data"]
    (fake / "data" / "y.py").write_text("from leanloop.data import X\n")
    assert cycles() == ["leanloop.data <-> leanloop.data.x <-> leanloop.data.y"]


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
    # a cache of its own, without the run's shared folder of converted models
    monkeypatch.setenv("LEANLOOP_CACHE_DIR", str(tmp_path.with_name(tmp_path.name + "-cache")))
    before = {p for p in tmp_path.rglob("*")}
    importlib.import_module(f"leanloop.{package}")
    assert {p for p in tmp_path.rglob("*")} == before
    for variable in ("LEANLOOP_DATA_DIR", "LEANLOOP_CACHE_DIR"):
        assert not Path(os.environ[variable]).exists()
