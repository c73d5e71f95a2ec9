"""The sandbox of the Lean processes leanloop starts to check code.

Elaborating Lean code runs code (``#eval``, ``run_cmd``, tactics, macros), with the rights of
the Lean process. The REPL and Pantograph processes that check model-written candidates
therefore run, by default, in a sandbox made with bubblewrap (``bwrap``):

- **No network.** A new network namespace (``--unshare-all``) with a loopback interface of its
  own and nothing else: the host's servers, its loopback ones included, are out of reach (and
  so are abstract Unix sockets, which belong to the network namespace).
- **A file system that is read-only, and small.** Not the whole machine read-only (``--ro-bind
  / /``): a Unix socket on a read-only mount can still be connected to (the Docker socket, the
  session bus, which starts commands outside, an ssh agent), and the home directory holds
  secrets that a message could carry into logs, datasets and model contexts. What the process
  sees is the system (``/usr``, ``/etc``, the ``/lib`` directories, ``/sys``, ``/nix`` and
  ``/gnu`` where they exist), the project, elan's home (toolchains), the program's directory,
  every path of Lake's environment (``LEAN_PATH``, ``LEAN_SYSROOT``, ``LD_LIBRARY_PATH``...)
  and the paths a configuration adds, all read-only; a fresh ``/dev`` and ``/proc``; and one
  writable directory, a fresh scratch directory per process (its ``TMPDIR`` and ``HOME``),
  removed when the process ends.
- **Only Lean's variables.** The environment holds what ``lake env`` sets, the locale, the
  ``LEAN*``/``LAKE*``/``ELAN*`` variables and ``PATH``: not the user's tokens and keys.
- **No new processes.** A Lean check never needs one. A seccomp filter
  (``leanloop.lean.seccomp``, given to bwrap with ``--seccomp FD``) refuses ``fork``,
  ``vfork`` and ``clone`` without ``CLONE_THREAD``, and answers ``clone3`` with ``ENOSYS`` so
  that the C library falls back to ``clone``: threads keep working (Lean runs a thread pool).
  ``bv_decide`` runs a SAT solver as a process and so fails in the sandbox unless
  ``subprocesses`` is on (which leaves the filter out; the rest of the sandbox stays).
- **Limits.** ``RLIMIT_CPU``, ``RLIMIT_FSIZE``, ``RLIMIT_NOFILE``, ``RLIMIT_CORE`` (0) and
  optionally ``RLIMIT_AS``, set by a few lines of Python that then execute bwrap. The address
  space is not limited by default: Lean maps its ``.olean`` files (gigabytes for Mathlib), so
  address space says little about memory; resident memory is what ``memory_limit_mb`` watches
  (over the whole process tree).

``lake env <program>`` starts the program as its child, which the filter forbids. So Lake runs
once per project and environment, outside the sandbox, to print the environment it gives
(``lake env python -c ...``), and the program runs in the sandbox directly with that
environment. (That run elaborates the project's lakefile: the user's code, not a candidate.)

bwrap's ``--die-with-parent`` kills the sandbox when the *thread* that started bwrap ends
(``PR_SET_PDEATHSIG``), so every sandboxed process is started from one long-lived thread of
leanloop's: the sandbox lives as long as the leanloop process, and dies with it.

Where the sandbox cannot be set up (not Linux, no bwrap, no user namespaces), leanloop says so
in one line and refuses to start the process, unless the sandbox was turned off explicitly
(``LEANLOOP_SANDBOX=off``, or ``enabled: false`` in the configuration), which is logged once.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import weakref
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from leanloop.lean.errors import SandboxUnavailable, ServerNotFound, ServerStartError, excerpt
from leanloop.lean.seccomp import seccomp_filter

log = logging.getLogger(__name__)

_OFF = "or set LEANLOOP_SANDBOX=off to run Lean without a sandbox"
INSTALL_HINT = f"install bubblewrap ('apt install bubblewrap', 'dnf install bubblewrap'), {_OFF}"
USERNS_HINT = (
    "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; on Ubuntu "
    f"24.04 an AppArmor profile for bwrap), {_OFF}"
)

# -- configuration --------------------------------------------------------------------------------


class SandboxConfig(BaseModel):
    """How the Lean processes that check code are sandboxed (see ``docs/sandbox.md``).

    ``enabled`` and ``subprocesses`` left at None follow ``LEANLOOP_SANDBOX`` and
    ``LEANLOOP_SANDBOX_SUBPROCESSES``; a value given here wins over the environment.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool | None = Field(
        default=None,
        description="Run the Lean processes that check code in the sandbox (None: "
        "$LEANLOOP_SANDBOX, on unless it says off). False is the explicit opt-out: the code "
        "Lean elaborates then runs with your rights.",
    )
    subprocesses: bool | None = Field(
        default=None,
        description="Let the sandboxed process start processes, as bv_decide does (its SAT "
        "solver); the rest of the sandbox stays (None: $LEANLOOP_SANDBOX_SUBPROCESSES, off).",
    )
    bwrap: str = Field(
        default="bwrap",
        min_length=1,
        description="The bubblewrap executable: a name looked up on the PATH (bwrap: then in "
        "/usr/bin), or a path.",
    )
    cpu_seconds: int | None = Field(
        default=8 * 3600,
        gt=0,
        description="CPU seconds one process may use in its life (RLIMIT_CPU; None: no limit): "
        "a backstop for a process nothing else stops, since each request has its own timeout "
        "and pools replace their processes after a number of uses.",
    )
    file_size_mb: int | None = Field(
        default=1024, gt=0, description="Largest file the process may write (RLIMIT_FSIZE)."
    )
    open_files: int | None = Field(
        default=65536,
        gt=0,
        description="Files the process may hold open (RLIMIT_NOFILE, at most the system's hard "
        "limit).",
    )
    address_space_mb: int | None = Field(
        default=None,
        gt=0,
        description="Address space of the process (RLIMIT_AS; None: no limit). Lean maps its "
        ".olean files, gigabytes for Mathlib: memory_limit_mb (resident memory) is the memory "
        "limit that fits.",
    )
    read_only: tuple[Path, ...] = Field(
        default=(),
        description="More paths the process may read (the project, elan's home, the program "
        "and Lake's paths are readable anyway).",
    )

    def resolved(self) -> SandboxConfig:
        """This configuration with ``enabled`` and ``subprocesses`` taken from the settings
        (``LEANLOOP_SANDBOX``, ``LEANLOOP_SANDBOX_SUBPROCESSES``) where they are None.

        Returns:
            The configuration, every switch set.
        """
        if self.enabled is not None and self.subprocesses is not None:
            return self
        from leanloop.settings import Settings

        settings = Settings.from_env()
        return self.model_copy(
            update={
                "enabled": settings.sandbox if self.enabled is None else self.enabled,
                "subprocesses": (
                    settings.sandbox_subprocesses
                    if self.subprocesses is None
                    else self.subprocesses
                ),
            }
        )


