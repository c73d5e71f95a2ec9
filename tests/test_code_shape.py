"""The shape of the code in ``src/leanloop``: no function longer than 100 lines, and outside
``cli/`` (whose commands take one parameter per option) no function but a constructor
(``__init__``, ``__new__``) with more than 8 parameters. A function's lines run from its
``def`` to its last line (docstring included); its parameters are the positional and
keyword-only ones (``self``/``cls`` and ``*args``/``**kwargs`` not counted), as linters count
them.

Every package and root module is held to both rules except those in ``PENDING``, whose
functions are being reshaped by other changes; a pending package that meets the rules must
leave the list, so it only shrinks."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import leanloop

SOURCE = Path(leanloop.__file__).parent
MAX_LINES = 100
MAX_PARAMETERS = 8
#: Packages whose functions still break a rule (each is being reshaped by another change).
PENDING: frozenset[str] = frozenset()
#: Packages whose commands take one parameter per option.
MANY_PARAMETERS = frozenset({"cli"})
CONSTRUCTORS = frozenset({"__init__", "__new__"})


def units() -> list[str]:
    """The packages and root modules of ``src/leanloop``."""
    packages = [p.name for p in SOURCE.iterdir() if (p / "__init__.py").exists()]
    modules = [p.stem for p in SOURCE.glob("*.py")]
    return sorted({*packages, *modules})


def files_of(unit: str) -> list[Path]:
    directory = SOURCE / unit
    return sorted(directory.rglob("*.py")) if directory.is_dir() else [SOURCE / f"{unit}.py"]


def functions(path: Path) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node


def parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    args = node.args
    names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
    return len(names[1:] if names and names[0] in ("self", "cls") else names)


def problems(unit: str) -> list[str]:
    """Each function of ``unit`` that breaks a rule, with where it is and by how much."""
    found = []
    for path in files_of(unit):
        where = path.relative_to(SOURCE)
        for node in functions(path):
            assert node.end_lineno is not None
            lines = node.end_lineno - node.lineno + 1
            if lines > MAX_LINES:
                found.append(f"{where}:{node.lineno} {node.name} has {lines} lines")
            count = parameters(node)
            if (
                count > MAX_PARAMETERS
                and node.name not in CONSTRUCTORS
                and unit not in MANY_PARAMETERS
            ):
                found.append(f"{where}:{node.lineno} {node.name} takes {count} parameters")
    return found


@pytest.mark.parametrize("unit", [u for u in units() if u not in PENDING])
def test_functions_are_short_and_take_few_parameters(unit):
    assert problems(unit) == []


@pytest.mark.parametrize("unit", sorted(PENDING))
def test_a_pending_package_leaves_the_list_once_it_meets_the_rules(unit):
    assert (SOURCE / unit).is_dir(), f"{unit} is no package: remove it from PENDING"
    assert problems(unit), f"{unit} meets the rules now: remove it from PENDING"


def test_the_rules_see_a_long_function_and_many_parameters(tmp_path, monkeypatch):
    import sys

    package = tmp_path / "demo"
    package.mkdir()
    (package / "__init__.py").write_text("")
    body = "\n".join(f"    x{i} = {i}" for i in range(99))
    (package / "m.py").write_text(
        f"def long():\n{body}\n    return x0\n\n"
        "def short(a, b, c, d, e, f, g, h, *rest, **options):\n    pass\n\n"
        "def wide(a, b, c, d, e, f, g, h, *, i):\n    pass\n\n"
        "class C:\n"
        "    def __init__(self, a, b, c, d, e, f, g, h, i):\n        pass\n\n"
        "    def method(self, a, b, c, d, e, f, g, h):\n        pass\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "SOURCE", tmp_path)
    assert problems("demo") == [
        "demo/m.py:1 long has 101 lines",
        "demo/m.py:106 wide takes 9 parameters",
    ]
