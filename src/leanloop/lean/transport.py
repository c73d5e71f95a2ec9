"""How requests reach a Lean server process and answers come back: the framing of each protocol,
and a process transport that survives timeouts, crashes, garbage output and memory blow-ups."""

from __future__ import annotations

import collections
import contextlib
import json
import os
import queue
import signal
import subprocess
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from leanloop.lean.errors import (
    MemoryLimitExceeded,
    ProtocolError,
    RequestTimeout,
    ServerCrashed,
    ServerNotFound,
    ServerStartError,
    excerpt,
)

if TYPE_CHECKING:
    from leanloop.lean.sandbox import Jail, Sandbox

_EOF = object()


class Framing(ABC):
    """Encoding of requests and decoding of answers for one protocol."""

    #: A line the server prints once when it is ready (None: no handshake).
    handshake: str | None = None

    @abstractmethod
    def encode(self, request: Any) -> bytes: ...

    @abstractmethod
    def feed(self, line: str) -> tuple[bool, Any]:
        """Take one output line; ``(True, answer)`` once an answer is complete."""

    def reset(self) -> None:  # noqa: B027 - framings without state need nothing
        """Forget a partly received answer."""


class ReplFraming(Framing):
    """Lean REPL: a JSON object and a blank line each way (answers may span several lines)."""

    def __init__(self) -> None:
        self._lines: list[str] = []

    def encode(self, request: dict[str, Any]) -> bytes:
        return (json.dumps(request, ensure_ascii=False) + "\n\n").encode("utf-8")

    def feed(self, line: str) -> tuple[bool, Any]:
        if line.strip():
            self._lines.append(line)
            return False, None
        if not self._lines:
            return False, None
        text = "".join(self._lines)
        self._lines = []
        try:
            return True, json.loads(text)
        except json.JSONDecodeError:
            shown = excerpt(text)
            raise ProtocolError(
                f"the Lean REPL printed something that is not JSON: {shown!r}"
            ) from None

    def reset(self) -> None:
        self._lines = []


class PantographFraming(Framing):
    """Pantograph: ``<command> <json>`` per line in, one JSON line out, ``ready.`` at start."""

    handshake = "ready."

    def encode(self, request: tuple[str, dict[str, Any]]) -> bytes:
        command, payload = request
        return f"{command} {json.dumps(payload, ensure_ascii=False)}\n".encode()

    def feed(self, line: str) -> tuple[bool, Any]:
        text = line.strip()
        if not text:
            return False, None
        try:
            return True, json.loads(text)
        except json.JSONDecodeError:
            shown = excerpt(text)
            raise ProtocolError(
                f"Pantograph printed something that is not JSON: {shown!r}"
            ) from None


class Transport(ABC):
    """Sends one request and returns its decoded answer."""

    #: Increases each time the underlying server (re)starts; states of older ones are stale.
    generation: int = 0

    @abstractmethod
    def exchange(self, request: Any) -> Any: ...

    def close(self) -> None:  # noqa: B027 - optional for transports without a process
        pass


