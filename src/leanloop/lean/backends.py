"""Lean backends by name, and the one way leanloop starts them: ``open_servers(spec, project,
options)`` checks what the backend needs (the toolchain, its executable, the sandbox) once and
gives a ``Launcher``, a picklable maker of ``LeanServer``s (a Ray worker starts its servers
where it runs) that tracing, proving, the agents, the model server's ``/verify``, the Lean
reward and the command line all use.

``BACKENDS`` lists them: ``repl`` (the Lean REPL, which can do everything leanloop asks),
``pantograph`` (Pantograph's REPL: proof search, checks with an account of the commands made of
its compilation units, no tactic trace and no infotree) and ``replay`` (recorded proof
transitions, no Lean: its proofs are ``replayed``, never ``proved``). Each entry says where its
server class is (``module:Class``, imported when it is opened — ``replay`` reads data records,
so it lives in ``leanloop.prover``) and what it can do (``FEATURES``); a request a backend
cannot make is refused with ``Unsupported`` before anything starts or is sent. Every backend
that starts a Lean process starts it in the sandbox (``leanloop.lean.sandbox``), unless the
sandbox was turned off.

A new backend is a module in ``lean/`` with its ``LeanServer`` (and a ``start(launcher, key)``
classmethod), one entry here, and its test."""

from __future__ import annotations

import importlib
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from leanloop.errors import LeanloopError
from leanloop.lean.errors import Unsupported
from leanloop.lean.project import LeanProject, open_project
from leanloop.lean.sandbox import SandboxConfig, prepare_sandbox

if TYPE_CHECKING:
    from leanloop.lean.server import LeanServer

#: What a backend can do beyond starting proofs, running tactics and checking code (with
#: Lean's messages and sorries), each with what it is for.
FEATURES = {
    "tactics": "every tactic of the code with the goals before it and where it is (tracing)",
    "account": "Lean's account of the top-level commands it elaborated, with where each is "
    "(without it no check counts as proved)",
    "elaborators": "the syntax kind and elaborator of each command of the account (so that a "
    "command a macro rewrote is seen)",
    "infotree": "Lean's infotree of the code, as the server sends it ('/verify' with "
    "infotree_type)",
}


REPL_REPOSITORY = "https://github.com/leanprover-community/repl"
PANTOGRAPH_REPOSITORY = "https://github.com/stanford-centaur/PyPantograph"


@dataclass(frozen=True)
class Executable:
    """Where ``leanloop.lean.toolchain`` looks for a backend's executable, and what
    ``leanloop doctor`` says of it: the variable naming it, the programs' names, the Lake
    packages of the project it may be built in, how to get it, and whether leanloop needs it
    (an optional one is reported, not required)."""

    check: str
    variable: str
    programs: tuple[str, ...]
    packages: tuple[str, ...]
    fix: str
    required: bool = True
    missing: str = "not found"


@dataclass(frozen=True)
class LeanBackend:
    """One backend: its name and title (in messages), its server class (``module:Class``, with
    a ``start(launcher, key)`` classmethod; for a backend without Lean, a maker called with the
    launcher's root), its executable (None: no Lean process), what it can do, and a line that
    says what it is."""

    name: str
    title: str
    server: str
    executable: Executable | None
    features: frozenset[str]
    summary: str
    #: what it lacks, said where a request needs it (a feature missing from ``features``)
    lacks: str = ""

    def open(self, launcher: Launcher, key: Hashable) -> LeanServer:
        """A new server of this backend, as ``launcher`` says (its process starts on the first
        request)."""
        module, _, name = self.server.partition(":")
        target: Any = importlib.import_module(module)
        for part in name.split("."):
            target = getattr(target, part)
        if self.executable is None:
            return target(launcher.root)
        return target.start(launcher, key)


