"""Find what Lean work needs — elan, lake, lean, the toolchain a project pins, the executable of
each Lean backend (``leanloop.lean.backends``: the Lean REPL, Pantograph) — and say plainly what
is missing and the commands that install it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from leanloop.lean.errors import ServerNotFound, ToolchainNotFound
from leanloop.lean.project import LeanProject

ELAN_INSTALL = "curl https://elan.lean-lang.org/elan-init.sh -sSf | sh"


@dataclass(frozen=True)
class Check:
    """One thing looked for: found (with where/version) or missing (with the fix)."""

    name: str
    found: bool
    detail: str
    fix: str | None = None
    required: bool = True


@dataclass
class ToolchainReport:
    """Everything ``leanloop doctor`` reports."""

    elan: Path | None = None
    lake: Path | None = None
    lean: Path | None = None
    lean_version: str | None = None
    pinned: str | None = None
    pinned_installed: bool | None = None
    #: each backend's executable (by the backend's name), None where it was not found
    servers: dict[str, Path | None] = field(default_factory=dict)
    checks: list[Check] = field(default_factory=list)

    @property
    def repl(self) -> Path | None:
        """The Lean REPL's executable."""
        return self.servers.get("repl")

    @property
    def pantograph(self) -> Path | None:
        """Pantograph's executable."""
        return self.servers.get("pantograph")

    @property
    def ok(self) -> bool:
        return all(c.found for c in self.checks if c.required)

    def missing(self) -> list[Check]:
        return [c for c in self.checks if not c.found and c.required]

    def render(self) -> list[str]:
        lines = []
        for check in self.checks:
            mark = "ok " if check.found else ("-- " if not check.required else "XX ")
            lines.append(f"[{mark}] {check.name}: {check.detail}")
            if not check.found and check.fix:
                lines.append(f"        fix: {check.fix}")
        return lines


def elan_home() -> Path:
    from leanloop.settings import Settings

    return Settings.from_env().elan_home


def find_executable(name: str) -> Path | None:
    """``name`` on PATH, else in elan's bin directory."""
    found = shutil.which(name)
    if found:
        return Path(found)
    candidate = elan_home() / "bin" / name
    return candidate if candidate.is_file() and os.access(candidate, os.X_OK) else None


