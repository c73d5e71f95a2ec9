"""Bounded admission to a model: at most ``max_queue`` requests wait or run at once (more are
refused with 429 at once), at most ``concurrency`` run, and none waits longer than ``max_wait``
seconds for its turn (503 with ``Retry-After`` when the limit expires, whatever the requests
running do) — latency stays bounded instead of growing with the load. A request whose task is
cancelled (its client went away) leaves the queue at once; a closed gate (the server is
stopping) refuses new requests and every waiting one with 503."""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Callable

from leanloop.serve.errors import Overloaded, Unavailable

#: Seconds a refused client is told to wait before it tries again (``Retry-After``).
RETRY_AFTER = 1.0


class Gate:
    """``async with gate.slot(): ...`` runs the body when the model has room for it; turns are
    given in the order the requests came."""

    def __init__(self, name: str, *, concurrency: int, max_queue: int, max_wait: float) -> None:
        self.name = name
        self.concurrency = concurrency
        self.max_queue = max_queue
        self.max_wait = max_wait
        self.pending = 0  # admitted: waiting or running
        self.running = 0
        self.closed: str | None = None  # why the gate refuses everything, once closed
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._on_close: list[Callable[[], None]] = []

    def admit(self) -> None:
        """Count one more request, or refuse it when the queue is full or the gate closed."""
        if self.closed is not None:
            raise self.closed_error()
        if self.pending >= self.max_queue:
            raise Overloaded(
                f"model '{self.name}' is busy: {self.pending} requests are queued; retry later",
                retry_after=RETRY_AFTER,
            )
        self.pending += 1

    def leave(self) -> None:
        self.pending -= 1

    async def turn(self) -> None:
        """Wait for a turn to run (``release()`` it after); fails with 503 when none comes
        within ``max_wait`` seconds or the gate closes."""
        if self.closed is not None:
            raise self.closed_error()
        if self.running < self.concurrency and not self._waiters:
            self.running += 1
            return
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiters.append(waiter)
        timer = loop.call_later(self.max_wait, self._expire, waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            # the turn may have been handed over (or refused) just as the request was cancelled
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self.release()
            raise
        finally:
            timer.cancel()
            with contextlib.suppress(ValueError):
                self._waiters.remove(waiter)

    def release(self) -> None:
        """Hand the turn to the request waiting longest, or free it."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the turn passes on: ``running`` stays
                return
        self.running -= 1

    def _expire(self, waiter: asyncio.Future[None]) -> None:
        if not waiter.done():
            waiter.set_exception(self.waited_too_long())

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        self.admit()
        try:
            await self.turn()
            try:
                yield
            finally:
                self.release()
        finally:
            self.leave()

    def when_closed(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` when the gate closes (a batch worker refuses its queue then)."""
        self._on_close.append(callback)

    def close(self, reason: str) -> None:
        """Refuse every request from now on, and every request waiting now, with 503 saying
        ``reason``; the requests running go on."""
        if self.closed is not None:
            return
        self.closed = reason
        waiting, self._waiters = self._waiters, deque()
        for waiter in waiting:
            if not waiter.done():
                waiter.set_exception(self.closed_error())
        for callback in self._on_close:
            callback()

    def waited_too_long(self) -> Unavailable:
        return Unavailable(
            f"model '{self.name}' is busy: no turn within {self.max_wait:g} s; retry later",
            retry_after=RETRY_AFTER,
        )

    def closed_error(self) -> Unavailable:
        return Unavailable(f"{self.closed}; retry later", retry_after=RETRY_AFTER)