BACKENDS: dict[str, LeanBackend] = {
    "repl": LeanBackend(
        "repl",
        "Lean REPL",
        "leanloop.lean.repl:ReplServer",
        Executable(
            "Lean REPL",
            "LEANLOOP_REPL",
            ("repl",),
            ("repl", "REPL"),
            f"add 'require REPL from git \"{REPL_REPOSITORY}\"' (at the tag matching your "
            "toolchain) to the lakefile and run 'lake build repl', or build it from "
            f"{REPL_REPOSITORY} and set LEANLOOP_REPL to the executable",
        ),
        frozenset(FEATURES),
        "the Lean REPL (leanprover-community/repl): everything leanloop asks of Lean",
    ),
    "pantograph": LeanBackend(
        "pantograph",
        "Pantograph",
        "leanloop.lean.pantograph:PantographServer",
        Executable(
            "Pantograph",
            "LEANLOOP_PANTOGRAPH",
            ("pantograph-repl", "repl"),
            ("pantograph", "Pantograph", "PyPantograph"),
            f"build pantograph-repl from {PANTOGRAPH_REPOSITORY} (its 'src' Lean project) and "
            "set LEANLOOP_PANTOGRAPH to the executable",
            required=False,
            missing="not found (optional: the REPL backend does everything leanloop needs)",
        ),
        frozenset({"account"}),
        "Pantograph's REPL (stanford-centaur/PyPantograph): proof search and checks",
        lacks="Pantograph's frontend reports no position for the tactics it runs and no "
        "infotree, and its account of the commands (its compilation units) names no syntax "
        "kinds or elaborators",
    ),
    "replay": LeanBackend(
        "replay",
        "replay",
        "leanloop.prover.replay:ReplayServer.from_dataset",
        None,
        frozenset(),
        "recorded proof transitions of a LeanDojo-format dataset, no Lean (outcomes are "
        "'replayed', never 'proved')",
        lacks="a replay follows recorded transitions and checks no code",
    ),
}


def backend(name: str, needs: Iterable[str] = ()) -> LeanBackend:
    """The backend called ``name``, which must have the features ``needs``.

    Args:
        name: Its name (``repl``, ``pantograph``, ``replay``).
        needs: Features the caller will ask for (see ``FEATURES``).

    Returns:
        Its entry.

    Raises:
        LeanloopError: No backend has that name (the known ones are listed).
        Unsupported: The backend lacks a feature of ``needs``.
    """
    found = BACKENDS.get(name)
    if found is None:
        raise LeanloopError(f"unknown Lean backend {name!r}", hint=f"one of: {', '.join(BACKENDS)}")
    for feature in needs:
        if feature not in found.features:
            raise unsupported(name, feature)
    return found


def lean_backend(name: str) -> str:
    """``name`` when it names a backend that starts Lean (a configuration's choice of checker);
    ``ValueError`` (a pydantic validator's error) saying which do otherwise.

    Args:
        name: The backend's name.

    Returns:
        The name.

    Raises:
        ValueError: No backend of that name starts Lean.
    """
    names = [b.name for b in BACKENDS.values() if b.executable is not None]
    if name not in names:
        raise ValueError(f"expected a Lean backend, one of {', '.join(names)}; got {name!r}")
    return name


def unsupported(name: str, feature: str) -> Unsupported:
    """The error saying that backend ``name`` cannot give ``feature``, and what can."""
    entry = BACKENDS.get(name)
    why = f" ({entry.lacks})" if entry is not None and entry.lacks else ""
    able = [b.name for b in BACKENDS.values() if feature in b.features]
    return Unsupported(
        f"the {name} backend cannot give {FEATURES.get(feature, feature)}{why}",
        hint=f"use the {' or '.join(able)} backend (--lean {able[0]})" if able else None,
    )