class ProcessTransport(Transport):
    """Talks to a server process over its stdin/stdout.

    Every request has a timeout; when it passes, the process is stopped and ``RequestTimeout``
    raised. End of output or a dead process raises ``ServerCrashed`` (with the exit status and the
    end of stderr), unreadable output ``ProtocolError``, and a process (with its children) above
    ``memory_limit_mb`` is stopped with ``MemoryLimitExceeded``. After any of these the next
    request starts a fresh process.

    With a ``sandbox`` (``leanloop.lean.sandbox``), each process starts in it, with a scratch
    directory of its own that is removed when the process is stopped.
    """

    def __init__(
        self,
        argv: Sequence[str],
        framing: Framing,
        *,
        cwd: str | Path | None = None,
        env: dict[str, str] | None = None,
        timeout: float = 60.0,
        start_timeout: float = 300.0,
        memory_limit_mb: float | None = None,
        name: str = "Lean server",
        poll_interval: float = 0.1,
        sandbox: Sandbox | None = None,
    ) -> None:
        self.argv = [str(a) for a in argv]
        self.framing = framing
        self.cwd = str(cwd) if cwd is not None else None
        self.env = env
        self.timeout = timeout
        self.start_timeout = start_timeout
        self.memory_limit_mb = memory_limit_mb
        self.name = name
        self.poll_interval = poll_interval
        self.sandbox = sandbox
        self._jail: Jail | None = None
        self._starts = 0
        self.peak_memory_mb = 0.0
        self._process: subprocess.Popen | None = None
        self._lines: queue.Queue = queue.Queue()
        self._stderr: collections.deque[str] = collections.deque(maxlen=40)
        self._stderr_pump: threading.Thread | None = None
        self._lock = threading.Lock()

    # -- process life ------------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def generation(self) -> int:  # type: ignore[override]
        """The running process's number; once it has stopped or died, already the number of
        the next one, so proof states of a process that is gone are refused before a request
        could reach its successor (which numbers its states afresh)."""
        return self._starts if self.alive else self._starts + 1

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def start(self) -> None:
        """Start the process (stopping a previous one) and wait for its handshake."""
        self._stop()
        self._lines = queue.Queue()
        self._stderr.clear()
        self.framing.reset()
        pipes: dict[str, Any] = {
            "stdin": subprocess.PIPE,
            "stdout": subprocess.PIPE,
            "stderr": subprocess.PIPE,
            "start_new_session": os.name == "posix",
        }
        try:
            if self.sandbox is not None:
                self._process, self._jail = self.sandbox.popen(self.argv, **pipes)
            else:
                self._process = subprocess.Popen(self.argv, cwd=self.cwd, env=self.env, **pipes)
        except FileNotFoundError:
            raise ServerNotFound(
                f"cannot start the {self.name}: {self.argv[0]} not found",
                hint="run 'leanloop doctor' to see what is installed and how to get the rest",
            ) from None
        except OSError as exc:
            raise ServerStartError(f"cannot start the {self.name}: {exc}") from None
        self._starts += 1
        process = self._process
        threading.Thread(target=self._pump_stdout, args=(process, self._lines), daemon=True).start()
        self._stderr_pump = threading.Thread(target=self._pump_stderr, args=(process,), daemon=True)
        self._stderr_pump.start()
        if self.framing.handshake is not None:
            self._await_handshake()

    def _pump_stdout(self, process: subprocess.Popen, lines: queue.Queue) -> None:
        assert process.stdout is not None
        for raw in iter(process.stdout.readline, b""):
            lines.put(raw.decode("utf-8", errors="replace"))
        lines.put(_EOF)

    def _pump_stderr(self, process: subprocess.Popen) -> None:
        assert process.stderr is not None
        for raw in iter(process.stderr.readline, b""):
            self._stderr.append(raw.decode("utf-8", errors="replace").rstrip())

    def _await_handshake(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        seen: list[str] = []
        while True:
            try:
                line = self._next_line(deadline, during_start=True)
            except RequestTimeout:
                self._stop()
                raise ServerStartError(
                    f"the {self.name} did not print {self.framing.handshake!r} within "
                    f"{self.start_timeout:g} s" + self._said(seen),
                    hint="the first start after a build can be slow: raise the start timeout, "
                    "or check the project builds with 'lake build'",
                ) from None
            except ServerCrashed as exc:
                raise ServerStartError(
                    f"the {self.name} exited before it was ready: {exc.message}"
                ) from None
            if line.strip() == self.framing.handshake:
                return
            if line.strip():
                seen.append(line.strip())
            if len(seen) > 20:
                self._stop()
                raise ServerStartError(
                    f"the {self.name} printed output instead of {self.framing.handshake!r}"
                    + self._said(seen)
                )

    @staticmethod
    def _said(seen: list[str]) -> str:
        return f"; it printed: {' | '.join(seen[:3])[:300]}" if seen else ""

    def _stderr_tail(self) -> str:
        tail = [line for line in self._stderr if line.strip()][-3:]
        return f"; stderr: {' | '.join(tail)[:400]}" if tail else ""

    def _stop(self) -> None:
        process, self._process = self._process, None
        jail, self._jail = self._jail, None
        try:
            self._end(process)
        finally:
            if jail is not None:
                jail.close()

    def _end(self, process: subprocess.Popen | None) -> None:
        if process is None:
            return
        with contextlib.suppress(OSError):
            if process.stdin:
                process.stdin.close()
        if process.poll() is None:
            try:
                if os.name == "posix":
                    os.killpg(process.pid, signal.SIGKILL)
                else:
                    process.kill()
            except (ProcessLookupError, PermissionError, OSError):
                with contextlib.suppress(OSError):
                    process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=5)
        for stream in (process.stdout, process.stderr):
            with contextlib.suppress(OSError):
                if stream:
                    stream.close()

    def close(self) -> None:
        with self._lock:
            self._stop()

    # -- requests ----------------------------------------------------------------------------

    def memory_mb(self) -> float:
        """Resident memory of the process and its children, in MB."""
        import psutil

        popen = self._process
        if popen is None or not self.alive:
            return 0.0
        try:
            root = psutil.Process(popen.pid)
            processes = [root, *root.children(recursive=True)]
        except psutil.Error:
            return 0.0
        total = 0
        for process in processes:
            with contextlib.suppress(psutil.Error):
                total += process.memory_info().rss
        return total / (1024 * 1024)

    def _next_line(self, deadline: float, *, during_start: bool = False) -> str:
        next_memory_check = 0.0
        while True:
            now = time.monotonic()
            if now >= deadline:
                raise RequestTimeout(f"the {self.name} did not answer within {self.timeout:g} s")
            if self.memory_limit_mb is not None and now >= next_memory_check:
                used = self.memory_mb()
                self.peak_memory_mb = max(self.peak_memory_mb, used)
                if used > self.memory_limit_mb:
                    self._stop()
                    raise MemoryLimitExceeded(
                        f"the {self.name} used {used:.0f} MB, above the limit of "
                        f"{self.memory_limit_mb:.0f} MB; it was stopped and will be restarted"
                    )
                next_memory_check = now + 0.5
            try:
                line = self._lines.get(timeout=min(self.poll_interval, deadline - now))
            except queue.Empty:
                continue
            if line is _EOF:
                code = None
                if self._process is not None:
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        code = self._process.wait(timeout=1)
                if code is not None and self._stderr_pump is not None:
                    # the last words on stderr may still be in the pipe: read them first
                    self._stderr_pump.join(timeout=1)
                what = "ended its output" if code is None else f"exited with status {code}"
                raise ServerCrashed(f"the {self.name} {what}" + self._stderr_tail())
            return line

    def exchange(self, request: Any) -> Any:
        with self._lock:
            if not self.alive:
                self.start()
            assert self._process is not None and self._process.stdin is not None
            try:
                self._process.stdin.write(self.framing.encode(request))
                self._process.stdin.flush()
            except (BrokenPipeError, OSError):
                self._stop()
                raise ServerCrashed(
                    f"the {self.name} is not reading its input any more" + self._stderr_tail()
                ) from None
            deadline = time.monotonic() + self.timeout
            try:
                while True:
                    done, answer = self.framing.feed(self._next_line(deadline))
                    if done:
                        return answer
            except (RequestTimeout, ServerCrashed, ProtocolError, MemoryLimitExceeded):
                self._stop()
                self.framing.reset()
                raise


@contextlib.contextmanager
def lowered_timeout(transport: Transport, seconds: float) -> Iterator[None]:
    """Lower the time a process may take per request to ``seconds`` inside the block (a
    transport without a limit of its own, such as a recording, is left as it is)."""
    configured = getattr(transport, "timeout", None)
    if not isinstance(configured, int | float):
        yield
        return
    transport.timeout = min(configured, seconds)  # type: ignore[attr-defined]
    try:
        yield
    finally:
        transport.timeout = configured  # type: ignore[attr-defined]
