"""Run a local model's calls on a thread of its own, off the event loop, one batch at a time:
calls that arrive while a batch runs and share their options are merged into the next batch (up
to ``max_batch``), and a call that waited past the gate's limit is refused before it starts."""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from leanloop.serve.admission import Gate

T = TypeVar("T")


@dataclass
class _Job:
    key: Hashable
    item: Any
    future: asyncio.Future
    queued_at: float


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
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task | None = None

    async def call(self, fn: Callable[[], T]) -> T:
        """``fn()`` on the worker's thread (e.g. loading the model), after the batch running."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn)

    async def submit(self, key: Hashable, item: Any) -> Any:
        loop = asyncio.get_running_loop()
        self.gate.admit()
        try:
            job = _Job(key, item, loop.create_future(), loop.time())
            self._pending.append(job)
            self._start(loop)
            assert self._wake is not None
            self._wake.set()
            return await job.future
        finally:
            self.gate.leave()

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._task is None or self._task.done():
            self._wake = asyncio.Event()
            self._task = loop.create_task(self._dispatch(), name=f"batches-{self.name}")

    def _next_batch(self) -> list[_Job]:
        first = self._pending.popleft()
        batch = [first]
        rest: deque[_Job] = deque()
        while self._pending:
            job = self._pending.popleft()
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
            while self._pending:
                now = loop.time()
                live = []
                for job in self._next_batch():
                    if job.future.done():  # the client went away
                        continue
                    if now - job.queued_at > self.gate.max_wait:
                        job.future.set_exception(self.gate.waited_too_long())
                        continue
                    live.append(job)
                if not live:
                    continue
                try:
                    results = await loop.run_in_executor(
                        self._executor, self.run, live[0].key, [job.item for job in live]
                    )
                except Exception as exc:
                    for job in live:
                        if not job.future.done():
                            job.future.set_exception(exc)
                    continue
                for job, result in zip(live, results, strict=True):
                    if not job.future.done():
                        job.future.set_result(result)

    async def close(self) -> None:
        """Stop taking batches; the batch running finishes first."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for job in self._pending:
            if not job.future.done():
                job.future.cancel()
        self._pending.clear()
        await asyncio.get_running_loop().run_in_executor(None, self._executor.shutdown, True)
