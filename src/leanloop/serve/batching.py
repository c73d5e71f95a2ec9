"""Run a local model's calls on a thread of its own, off the event loop, one batch at a time:
calls that arrive while a batch runs and share their options are merged into the next batch (up
to ``max_batch``). Between batches the queue is cleaned: a call whose client went away (its task
was cancelled) is dropped and never run — a batch of such calls is not started — and a call
that waited past the gate's limit was already refused, by a timer, when the limit expired. A
batch that has started runs to its end (a thread cannot be interrupted); the answers of clients
that left during it are dropped."""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from leanloop.serve.admission import Gate
from leanloop.serve.errors import Unavailable

T = TypeVar("T")


@dataclass(eq=False)
class _Job:
    key: Hashable
    item: Any
    future: asyncio.Future
    timer: asyncio.TimerHandle | None = field(default=None, repr=False)

    @property
    def live(self) -> bool:
        """Still wanted: not refused, and its client has not gone."""
        return not self.future.done()


class BatchWorker:
    """``await worker.submit(key, item)`` is ``run(key, [item, ...])[i]`` for the batch the item
    joined; ``run`` executes on the worker's thread (so does ``await worker.call(fn)``)."""

    def __init__(
        self,
        name: str,
        run: Callable[[Hashable, list[Any]], list[Any]],
        *,
        gate: Gate,
        max_batch: int = 8,
    ) -> None:
        self.name = name
        self.run = run
        self.gate = gate
        self.max_batch = max_batch
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"model-{name}")
        self._pending: deque[_Job] = deque()
        self._running: list[_Job] = []
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        gate.when_closed(self._refuse_waiting)

    async def call(self, fn: Callable[[], T]) -> T:
        """``fn()`` on the worker's thread (e.g. loading the model), after the batch running."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn)

    async def submit(self, key: Hashable, item: Any) -> Any:
        loop = asyncio.get_running_loop()
        self.gate.admit()
        job = _Job(key, item, loop.create_future())
        try:
            job.timer = loop.call_later(self.gate.max_wait, self._expire, job)
            self._pending.append(job)
            self._start(loop)
            assert self._wake is not None
            self._wake.set()
            return await job.future
        except asyncio.CancelledError:
            # the client went away (the job is dropped at the next batch boundary), or the
            # server is stopping; an answer set just before is read so that none is left unread
            if job.future.done() and not job.future.cancelled():
                job.future.exception()
            raise
        finally:
            if job.timer is not None:
                job.timer.cancel()
            self.gate.leave()

    def _expire(self, job: _Job) -> None:
        if job.live and job not in self._running:
            job.future.set_exception(self.gate.waited_too_long())

    def _refuse_waiting(self) -> None:
        """The gate closed: every call waiting for a batch gets the gate's 503."""
        waiting, self._pending = self._pending, deque()
        for job in waiting:
            if job.live:
                job.future.set_exception(self.gate.closed_error())

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._task is None or self._task.done():
            self._wake = asyncio.Event()
            self._task = loop.create_task(self._dispatch(), name=f"batches-{self.name}")

    def _next_batch(self) -> list[_Job]:
        """The oldest live call and the live calls after it with its key (up to
        ``max_batch``); dropped calls leave the queue here."""
        while self._pending and not self._pending[0].live:
            self._pending.popleft()
        if not self._pending:
            return []
        first = self._pending.popleft()
        batch = [first]
        rest: deque[_Job] = deque()
        while self._pending:
            job = self._pending.popleft()
            if not job.live:
                continue
            if job.key == first.key and len(batch) < self.max_batch:
                batch.append(job)
            else:
                rest.append(job)
        self._pending = rest
        return batch

    async def _dispatch(self) -> None:
        loop = asyncio.get_running_loop()
        assert self._wake is not None
        while True:
            await self._wake.wait()
            self._wake.clear()
            while batch := self._next_batch():
                for job in batch:
                    if job.timer is not None:
                        job.timer.cancel()  # its turn came: the wait limit no longer applies
                self._running = batch
                try:
                    results = await loop.run_in_executor(
                        self._executor, self.run, batch[0].key, [job.item for job in batch]
                    )
                except Exception as exc:
                    for job in batch:
                        if job.live:
                            job.future.set_exception(exc)
                    continue
                finally:
                    self._running = []
                for job, result in zip(batch, results, strict=True):
                    if job.live:
                        job.future.set_result(result)

    async def close(self) -> None:
        """Stop taking batches (the calls still waiting or running get 503); the batch running
        finishes first, on its thread."""
        jobs = [*self._pending, *self._running]
        self._pending.clear()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for job in jobs:
            if job.live:
                job.future.set_exception(Unavailable("the server is shutting down"))
        await asyncio.get_running_loop().run_in_executor(None, self._executor.shutdown, True)
