"""What the server does around each request and when it stops.

- A request whose client goes away before its answer is complete is cancelled: it leaves its
  model's queue at once (a local model never runs it; a batch of such requests is not started)
  and a remote call or a wait for a turn ends.
- Stopping (SIGTERM or Ctrl-C under uvicorn, or the lifespan's shutdown): new requests get a JSON
  503, the queued ones too (their gates close), the ones running get the grace period to finish
  and are then cancelled and answered with a JSON 503 — never a 500, never a traceback.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from leanloop.serve.admission import RETRY_AFTER
from leanloop.serve.responses import error_response, request_id, retry_after

log = logging.getLogger("leanloop.serve")

#: Why requests are refused while the server stops.
STOPPING = "the server is shutting down"

#: The signals uvicorn stops on (``leanloop serve`` and ``uvicorn leanloop.serve:app``).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

#: Seconds after its body is read that a request's connection starts being watched: a quick
#: request never pays for a watcher, a client that leaves is noticed this much later at most.
WATCH_AFTER = 0.1


class _Request:
    """One request in flight: its task, how far its answer got, whether its client is there."""

    def __init__(self, receive: Receive, send: Send) -> None:
        self.task = asyncio.current_task()
        self._receive = receive
        self._send = send
        self.started = False  # the answer's status line went out
        self.complete = False  # all of the answer went out
        self.gone = asyncio.Event()  # the client disconnected
        self.cancelled_because: str | None = None
        self.body_read = False
        self._timer: asyncio.TimerHandle | None = None
        self._watcher: asyncio.Task | None = None

    async def receive(self) -> Message:
        """The body as the client sends it; once it is read, the watcher holds the connection
        and the app hears only of the disconnect."""
        if not self.body_read:
            message = await self._receive()
            if message["type"] == "http.disconnect":
                self.gone.set()
            elif not message.get("more_body", False):
                self.body_read = True
                self._timer = asyncio.get_running_loop().call_later(WATCH_AFTER, self._begin)
            return message
        await self.gone.wait()
        return {"type": "http.disconnect"}

    def _begin(self) -> None:
        if not self.complete:
            self._watcher = asyncio.get_running_loop().create_task(self._watch())

    def end(self) -> None:
        """Stop watching (the request is over)."""
        if self._timer is not None:
            self._timer.cancel()
        if self._watcher is not None:
            self._watcher.cancel()

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.started = True
        elif message["type"] == "http.response.body" and not message.get("more_body", False):
            self.complete = True
        await self._send(message)

    async def _watch(self) -> None:
        while (await self._receive())["type"] != "http.disconnect":
            pass
        self.gone.set()
        if not self.complete:  # the server says "disconnect" after a complete answer too
            self.cancel("the client went away")

    def cancel(self, reason: str) -> None:
        if self.task is not None and self.cancelled_because is None:
            self.cancelled_because = reason
            self.task.cancel()


class RequestWatch:
    """The middleware that keeps track of the requests in flight: it cancels those whose
    client left, refuses new ones once the server stops, and answers 503 for a request
    cancelled while the server stops."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.stopping = False
        self.active: set[_Request] = set()
        self._idle = asyncio.Event()
        self._idle.set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.stopping:
            await _refusal(scope)(scope, receive, send)
            return
        request = _Request(receive, send)
        self.active.add(request)
        self._idle.clear()
        try:
            await self.app(scope, request.receive, request.send)
        except asyncio.CancelledError:
            await self._cancelled(request, scope, receive, send)
        finally:
            request.end()
            self.active.discard(request)
            if not self.active:
                self._idle.set()

    async def _cancelled(
        self, request: _Request, scope: Scope, receive: Receive, send: Send
    ) -> None:
        """A cancelled request ends here: nothing to answer when its client left; a JSON 503
        when the server stops (by its grace period, or the ASGI server's own)."""
        rid = request_id(scope)
        if request.cancelled_because is not None and request.task is not None:
            request.task.uncancel()
        if request.gone.is_set():
            log.info("request %s: the client went away; its work was cancelled", rid)
        elif not request.started:
            log.warning("request %s: %s before it finished; answered 503", rid, STOPPING)
            await _refusal(scope)(scope, receive, send)
        elif not request.complete:  # a stream cut short: end it where it is
            log.warning("request %s: %s before it finished; its stream was ended", rid, STOPPING)
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    def stop(self) -> None:
        """Refuse new requests from now on."""
        self.stopping = True

    async def finish(self, grace: float) -> None:
        """Wait up to ``grace`` seconds for the requests in flight, then cancel the rest (each
        answers 503) and wait for them to end."""
        try:
            await asyncio.wait_for(self._idle.wait(), grace)
        except TimeoutError:
            for request in list(self.active):
                request.cancel(STOPPING)
            await self._idle.wait()


def _refusal(scope: Scope) -> Any:
    return error_response(
        scope["path"],
        503,
        f"{STOPPING}; retry later",
        headers={"Retry-After": retry_after(RETRY_AFTER), "Connection": "close"},
    )


class StopSignals:
    """Runs ``on_stop`` in the event loop when the process gets SIGTERM or SIGINT, before the
    handler the ASGI server installed (uvicorn's, which then stops the server as usual). Only
    in the main thread and only over a handler written in Python: elsewhere nothing changes."""

    def __init__(self, on_stop: Callable[[], None]) -> None:
        self.on_stop = on_stop
        self._installed: dict[int, tuple[Any, Any]] = {}

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        loop = asyncio.get_running_loop()
        for sig in STOP_SIGNALS:
            previous = signal.getsignal(sig)
            if not callable(previous):
                continue

            def handler(signum: int, frame: FrameType | None, previous: Any = previous) -> None:
                loop.call_soon_threadsafe(self.on_stop)
                previous(signum, frame)

            signal.signal(sig, handler)
            self._installed[sig] = (handler, previous)

    def remove(self) -> None:
        for sig, (handler, previous) in self._installed.items():
            if signal.getsignal(sig) is handler:
                signal.signal(sig, previous)
        self._installed.clear()