# -- can it be set up here? -----------------------------------------------------------------------

_probed: dict[tuple[str, bool], tuple[str, str] | None] = {}
_probe_lock = threading.Lock()
_opted_out_said: set[str] = set()


#: Where distributions install bwrap, for a process whose PATH leaves it out.
STANDARD_BWRAP = "/usr/bin/bwrap"


def _bwrap_path(bwrap: str) -> str | None:
    def runnable(path: str) -> bool:
        return os.path.isfile(path) and os.access(path, os.X_OK)

    if os.sep in bwrap:
        return bwrap if runnable(bwrap) else None
    found = shutil.which(bwrap)
    if found is None and bwrap == "bwrap" and runnable(STANDARD_BWRAP):
        return STANDARD_BWRAP
    return found


def sandbox_problem(config: SandboxConfig) -> str | None:
    """Why the sandbox cannot be set up here, or None when it can.

    The first call for a bwrap runs it once (a sandbox with the filter, around a Python that
    does nothing); the answer is kept for the life of the process.

    Args:
        config: The sandbox's configuration.

    Returns:
        One line saying what is missing, or None.
    """
    problem = _problem(config)
    return problem[0] if problem is not None else None


def sandbox_problem_hint(config: SandboxConfig) -> str | None:
    """What to do about ``sandbox_problem(config)``, or None when there is no problem.

    Args:
        config: The sandbox's configuration.

    Returns:
        The next step, in one line.
    """
    problem = _problem(config)
    return problem[1] if problem is not None else None


