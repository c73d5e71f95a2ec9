"""Bounded admission to a model: at most ``max_queue`` requests wait or run at once (more are
refused with 429 at once), at most ``concurrency`` run, and none waits longer than ``max_wait``
seconds for its turn (503) — latency stays bounded instead of growing with the load."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from leanloop.serve.errors import Overloaded, Unavailable


class Gate:
    """``async with gate.slot(): ...`` runs the body when the model has room for it."""

    def __init__(self, name: str, *, concurrency: int, max_queue: int, max_wait: float) -> None:
        self.name = name
        self.max_queue = max_queue
        self.max_wait = max_wait
        self._running = asyncio.Semaphore(concurrency)
        self.pending = 0

    def admit(self) -> None:
        """Count one more request, or refuse it when the queue is full."""
        if self.pending >= self.max_queue:
            raise Overloaded(
                f"model '{self.name}' is busy: {self.pending} requests are queued; retry later",
                retry_after=1.0,
            )
        self.pending += 1

    def leave(self) -> None:
        self.pending -= 1

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        self.admit()
        try:
            try:
                await asyncio.wait_for(self._running.acquire(), self.max_wait)
            except TimeoutError:
                raise self.waited_too_long() from None
            try:
                yield
            finally:
                self._running.release()
        finally:
            self.leave()

    def waited_too_long(self) -> Unavailable:
        return Unavailable(
            f"model '{self.name}' is busy: no turn within {self.max_wait:g} s; retry later"
        )
