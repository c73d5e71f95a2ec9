"""The sandbox of the Lean processes that check code, through the real launch paths
(``ReplServer.launch``, ``open_servers`` of every backend in the registry,
``PantographServer.launch``) with stand-in processes
(``tests/standins``) for the REPL, Pantograph and ``lake``: every escape a stand-in tries fails
(checked from outside: the listener got no connection, the files do not exist, no process ran),
its scratch directory is writable and removed afterwards, threads work, and the process still
answers. The same attempts succeed without the sandbox, so the checks do see an escape. Without
bubblewrap, starting is refused in one line unless the sandbox was turned off, which is logged
once. The stand-ins' answers report what a process could do; they are not Lean output."""

from __future__ import annotations

import logging
import os
import select
import socket
import sys
import threading
import uuid
from pathlib import Path

import pytest

from leanloop.errors import LeanloopError
from leanloop.lean import sandbox as sandbox_module
from leanloop.lean.backends import BACKENDS, Launcher, LeanOptions, open_servers
from leanloop.lean.errors import SandboxUnavailable
from leanloop.lean.pantograph import PantographServer
from leanloop.lean.pool import ServerPool
from leanloop.lean.repl import ReplServer
from leanloop.lean.sandbox import SandboxConfig, sandbox_problem
from leanloop.lean.seccomp import seccomp_filter
from leanloop.settings import Settings
from tests.helpers import lean_standins

STANDINS = Path(__file__).parent / "standins"
PYTHON = os.path.realpath(sys.executable)
#: What the stand-ins need to read besides what the sandbox shows anyway: their Python and
#: their scripts.
CONFIG = SandboxConfig(
    enabled=True, subprocesses=False, read_only=(Path(sys.base_prefix), STANDINS)
)


def script(path: Path, *command: str) -> Path:
    """An executable that runs ``command`` with its own arguments appended."""
    path.parent.mkdir(parents=True, exist_ok=True)
    words = " ".join(f"'{word}'" for word in command)
    path.write_text(f'#!/bin/sh\nexec {words} "$@"\n')
    path.chmod(0o755)
    return path


@pytest.fixture
def bwrap_works():
    problem = sandbox_problem(CONFIG)
    if problem is not None:
        pytest.skip(f"the sandbox cannot be set up here: {problem}")


@pytest.fixture
def lean(tmp_path, monkeypatch):
    """A project, a stand-in lake (giving LEAN_PATH a directory outside the project) and
    stand-in REPL and Pantograph executables."""
    project = tmp_path / "project"
    project.mkdir()
    library = tmp_path / "toolchain" / "lib"
    library.mkdir(parents=True)
    (library / "Module.txt").write_text("readable library file")
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "key.txt").write_text("not for the sandbox")
    monkeypatch.setenv("LAKE_STANDIN_LEAN_PATH", str(library))
    monkeypatch.setenv("LAKE_STANDIN_LOG", str(tmp_path / "lake-calls.log"))
    monkeypatch.delenv("LEANLOOP_SANDBOX", raising=False)
    monkeypatch.setattr(sandbox_module, "_opted_out_said", set())
    bin_dir = tmp_path / "bin"
    return {
        "project": project,
        "library": library,
        "tmp": tmp_path,
        "lake": script(bin_dir / "lake", PYTHON, str(STANDINS / "lake_standin.py")),
        "repl": script(bin_dir / "repl", PYTHON, str(STANDINS / "sandbox_standin.py")),
        "pantograph": script(
            bin_dir / "pantograph", PYTHON, str(STANDINS / "sandbox_standin.py"), "--pantograph"
        ),
        "lake_calls": tmp_path / "lake-calls.log",
    }


def launch(lean, config: SandboxConfig = CONFIG, **kwargs) -> ReplServer:
    kwargs.setdefault("timeout", 30.0)
    return ReplServer.launch(
        lean["project"], lean["repl"], lake=lean["lake"], sandbox=config, **kwargs
    )


@pytest.fixture
def listener():
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    yield server
    server.close()