def _version(executable: Path, *args: str) -> str | None:
    try:
        result = subprocess.run(
            [str(executable), *args], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (result.stdout or result.stderr).strip()
    return text.splitlines()[0] if text else None


def toolchain_dir_name(toolchain: str) -> str:
    """elan's directory name for a toolchain: ``leanprover/lean4:v4.9.0`` ->
    ``leanprover--lean4---v4.9.0``."""
    return toolchain.strip().replace("/", "--").replace(":", "---")


def installed_toolchains() -> list[str]:
    """Toolchains elan has installed, as written in lean-toolchain files."""
    directory = elan_home() / "toolchains"
    if not directory.is_dir():
        return []
    names = []
    for entry in sorted(directory.iterdir()):
        if entry.is_dir():
            names.append(re.sub(r"---", ":", entry.name, count=1).replace("--", "/"))
    return names


def toolchain_installed(toolchain: str) -> bool:
    return (elan_home() / "toolchains" / toolchain_dir_name(toolchain)).is_dir()


def toolchain_sources(toolchain: str) -> Path | None:
    """The Lean sources (Init, Std, Lean) shipped with an installed toolchain, if present."""
    path = elan_home() / "toolchains" / toolchain_dir_name(toolchain) / "src" / "lean"
    return path if path.is_dir() else None


def find_server(
    kind: str, project: LeanProject | None = None, configured: str | Path | None = None
) -> Path | None:
    """The executable of backend ``kind`` (``repl``, ``pantograph``: see
    ``leanloop.lean.backends``): as configured (or named by its variable, ``$LEANLOOP_REPL`` /
    ``$LEANLOOP_PANTOGRAPH``), built inside the project's Lake packages, or on PATH."""
    from leanloop.lean.backends import backend
    from leanloop.settings import Settings

    wanted = backend(kind).executable
    if wanted is None:
        return None
    explicit = configured or Settings.variable(wanted.variable)
    if explicit:
        path = Path(explicit).expanduser()
        return path if path.is_file() else None
    if project is not None:
        for package in wanted.packages:
            for name in wanted.programs:
                candidate = (
                    project.root / ".lake" / "packages" / package / ".lake" / "build" / "bin" / name
                )
                if candidate.is_file():
                    return candidate
    found = shutil.which(wanted.programs[0])
    return Path(found) if found else None


def diagnose(
    project: LeanProject | None = None,
    *,
    repl: str | Path | None = None,
    pantograph: str | Path | None = None,
    configured: dict[str, str | Path | None] | None = None,
) -> ToolchainReport:
    """Look for everything; never raises. ``repl``, ``pantograph`` and ``configured`` (by
    backend name) give executables as configured."""
    report = ToolchainReport()
    report.elan = find_executable("elan")
    report.checks.append(
        Check(
            "elan",
            report.elan is not None,
            str(report.elan) if report.elan else "not found (installs and selects toolchains)",
            fix=ELAN_INSTALL,
        )
    )
    report.lake = find_executable("lake")
    report.checks.append(
        Check(
            "lake",
            report.lake is not None,
            _version(report.lake, "--version") or str(report.lake) if report.lake else "not found",
            fix=f"{ELAN_INSTALL}   (elan provides lake and lean)",
        )
    )
    report.lean = find_executable("lean")
    if report.lean is not None:
        report.lean_version = _version(report.lean, "--version")
    report.checks.append(
        Check(
            "lean",
            report.lean is not None,
            report.lean_version or "not found",
            fix=f"{ELAN_INSTALL}   (elan provides lake and lean)",
        )
    )
    if project is not None:
        report.pinned = project.toolchain
        if project.toolchain is None:
            report.checks.append(
                Check(
                    "project toolchain",
                    False,
                    f"{project.root} has no lean-toolchain file",
                    fix="add a lean-toolchain file, e.g. 'leanprover/lean4:v4.9.0'",
                )
            )
        else:
            report.pinned_installed = toolchain_installed(project.toolchain)
            report.checks.append(
                Check(
                    "project toolchain",
                    report.pinned_installed,
                    f"{project.toolchain} "
                    + ("installed" if report.pinned_installed else "is not installed"),
                    fix=f"elan toolchain install {project.toolchain}",
                )
            )
    from leanloop.lean.backends import BACKENDS

    given = {"repl": repl, "pantograph": pantograph, **(configured or {})}
    for name, entry in BACKENDS.items():
        wanted = entry.executable
        if wanted is None:
            continue
        found = report.servers[name] = find_server(name, project, given.get(name))
        detail = str(found) if found else wanted.missing
        report.checks.append(
            Check(wanted.check, found is not None, detail, fix=wanted.fix, required=wanted.required)
        )
    report.checks.append(_sandbox_check())
    return report


def _sandbox_check() -> Check:
    """Whether the sandbox of Lean processes can be set up (``leanloop.lean.sandbox``)."""
    from leanloop.lean.sandbox import SandboxConfig, sandbox_problem, sandbox_problem_hint

    config = SandboxConfig().resolved()
    if not config.enabled:
        detail = "turned off (LEANLOOP_SANDBOX=off): the code Lean elaborates has your rights"
        return Check("sandbox", False, detail, required=False)
    problem = sandbox_problem(config)
    if problem is None:
        return Check("sandbox", True, "bubblewrap works (no network, read-only, no processes)")
    return Check("sandbox", False, problem, fix=sandbox_problem_hint(config))


def require_tools() -> ToolchainReport:
    """What every Lean step needs (elan, lake and lean), checked before a project is cloned,
    built or traced: a clear error naming what is missing and how to install it. The project's
    own toolchain and the REPL are looked for later, in the project (``require``)."""
    report = diagnose()
    for check in report.checks:
        if check.name in ("elan", "lake", "lean") and not check.found:
            raise ToolchainNotFound(
                f"no Lean toolchain: {check.name} {check.detail}",
                hint=f"{check.fix}; 'leanloop doctor' shows everything that is missing",
            )
    return report


def require(
    project: LeanProject | None = None,
    *,
    server: str = "repl",
    executable: str | Path | None = None,
) -> ToolchainReport:
    """The report, or a clear error naming what is missing and how to install it: the toolchain
    and the executable of backend ``server`` (as configured by ``executable``)."""
    from leanloop.lean.backends import backend

    report = diagnose(project, configured={server: executable})
    for check in report.checks:
        if check.name in ("elan", "lake", "lean", "project toolchain") and not check.found:
            raise ToolchainNotFound(
                f"no Lean toolchain: {check.name} {check.detail}",
                hint=f"{check.fix}; 'leanloop doctor' shows everything that is missing",
            )
    wanted = backend(server).executable
    if wanted is not None and report.servers.get(server) is None:
        raise ServerNotFound(f"the {server} executable was not found", hint=wanted.fix)
    return report
