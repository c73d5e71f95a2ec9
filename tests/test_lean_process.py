"""Process handling of Lean servers: timeouts, crashes, end of output, garbage, memory caps,
restarts, handshakes and the pool — tested with stand-in processes that speak each protocol's
framing, each test once with plain processes and once with processes in the sandbox that
checking code uses (where bubblewrap works). The stand-ins echo requests; they are never used to
produce proof results."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from leanloop.lean.errors import (
    MemoryLimitExceeded,
    ProtocolError,
    RequestTimeout,
    ServerCrashed,
    ServerError,
    ServerNotFound,
    ServerStartError,
)
from leanloop.lean.pool import ServerPool
from leanloop.lean.sandbox import Sandbox, SandboxConfig, sandbox_problem
from leanloop.lean.transport import PantographFraming, ProcessTransport, ReplFraming

STANDINS = Path(__file__).parent / "standins"
PYTHON = os.path.realpath(sys.executable)
SANDBOX = SandboxConfig(
    enabled=True, subprocesses=False, read_only=(Path(sys.base_prefix), STANDINS)
)
_box: list[Sandbox | None] = [None]


@pytest.fixture(autouse=True, params=["plain", "sandboxed"])
def mode(request, tmp_path):
    """Each test with plain processes, then in the sandbox (``lake``-less: the stand-ins get
    the filtered inherited environment)."""
    if request.param == "sandboxed":
        problem = sandbox_problem(SANDBOX)
        if problem is not None:
            pytest.skip(f"the sandbox cannot be set up here: {problem}")
        _box[0] = Sandbox(SANDBOX, root=tmp_path)
    yield request.param
    _box[0] = None


def repl_standin(**kwargs) -> ProcessTransport:
    kwargs.setdefault("timeout", 5.0)
    return ProcessTransport(
        [PYTHON, str(STANDINS / "repl_standin.py")],
        ReplFraming(),
        name="REPL",
        sandbox=_box[0],
        **kwargs,
    )


def pantograph_standin(*flags: str, **kwargs) -> ProcessTransport:
    kwargs.setdefault("timeout", 5.0)
    return ProcessTransport(
        [PYTHON, str(STANDINS / "pantograph_standin.py"), *flags],
        PantographFraming(),
        name="Pantograph",
        sandbox=_box[0],
        **kwargs,
    )


@pytest.fixture
def repl():
    transport = repl_standin()
    yield transport
    transport.close()


def test_multi_line_answers_are_framed(repl):
    first = repl.exchange({"cmd": "a"})
    second = repl.exchange({"cmd": "b"})
    assert first["echo"] == {"cmd": "a"} and second["count"] == 2
    assert first["instance"] == second["instance"] and repl.generation == 1


def test_timeout_kills_and_next_request_restarts(repl):
    instance = repl.exchange({"cmd": "a"})["instance"]
    started = time.monotonic()
    repl.timeout = 1.0
    with pytest.raises(RequestTimeout, match="did not answer within 1 s"):
        repl.exchange({"cmd": "sleep"})
    assert time.monotonic() - started < 4
    assert not repl.alive
    # states of the killed process are stale at once, not only after the restart
    assert repl.generation == 2
    answer = repl.exchange({"cmd": "b"})
    assert answer["instance"] != instance and answer["count"] == 1 and repl.generation == 2


def test_crash_is_reported_with_status_and_stderr(repl):
    with pytest.raises(ServerCrashed) as err:
        repl.exchange({"cmd": "die"})
    assert "exited with status 3" in str(err.value) and "dying on request" in str(err.value)
    assert repl.exchange({"cmd": "after"})["count"] == 1


def test_end_of_output_is_a_crash(repl, mode):
    if mode == "sandboxed":
        # bwrap's own processes hold the pipe too: a process that closes its output and
        # lives on is stopped when the request times out
        repl.timeout = 1.0
        with pytest.raises(RequestTimeout):
            repl.exchange({"cmd": "hangup"})
    else:
        with pytest.raises(ServerCrashed, match=r"ended its output|exited"):
            repl.exchange({"cmd": "hangup"})
    assert repl.exchange({"cmd": "again"})["echo"] == {"cmd": "again"}


def test_garbage_output_is_a_protocol_error(repl):
    with pytest.raises(ProtocolError, match="not JSON"):
        repl.exchange({"cmd": "garbage"})
    assert repl.exchange({"cmd": "fine"})["count"] == 1  # restarted


def test_memory_cap_stops_the_process():
    transport = repl_standin(memory_limit_mb=150, timeout=30)
    try:
        instance = transport.exchange({"cmd": "a"})["instance"]
        with pytest.raises(MemoryLimitExceeded, match="above the limit of 150 MB"):
            transport.exchange({"cmd": "grow", "mb": 400, "hold": 20})
        assert transport.peak_memory_mb > 150
        assert transport.exchange({"cmd": "b"})["instance"] != instance
    finally:
        transport.close()


def test_missing_executable():
    transport = ProcessTransport(
        ["/nonexistent/lean-repl"], ReplFraming(), name="Lean REPL", sandbox=_box[0]
    )
    with pytest.raises(ServerNotFound, match="not found") as err:
        transport.exchange({"cmd": "x"})
    assert "leanloop doctor" in err.value.hint


def test_pantograph_handshake_and_requests():
    transport = pantograph_standin()
    try:
        answer = transport.exchange(("goal.start", {"expr": "1 = 1"}))
        assert answer["echo"] == "goal.start" and answer["payload"] == {"expr": "1 = 1"}
    finally:
        transport.close()


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (("--never-ready",), "did not print 'ready.' within 1 s"),
        (("--chatter",), "printed output instead of 'ready.'"),
    ],
)
def test_server_that_never_says_ready(flags, words):
    transport = pantograph_standin(*flags, start_timeout=1.0)
    with pytest.raises(ServerStartError, match=words):
        transport.exchange(("goal.start", {}))
    assert not transport.alive


def test_pantograph_crash_and_garbage():
    transport = pantograph_standin()
    try:
        with pytest.raises(ServerCrashed, match="status 5"):
            transport.exchange(("die", {}))
        with pytest.raises(ProtocolError, match="not JSON"):
            transport.exchange(("garbage", {}))
        assert transport.exchange(("ok", {}))["count"] == 1
        assert transport.generation == 3
    finally:
        transport.close()


class _Leased:
    """A pooled object wrapping a stand-in transport."""

    def __init__(self, key):
        self.key = key
        self.transport = repl_standin(timeout=1.0)
        self.closed = False

    def ask(self, what: str):
        return self.transport.exchange({"cmd": what})

    def close(self):
        self.closed = True
        self.transport.close()


def test_pool_reuses_and_retires():
    made = []

    def factory(key):
        made.append(_Leased(key))
        return made[-1]

    with ServerPool(factory, max_uses=3, max_servers=2) as pool:
        pids = []
        for _ in range(5):
            with pool.lease(("project", ("Mathlib",))) as server:
                pids.append(server.ask("x")["instance"])
        assert pids[0] == pids[1] == pids[2] and pids[3] == pids[4] and pids[3] != pids[0]
        assert made[0].closed and pool.stats.created == 2 and pool.stats.retired == 1
        with pool.lease(("project", ("Other",))) as other:
            assert other.key == ("project", ("Other",))
        assert pool.stats.created == 3
    assert all(m.closed for m in made)


def test_one_failing_theorem_does_not_stop_the_run():
    """A run over many theorems: one hangs, one crashes its server; all others succeed."""
    pool = ServerPool(_Leased, max_uses=50, max_servers=1)
    outcomes = []
    for index, theorem in enumerate(["t0", "sleep", "t2", "die", "t4", "t5"]):
        try:
            with pool.lease("key") as server:
                outcomes.append(("ok", server.ask(theorem)["echo"]["cmd"]))
        except ServerError as exc:
            outcomes.append((type(exc).__name__, index))
    pool.close()
    assert outcomes == [
        ("ok", "t0"),
        ("RequestTimeout", 1),
        ("ok", "t2"),
        ("ServerCrashed", 3),
        ("ok", "t4"),
        ("ok", "t5"),
    ]
    assert pool.stats.failed == 2 and pool.stats.created == 3
