"""The package as type checkers (mypy, pyright) and IDEs see it: typed (PEP 561), its lazily
loaded names declared with their real imports, and its configurations' defaults visible in
their constructors. ``make typecheck`` runs mypy itself; these tests check what it cannot."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

import leanloop

SOURCE = Path(leanloop.__file__).parent
REPO = SOURCE.parent.parent


def lazy_packages() -> list[Path]:
    """The ``__init__.py`` files that load their names on first use (``_EXPORTS``)."""
    return sorted(
        path
        for path in SOURCE.rglob("__init__.py")
        if "_EXPORTS" in path.read_text(encoding="utf-8")
    )


def _is_type_checking(test: ast.expr) -> bool:
    return isinstance(test, ast.Name) and test.id == "TYPE_CHECKING"


def declared_exports(path: Path) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """``_EXPORTS``, the names imported under ``if TYPE_CHECKING:`` (name -> module) and the
    problems found in how the module is laid out."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    exports: dict[str, str] = {}
    declared: dict[str, str] = {}
    problems: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Assign):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            if "_EXPORTS" in names:
                exports = ast.literal_eval(node.value)
            if "__getattr__" in names:
                problems.append(f"line {node.lineno}: __getattr__ is visible to type checkers")
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            for statement in node.body:
                if not isinstance(statement, ast.ImportFrom) or statement.module is None:
                    problems.append(f"line {statement.lineno}: not a 'from M import N as N'")
                    continue
                for alias in statement.names:
                    if alias.asname != alias.name:  # 'as N' re-exports N (PEP 484, strict mypy)
                        problems.append(f"line {statement.lineno}: {alias.name} without 'as'")
                    declared[alias.asname or alias.name] = statement.module
            getattrs = [
                target.id
                for statement in node.orelse
                if isinstance(statement, ast.Assign)
                for target in statement.targets
                if isinstance(target, ast.Name)
            ]
            if getattrs != ["__getattr__"]:
                problems.append(f"line {node.lineno}: the else branch must set __getattr__ only")
    return exports, declared, problems


def test_the_package_is_marked_typed_and_ships_the_marker():
    assert (SOURCE / "py.typed").is_file()
    with open(REPO / "pyproject.toml", "rb") as handle:
        setuptools = tomllib.load(handle)["tool"]["setuptools"]
    assert "py.typed" in setuptools["package-data"]["leanloop"]


def test_the_check_finds_the_lazy_packages():
    found = {path.parent.name for path in lazy_packages()}
    assert {"leanloop", "trainer", "prover", "agent"} <= found


@pytest.mark.parametrize("path", lazy_packages(), ids=lambda p: p.parent.name)
def test_every_lazy_name_is_declared_with_its_real_import(path):
    """Type checkers see ``from leanloop import SFTTrainer`` as the class itself (not Any and
    not an error), and at run time the package still imports nothing until a name is used."""
    exports, declared, problems = declared_exports(path)
    assert exports, "no _EXPORTS read"
    assert problems == []
    assert declared == exports  # the same names from the same modules, none missing or extra


def test_the_declarations_change_nothing_at_run_time():
    import subprocess
    import sys

    code = (
        "import sys, leanloop, leanloop.trainer, leanloop.prover, leanloop.agent; "
        "heavy = [m for m in ('torch', 'transformers', 'leanloop.trainer.sft', "
        "'leanloop.prover.hf', 'leanloop.agent.hf_agent') if m in sys.modules]; "
        "assert heavy == [], heavy; "
        "assert leanloop.LeanloopError.__module__ == 'leanloop.errors'; "
        "print(hasattr(leanloop, 'NoSuchName'))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_the_check_reports_a_missing_or_plain_declaration(tmp_path):
    bad = tmp_path / "__init__.py"
    bad.write_text(
        "from typing import TYPE_CHECKING\n"
        "_EXPORTS = {'A': 'pkg.a', 'B': 'pkg.b'}\n"
        "if TYPE_CHECKING:\n"
        "    from pkg.a import A\n"
        "else:\n"
        "    __getattr__ = None\n"
        "__getattr__ = None\n"
    )
    exports, declared, problems = declared_exports(bad)
    assert declared != exports  # B is missing
    assert problems == ["line 4: A without 'as'", "line 7: __getattr__ is visible to type checkers"]


def positional_field_defaults(root: Path) -> list[str]:
    """Where a class field's ``Field(...)`` gives its default positionally: type checkers read
    defaults only from ``default=``/``default_factory=`` (PEP 681), so they would call the
    field required (``ProverConfig()`` an error for mypy without pydantic's plugin and for
    pyright). ``Field(...)`` (required) is fine."""
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for cls in ast.walk(tree):
            if not isinstance(cls, ast.ClassDef):
                continue
            for statement in cls.body:
                value = statement.value if isinstance(statement, ast.AnnAssign) else None
                if (
                    isinstance(value, ast.Call)
                    and isinstance(value.func, ast.Name)
                    and value.func.id == "Field"
                    and value.args
                    and not (isinstance(value.args[0], ast.Constant) and value.args[0].value is ...)
                ):
                    found.append(f"{path.relative_to(root)}:{statement.lineno} ({cls.name})")
    return found


def test_field_defaults_are_given_by_keyword():
    assert positional_field_defaults(SOURCE) == []


def test_the_field_check_sees_a_positional_default(tmp_path):
    (tmp_path / "m.py").write_text(
        "class C:\n"
        "    a: int = Field(1, ge=0)\n"
        "    b: int = Field(default=1)\n"
        "    c: int = Field(..., ge=0)\n"
    )
    assert positional_field_defaults(tmp_path) == ["m.py:2 (C)"]