def _problem(config: SandboxConfig) -> tuple[str, str] | None:
    """``(what is missing, what to do)``, or None."""
    if not sys.platform.startswith("linux"):
        return (
            f"the sandbox needs Linux (bubblewrap), and this is {sys.platform}",
            _OFF.removeprefix("or "),
        )
    bwrap = _bwrap_path(config.bwrap)
    if bwrap is None:
        missing = f" ({config.bwrap} not found)" if os.sep in config.bwrap else " (bwrap)"
        return f"bubblewrap{missing} is not installed", INSTALL_HINT
    key = (bwrap, bool(config.subprocesses))
    with _probe_lock:
        if key not in _probed:
            _probed[key] = _probe(bwrap, bool(config.subprocesses))
        return _probed[key]


def _probe(bwrap: str, subprocesses: bool) -> tuple[str, str] | None:
    fds: list[int] = []
    try:
        if not subprocesses:
            fds.append(_program_fd(seccomp_filter()))
        argv = [bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/"]
        argv += ["--dev", "/dev", "--proc", "/proc"]
        argv += [arg for fd in fds for arg in ("--seccomp", str(fd))]
        argv += ["--", sys.executable, "-I", "-S", "-c", "pass"]
        result = subprocess.run(
            argv, capture_output=True, text=True, timeout=60, pass_fds=fds, check=False
        )
    except SandboxUnavailable as exc:
        return exc.message, exc.hint or _OFF.removeprefix("or ")
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap ({bwrap}) could not be run: {exc}", INSTALL_HINT
    finally:
        for fd in fds:
            os.close(fd)
    if result.returncode != 0:
        said = excerpt(" | ".join(result.stderr.strip().splitlines()[-2:]) or "no message")
        return (
            f"bubblewrap ({bwrap}) cannot create a sandbox here (status {result.returncode}: "
            f"{said}); it needs unprivileged user namespaces",
            USERNS_HINT,
        )
    return None


def _program_fd(program: bytes) -> int:
    """A file descriptor bwrap reads the seccomp program from (to its end)."""
    fd = os.memfd_create("leanloop-seccomp", 0)
    os.write(fd, program)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


# -- Lake's environment ---------------------------------------------------------------------------

_DUMP = "import json,os,sys;f=open(sys.argv[1],'w');json.dump(dict(os.environ),f);f.close()"
_lake_envs: dict[tuple, dict[str, str]] = {}
_lake_lock = threading.Lock()


def lake_environment(
    lake: str, root: Path, base: Mapping[str, str], *, timeout: float = 300.0
) -> dict[str, str]:
    """The environment ``lake env`` gives programs in ``root`` (asked once per process, project
    and base environment).

    Args:
        lake: The ``lake`` executable.
        root: The project.
        base: The environment Lake is started with.
        timeout: Seconds Lake may take (the first run after a change compiles the lakefile).

    Returns:
        Every variable of the environment Lake gives.

    Raises:
        ServerNotFound: ``lake`` is not there.
        ServerStartError: Lake failed or took too long.
    """
    key = (lake, str(root.resolve()), tuple(sorted(base.items())))
    with _lake_lock:
        if key in _lake_envs:
            return dict(_lake_envs[key])
    with tempfile.TemporaryDirectory(prefix="leanloop-lake-env-") as tmp:
        out = Path(tmp) / "env.json"
        argv = [lake, "env", sys.executable, "-I", "-S", "-c", _DUMP, str(out)]
        try:
            result = subprocess.run(
                argv, cwd=root, env=dict(base), capture_output=True, text=True, timeout=timeout
            )
        except FileNotFoundError:
            raise ServerNotFound(
                f"cannot start Lean: {lake} not found",
                hint="run 'leanloop doctor' to see what is installed and how to get the rest",
            ) from None
        except subprocess.TimeoutExpired:
            raise ServerStartError(f"'lake env' in {root} took more than {timeout:g} s") from None
        if result.returncode != 0 or not out.is_file():
            said = excerpt(" | ".join(result.stderr.strip().splitlines()[-3:]) or "no message")
            raise ServerStartError(
                f"'lake env' failed in {root} (status {result.returncode}): {said}",
                hint="check that the project builds with 'lake build'",
            )
        environment = json.loads(out.read_text(encoding="utf-8"))
    with _lake_lock:
        _lake_envs[key] = environment
    return dict(environment)


_KEPT = ("PATH", "LANG", "LANGUAGE", "TZ", "LEAN")
_KEPT_PREFIXES = ("LC_", "LEAN_", "LAKE", "ELAN")
#: Variables of Lake's environment that hold paths the process reads.
_PATH_VARIABLES = (
    "LEAN_PATH",
    "LEAN_SRC_PATH",
    "LEAN_SYSROOT",
    "LEAN",
    "LAKE",
    "LAKE_HOME",
    "ELAN_HOME",
    "LD_LIBRARY_PATH",
)
_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/sys")
_STORES = ("/nix", "/gnu")


def sandbox_environment(
    given: Mapping[str, str], inherited: Mapping[str, str], extra: Mapping[str, str] | None
) -> dict[str, str]:
    """The variables a sandboxed process gets: those Lake set or changed, the locale, ``PATH``
    and Lean's own (``LEAN*``, ``LAKE*``, ``ELAN*``), and ``extra``; not the rest of the
    user's (tokens, keys).

    Args:
        given: The environment Lake gives (or the inherited one, without Lake).
        inherited: The environment leanloop runs in.
        extra: Variables the caller adds.

    Returns:
        The environment (``TMPDIR`` and ``HOME`` are added per process).
    """
    kept = {
        name: value
        for name, value in given.items()
        if name in _KEPT or name.startswith(_KEPT_PREFIXES) or inherited.get(name) != value
    }
    kept.update(extra or {})
    return kept


def _mounts(paths: Sequence[str | Path]) -> list[tuple[str, str]]:
    """``(source, destination)`` read-only binds that make ``paths`` visible at their names:
    each real path at itself, a path through a symbolic link also at its own name, and nothing
    a bind above it already shows."""
    wanted: dict[str, str] = {}
    for path in paths:
        given = os.path.abspath(path)
        real = os.path.realpath(given)
        wanted.setdefault(real, real)
        wanted.setdefault(given, real)
    kept: list[tuple[str, str]] = []
    for dest in sorted(wanted, key=lambda d: (d.rstrip("/").count("/"), d)):
        if any(dest == d or dest.startswith(d.rstrip("/") + "/") for _, d in kept):
            continue
        kept.append((wanted[dest], dest))
    return kept


# -- starting sandboxed processes -----------------------------------------------------------------

_LIMITS_SHIM = (
    "import os,resource as r,sys\n"
    "a=sys.argv[1:];i=a.index('--')\n"
    "for s in a[:i]:\n"
    " n,v=s.split('=');k=getattr(r,'RLIMIT_'+n);h=r.getrlimit(k)[1];v=int(v)\n"
    " v=v if h==r.RLIM_INFINITY else min(v,h)\n"
    " r.setrlimit(k,(v,v))\n"
    "os.execv(a[i+1],a[i+1:])\n"
)
_spawner: ThreadPoolExecutor | None = None
_spawner_lock = threading.Lock()
_jails: weakref.WeakSet[Jail] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    """In a forked child the spawning thread does not exist (the child makes its own), and the
    scratch directories are the parent's (the child must not remove them when it exits)."""
    global _spawner, _spawner_lock
    _spawner, _spawner_lock = None, threading.Lock()
    for jail in list(_jails):
        jail._finalizer.detach()
    _jails.clear()


if hasattr(os, "register_at_fork"):  # not on Windows, where there is no sandbox either
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _spawn(argv: list[str], **popen: Any) -> subprocess.Popen:
    """``Popen`` on leanloop's one spawning thread, which lives as long as the process (bwrap's
    ``--die-with-parent`` follows the thread that started it)."""
    global _spawner
    with _spawner_lock:
        if _spawner is None:
            _spawner = ThreadPoolExecutor(1, thread_name_prefix="leanloop-sandbox")
        spawner = _spawner

    def start() -> subprocess.Popen:
        return subprocess.Popen(argv, **popen)

    return spawner.submit(start).result()


class Jail:
    """What one sandboxed process holds: its scratch directory, removed by ``close`` (or when
    leanloop exits).

    Args:
        scratch: The directory.
    """

    def __init__(self, scratch: Path) -> None:
        self.scratch = scratch
        self._finalizer = weakref.finalize(self, shutil.rmtree, str(scratch), ignore_errors=True)
        _jails.add(self)

    def close(self) -> None:
        """Remove the scratch directory (call once the process has ended)."""
        self._finalizer()


class Sandbox:
    """Starts programs of one project in the sandbox, each with its own scratch directory.

    Args:
        config: The configuration (``enabled`` and ``subprocesses`` resolved).
        root: The project: the working directory, readable.
        lake: The ``lake`` whose environment the programs get (None: the inherited one).
        env: Variables to add.
        start_timeout: Seconds ``lake env`` may take.
    """

    def __init__(
        self,
        config: SandboxConfig,
        *,
        root: str | Path,
        lake: str | Path | None = None,
        env: Mapping[str, str] | None = None,
        start_timeout: float = 300.0,
    ) -> None:
        self.config = config
        self.root = Path(root).absolute()
        self.lake = str(lake) if lake is not None else None
        self.env = dict(env or {})
        self.start_timeout = start_timeout

    def environment(self) -> dict[str, str]:
        """The environment of the sandboxed programs (Lake asked on the first call)."""
        from leanloop.settings import Settings

        inherited = Settings.process_environment()
        base = {**inherited, **self.env}
        given = (
            lake_environment(self.lake, self.root, base, timeout=self.start_timeout)
            if self.lake is not None
            else base
        )
        return sandbox_environment(given, inherited, self.env)

    def readable(self, program: str, environment: Mapping[str, str]) -> list[str]:
        """The paths the process may read: the system, the project, elan's home, the
        program's directory, the paths in Lake's variables and the configured ones."""
        from leanloop.settings import Settings

        paths: list[str | Path] = [p for p in (*_SYSTEM, *_STORES) if os.path.lexists(p)]
        paths += [self.root, Settings.from_env().elan_home, *self.config.read_only]
        paths.append(os.path.dirname(os.path.abspath(program)))
        for name in _PATH_VARIABLES:
            for part in environment.get(name, "").split(os.pathsep):
                if os.path.isabs(part) and os.path.lexists(part):
                    paths.append(part)
        return [str(p) for p in paths if os.path.lexists(p)]

    def command(
        self, program: Sequence[str], environment: Mapping[str, str], scratch: Path, fd: int | None
    ) -> list[str]:
        """The command line: the limits, then bwrap, then the program."""
        config = self.config
        limits = {
            "CPU": config.cpu_seconds,
            "FSIZE": config.file_size_mb and config.file_size_mb * 1024 * 1024,
            "NOFILE": config.open_files,
            "AS": config.address_space_mb and config.address_space_mb * 1024 * 1024,
            "CORE": 0,
        }
        bwrap = _bwrap_path(config.bwrap) or config.bwrap
        argv = [sys.executable, "-I", "-S", "-c", _LIMITS_SHIM]
        argv += [f"{name}={value}" for name, value in limits.items() if value is not None]
        argv += ["--", bwrap, "--unshare-all", "--die-with-parent"]
        for source, dest in _mounts(self.readable(program[0], environment)):
            argv += ["--ro-bind-try", source, dest]
        argv += ["--dev", "/dev", "--proc", "/proc", "--bind", str(scratch), str(scratch)]
        argv += ["--remount-ro", "/", "--remount-ro", "/dev", "--chdir", str(self.root)]
        if fd is not None:
            argv += ["--seccomp", str(fd)]
        return [*argv, "--", *program]

    def popen(self, program: Sequence[str], **popen: Any) -> tuple[subprocess.Popen, Jail]:
        """Start ``program`` in the sandbox.

        Args:
            program: The program and its arguments.
            **popen: Further arguments of ``subprocess.Popen`` (pipes, session).

        Returns:
            The process (bwrap's) and its jail, to close once the process has ended.

        Raises:
            SandboxUnavailable: The sandbox cannot be set up here.
            FileNotFoundError: The program is not there.
            ServerNotFound: ``lake`` is not there.
            ServerStartError: ``lake env`` failed.
        """
        problem = _problem(self.config)
        if problem is not None:
            raise SandboxUnavailable(problem[0], hint=problem[1])
        found = program[0] if os.sep in program[0] else shutil.which(program[0])
        if found is None or not os.path.isfile(found):
            raise FileNotFoundError(program[0])
        program = [found, *program[1:]]
        environment = self.environment()
        jail = Jail(Path(tempfile.mkdtemp(prefix="leanloop-sandbox-")))
        environment.update(TMPDIR=str(jail.scratch), HOME=str(jail.scratch))
        fd = None if self.config.subprocesses else _program_fd(seccomp_filter())
        try:
            argv = self.command(program, environment, jail.scratch, fd)
            fds = () if fd is None else (fd,)
            process = _spawn(argv, env=environment, pass_fds=fds, **popen)
        except BaseException:
            jail.close()
            raise
        finally:
            if fd is not None:
                os.close(fd)
        return process, jail


def prepare_sandbox(
    config: SandboxConfig | None,
    *,
    root: str | Path,
    lake: str | Path | None,
    env: Mapping[str, str] | None = None,
    start_timeout: float = 300.0,
    name: str = "Lean process",
) -> Sandbox | None:
    """The sandbox a Lean process of ``root`` is started in, or None when it was turned off
    (said once in the log).

    Args:
        config: The configuration (None: the settings' defaults).
        root: The project.
        lake: The ``lake`` whose environment the process gets.
        env: Variables to add.
        start_timeout: Seconds ``lake env`` may take.
        name: The kind of process, for the log.

    Returns:
        The sandbox, or None.

    Raises:
        SandboxUnavailable: The sandbox is on and cannot be set up here.
    """
    given = config or SandboxConfig()
    config = given.resolved()
    if not config.enabled:
        why = "LEANLOOP_SANDBOX=off" if given.enabled is None else "sandbox enabled: false"
        with _probe_lock:
            said = name in _opted_out_said
            _opted_out_said.add(name)
        if not said:
            log.warning(
                "the %s runs without a sandbox (%s): the code it elaborates runs with your rights",
                name,
                why,
            )
        return None
    problem = _problem(config)
    if problem is not None:
        raise SandboxUnavailable(
            f"cannot start the {name} in a sandbox: {problem[0]}", hint=problem[1]
        )
    return Sandbox(config, root=root, lake=lake, env=env, start_timeout=start_timeout)


def unsandboxed_environment(env: Mapping[str, str] | None) -> dict[str, str] | None:
    """The environment of a process started without the sandbox: the inherited one with
    ``env`` added (None: inherited as it is)."""
    if not env:
        return None
    from leanloop.settings import Settings

    return {**Settings.process_environment(), **env}