@pytest.fixture
def unix_listener(tmp_path):
    """A Unix socket outside the project (as the session bus or the Docker socket are)."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(tmp_path / "service.sock"))
    server.listen(8)
    yield server
    server.close()


def connected(listener: socket.socket) -> bool:
    """Whether a connection is waiting (the stand-in's attempt has ended before it answered,
    so a connection it made is already queued)."""
    readable, _, _ = select.select([listener], [], [], 0)
    return bool(readable)


def test_every_escape_fails_and_the_check_still_answers(bwrap_works, lean, listener, unix_listener):
    home_file = Path.home() / f"leanloop-escape-{uuid.uuid4().hex}.txt"
    outside = [lean["project"] / "escape.txt", lean["tmp"] / "escape.txt", home_file]
    server = launch(lean)
    try:
        transport = server.client.transport
        answer = transport.exchange(
            {
                "cmd": "escape",
                "port": listener.getsockname()[1],
                "unix": unix_listener.getsockname(),
                "outside": [*map(str, outside)],
            }
        )
        scratch = Path(answer["scratch_dir"])
        assert not connected(listener), answer["tcp"]
        assert answer["tcp"] != "done"
        assert not connected(unix_listener) and answer["unix"] != "done", answer["unix"]
        for path in outside:
            assert not path.exists(), path
            assert answer["outside"][str(path)].startswith("OSError"), answer["outside"]
        # no process was started: each attempt was refused, and no marker was written into
        # the scratch directory, where the stand-in could write
        for way, outcome in answer["spawn"].items():
            assert outcome.startswith("PermissionError"), (way, outcome)
        assert answer["scratch"] == "done" and answer["thread"] == "done"
        assert sorted(os.listdir(scratch)) == ["inside.txt"]
        assert (scratch / "inside.txt").read_text() == "escaped"
        again = transport.exchange({"cmd": "after"})
        assert again["echo"] == {"cmd": "after"} and again["instance"] == answer["instance"]
    finally:
        server.close()
        home_file.unlink(missing_ok=True)
    assert not scratch.exists()  # removed when the process ended


def test_without_the_sandbox_the_same_attempts_succeed(lean, listener, unix_listener, caplog):
    """The control: the checks above see an escape when there is one."""
    markers = lean["tmp"] / "markers"
    markers.mkdir()
    outside = lean["tmp"] / "escape.txt"
    caplog.set_level(logging.WARNING, logger="leanloop.lean.sandbox")
    server = launch(lean, SandboxConfig(enabled=False))
    try:
        answer = server.client.transport.exchange(
            {
                "cmd": "escape",
                "port": listener.getsockname()[1],
                "unix": unix_listener.getsockname(),
                "outside": [str(outside)],
                "markers": str(markers),
            }
        )
    finally:
        server.close()
    assert answer["tcp"] == "done" and connected(listener)
    assert answer["unix"] == "done" and connected(unix_listener)
    assert outside.read_text() == "escaped"
    assert sorted(os.listdir(markers)) == ["fork", "posix_spawn", "subprocess"]
    launch(lean, SandboxConfig(enabled=False)).close()
    said = [r for r in caplog.records if "without a sandbox" in r.getMessage()]
    assert len(said) == 1 and "sandbox enabled: false" in said[0].getMessage()


def test_only_lean_s_environment_and_paths_are_visible(bwrap_works, lean, monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", "a-token-the-sandbox-must-not-see")
    library_file = lean["library"] / "Module.txt"
    secret = lean["tmp"] / "secret" / "key.txt"
    server = launch(lean, env={"LEAN_EXTRA": "given"})
    try:
        answer = server.client.transport.exchange(
            {"cmd": "where", "read": [str(library_file), str(secret)]}
        )
        server.close()  # the next request starts a new process: Lake is not asked again
        assert server.client.transport.exchange({"cmd": "x"})["echo"] == {"cmd": "x"}
    finally:
        server.close()
    env = answer["env"]
    assert "GITHUB_TOKEN" not in env
    assert env["LEAN_PATH"] == str(lean["library"]) and env["LAKE_STANDIN"] == "1"
    assert env["LEAN_EXTRA"] == "given"
    assert env["TMPDIR"] == env["HOME"] and env["TMPDIR"] != str(Path.home())
    assert answer["cwd"] == str(lean["project"])
    assert answer["read"][str(library_file)] == "done"  # a path of Lake's environment
    assert answer["read"][str(secret)].startswith("FileNotFoundError")  # not shown at all
    assert len(lean["lake_calls"].read_text().splitlines()) == 1


def test_launcher_pool_and_pantograph_are_sandboxed(bwrap_works, lean, listener):
    port = listener.getsockname()[1]
    launcher = Launcher(
        "repl", lean["project"], lean["repl"], str(lean["lake"]), LeanOptions(sandbox=CONFIG)
    )
    with ServerPool(launcher, max_servers=1) as pool, pool.lease("key") as server:
        answer = server.client.transport.exchange({"cmd": "escape", "port": port, "outside": []})
    assert answer["spawn"]["fork"].startswith("PermissionError") and answer["tcp"] != "done"
    pantograph = PantographServer.launch(
        lean["project"], lean["pantograph"], lake=lean["lake"], timeout=30, sandbox=CONFIG
    )
    try:
        answer = pantograph.transport.exchange(("escape", {"port": port, "outside": []}))
    finally:
        pantograph.close()
    assert answer["spawn"]["subprocess"].startswith("PermissionError")
    assert answer["tcp"] != "done" and answer["thread"] == "done"
    assert not connected(listener)


STARTING_LEAN = [name for name, entry in BACKENDS.items() if entry.executable is not None]


@pytest.mark.parametrize("name", STARTING_LEAN)
def test_every_backend_the_registry_starts_is_sandboxed(
    bwrap_works, lean, listener, monkeypatch, name
):
    standins = lean_standins(lean["tmp"] / "installed", monkeypatch, lake=lean["lake"])
    monkeypatch.setenv("LEANLOOP_REPL", str(lean["repl"]))  # the stand-ins that try to escape
    monkeypatch.setenv("LEANLOOP_PANTOGRAPH", str(lean["pantograph"]))
    launcher = open_servers(name, standins["project"], LeanOptions(timeout=30, sandbox=CONFIG))
    assert launcher.sandbox.enabled is True
    escape = {"port": listener.getsockname()[1], "outside": []}
    with launcher() as server:
        if isinstance(server, ReplServer):
            answer = server.client.transport.exchange({"cmd": "escape", **escape})
        else:
            answer = server.transport.exchange(("escape", escape))  # type: ignore[attr-defined]
    assert answer["spawn"]["subprocess"].startswith("PermissionError")
    assert answer["tcp"] != "done" and not connected(listener)


def test_a_process_outlives_the_thread_that_started_it(bwrap_works, lean):
    """bwrap's --die-with-parent follows the thread that started it: leanloop starts
    sandboxes from one thread of its own, so a worker thread that ends takes nothing along."""
    server = launch(lean)
    first: dict = {}
    try:
        starter = threading.Thread(
            target=lambda: first.update(server.client.transport.exchange({"cmd": "a"}))
        )
        starter.start()
        starter.join()
        task = Path(f"/proc/self/task/{starter.native_id}")
        while task.exists():  # until the system thread is gone, not only Python's side of it
            threading.Event().wait(0.01)
        assert server.client.transport.exchange({"cmd": "b"})["instance"] == first["instance"]
    finally:
        server.close()


def test_without_bubblewrap_starting_is_refused_unless_turned_off(lean, monkeypatch, caplog):
    missing = SandboxConfig(enabled=None, bwrap=str(lean["tmp"] / "no-such-bwrap"))
    for start in (
        lambda: launch(lean, missing),
        lambda: Launcher(
            "repl", lean["project"], lean["repl"], str(lean["lake"]), LeanOptions(sandbox=missing)
        )(),
        lambda: PantographServer.launch(
            lean["project"], lean["pantograph"], lake=lean["lake"], sandbox=missing
        ),
    ):
        with pytest.raises(SandboxUnavailable) as refused:
            start()
        assert "\n" not in refused.value.message and "bubblewrap" in refused.value.message
        assert "apt install bubblewrap" in refused.value.hint
        assert "LEANLOOP_SANDBOX=off" in refused.value.hint
    assert not lean["lake_calls"].exists()  # nothing was started
    monkeypatch.setenv("LEANLOOP_SANDBOX", "off")
    caplog.set_level(logging.WARNING, logger="leanloop.lean.sandbox")
    server = launch(lean, missing)
    try:
        answer = server.client.transport.exchange({"cmd": "where"})
    finally:
        server.close()
    assert answer["env"]["LAKE_STANDIN"] == "1"  # run as 'lake env <repl>'
    said = [r.getMessage() for r in caplog.records if "without a sandbox" in r.getMessage()]
    assert len(said) == 1 and "LEANLOOP_SANDBOX=off" in said[0]


def test_the_settings_switches_are_strict():
    assert Settings.from_env({}).sandbox is True
    assert Settings.from_env({"LEANLOOP_SANDBOX": "off"}).sandbox is False
    assert Settings.from_env({"LEANLOOP_SANDBOX_SUBPROCESSES": "on"}).sandbox_subprocesses
    with pytest.raises(LeanloopError, match="LEANLOOP_SANDBOX='of'"):
        Settings.from_env({"LEANLOOP_SANDBOX": "of"})  # a typo does not turn it off


def test_the_filter_is_written_for_the_machines_leanloop_knows():
    for machine in ("x86_64", "aarch64"):
        program = seccomp_filter(machine)
        assert len(program) % 8 == 0 and 10 <= len(program) // 8 <= 30
    with pytest.raises(SandboxUnavailable, match="not written for riscv64"):
        seccomp_filter("riscv64")


def test_the_limits_hold_inside(bwrap_works, lean):
    limited = CONFIG.model_copy(
        update={"cpu_seconds": 1234, "file_size_mb": 5, "open_files": 256, "address_space_mb": None}
    )
    server = launch(lean, limited)
    try:
        limits = server.client.transport.exchange({"cmd": "where"})["limits"]
    finally:
        server.close()
    assert limits["CPU"] == [1234, 1234] and limits["FSIZE"] == [5 << 20, 5 << 20]
    assert limits["NOFILE"] == [256, 256] and limits["CORE"] == [0, 0]


def test_subprocesses_can_be_allowed(bwrap_works, lean):
    """For bv_decide (its SAT solver runs as a process): the filter is left out, the rest of
    the sandbox stays."""
    allowed = CONFIG.model_copy(update={"subprocesses": True})
    server = launch(lean, allowed)
    try:
        answer = server.client.transport.exchange(
            {"cmd": "escape", "port": 9, "outside": [str(lean["project"] / "escape.txt")]}
        )
    finally:
        server.close()
    assert answer["spawn"] == {"subprocess": "done", "fork": "done", "posix_spawn": "done"}
    assert answer["tcp"] != "done" and not (lean["project"] / "escape.txt").exists()


def test_doctor_says_whether_the_sandbox_works(tmp_path, monkeypatch):
    from leanloop.lean.toolchain import diagnose

    monkeypatch.delenv("LEANLOOP_SANDBOX", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no bwrap on the PATH
    monkeypatch.setattr(sandbox_module, "STANDARD_BWRAP", str(tmp_path / "usr-bin-bwrap"))
    check = next(c for c in diagnose().checks if c.name == "sandbox")
    assert (
        not check.found and check.required and "bubblewrap (bwrap) is not installed" in check.detail
    )
    assert check.fix is not None and "apt install bubblewrap" in check.fix
    monkeypatch.setenv("LEANLOOP_SANDBOX", "off")
    check = next(c for c in diagnose().checks if c.name == "sandbox")
    assert not check.found and not check.required and "turned off" in check.detail


def _exchange_in_child(lean: dict, results) -> None:
    server = launch(lean)
    try:
        results.put(server.client.transport.exchange({"cmd": "from the child"})["echo"])
    finally:
        server.close()


def test_a_forked_child_starts_its_own_sandboxes(bwrap_works, lean):
    """The thread that starts sandboxes is not copied into a forked child (a worker): the
    child makes its own instead of waiting on one that does not exist."""
    import multiprocessing

    parent = launch(lean)
    try:
        first = parent.client.transport.exchange({"cmd": "where"})
        context = multiprocessing.get_context("fork")
        results = context.Queue()
        child = context.Process(target=_exchange_in_child, args=(lean, results))
        child.start()
        answer = results.get(timeout=120)
        child.join()
        again = parent.client.transport.exchange({"cmd": "x"})
    finally:
        parent.close()
    assert answer == {"cmd": "from the child"} and child.exitcode == 0
    assert again["instance"] == first["instance"]


FORK_AND_EXIT = """
import os, sys, tempfile
from pathlib import Path
from leanloop.lean.sandbox import Jail
jail = Jail(Path(tempfile.mkdtemp(prefix="leanloop-sandbox-")))
pid = os.fork()
if pid == 0:
    sys.exit(0)  # the child ends as a program does, running its exit handlers
os.waitpid(pid, 0)
print(jail.scratch.is_dir())
jail.close()
print(jail.scratch.is_dir())
"""


def test_a_forked_child_leaves_the_parent_s_scratch_directories_alone():
    import subprocess

    src = Path(__file__).resolve().parents[1] / "src"
    result = subprocess.run(
        [sys.executable, "-c", FORK_AND_EXIT],
        env={**os.environ, "PYTHONPATH": str(src)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "False"]  # kept through the child's exit, then closed