class LeanOptions(BaseModel):
    """How the servers of a backend are started: the limits of each request and process, the
    executable, the sandbox, and Pantograph's modules and options."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    timeout: float = Field(default=60.0, gt=0, description="Seconds a request may take.")
    start_timeout: float = Field(
        default=300.0, gt=0, description="Seconds a process may take to start."
    )
    memory_limit_mb: float | None = Field(
        default=None, gt=0, description="Stop a process that uses more memory than this."
    )
    executable: Path | None = Field(
        default=None,
        description="The backend's executable (default: $LEANLOOP_REPL or "
        "$LEANLOOP_PANTOGRAPH, the project's Lake packages, then the PATH).",
    )
    sandbox: SandboxConfig = Field(
        default_factory=SandboxConfig,
        description="The sandbox of the processes (see docs/sandbox.md).",
    )
    modules: tuple[str, ...] = Field(
        default=(),
        description="Pantograph: the modules its process imports (default: those of the "
        "code it is started for, else Init).",
    )
    pantograph_options: tuple[tuple[str, Any], ...] = Field(
        default=(),
        description="Pantograph: its options (options.set, given as a mapping), set again "
        "after each restart.",
    )

    @field_validator("pantograph_options", mode="before")
    @classmethod
    def _pairs(cls, value: Any) -> Any:
        """A mapping is kept as its sorted pairs, so that the options stay hashable."""
        return tuple(sorted(value.items())) if isinstance(value, Mapping) else value


@dataclass(frozen=True)
class Launcher:
    """Starts servers of one backend in one project, as ``open_servers`` checked they can be:
    ``launcher()`` (or ``launcher(key)``, as a ``ServerPool`` factory calls it) gives a new
    server whose process starts on its first request. Picklable, so that a Ray worker starts
    its servers where it runs."""

    backend: str
    root: Path
    executable: Path | None = None
    lake: str = "lake"
    options: LeanOptions = field(default_factory=LeanOptions)

    def __call__(self, key: Hashable = None) -> LeanServer:
        return backend(self.backend).open(self, key)

    def with_root(self, root: str | Path) -> Launcher:
        """The same launcher for another checkout of the project (e.g. a git worktree)."""
        return replace(self, root=Path(root))

    @property
    def timeout(self) -> float:
        """Seconds a request may take."""
        return self.options.timeout

    @property
    def sandbox(self) -> SandboxConfig:
        """The sandbox of the processes, every switch resolved."""
        return self.options.sandbox


def open_servers(
    spec: str,
    project: LeanProject | str | Path,
    options: LeanOptions | None = None,
    *,
    needs: Iterable[str] = (),
) -> Launcher:
    """A launcher of the servers of backend ``spec`` in ``project``, after checking what they
    need: that Lean and the backend's executable are installed (``ToolchainNotFound`` /
    ``ServerNotFound`` say what is missing and how to get it) and that the sandbox can be set up
    (``SandboxUnavailable`` says what is missing), unless it was turned off. The sandbox's
    switches are read from the settings here, so that workers elsewhere start processes as this
    process decided.

    Args:
        spec: The backend's name (``repl``, ``pantograph``, ``replay``).
        project: The Lean project (a ``LeanProject`` or its directory); for ``replay``, the
            LeanDojo-format dataset whose transitions are replayed.
        options: Limits, executable, sandbox (default: ``LeanOptions()``).
        needs: Features the caller will ask for (see ``FEATURES``): a backend that lacks one
            is refused here, before anything is checked or started.

    Returns:
        The launcher (no process started yet).

    Raises:
        LeanloopError: ``spec`` names no backend.
        Unsupported: The backend lacks a feature in ``needs``.
    """
    entry = backend(spec, needs)
    options = options or LeanOptions()
    if entry.executable is None:
        root = project.root if isinstance(project, LeanProject) else Path(project)
        return Launcher(spec, root, options=options)
    from leanloop.lean.toolchain import require

    if not isinstance(project, LeanProject):
        project = open_project(project)
    report = require(project, server=spec, executable=options.executable)
    executable = report.servers.get(spec)
    assert executable is not None  # require() raises otherwise
    prepare_sandbox(options.sandbox, root=project.root, lake=report.lake, name=entry.title)
    resolved = options.model_copy(update={"sandbox": options.sandbox.resolved()})
    return Launcher(spec, project.root, Path(executable), str(report.lake or "lake"), resolved)
