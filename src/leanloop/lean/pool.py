"""A pool of warm Lean servers keyed by project and imports: servers are reused across theorems,
retired after a number of uses (the REPL's memory only grows) and replaced when they fail."""

from __future__ import annotations

import contextlib
import threading
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from leanloop.lean.errors import ServerError


class _Closable(Protocol):
    def close(self) -> None: ...


T = TypeVar("T", bound=_Closable)


@dataclass
class PoolStats:
    created: int = 0
    reused: int = 0
    retired: int = 0
    failed: int = 0


@dataclass
class _Entry(Generic[T]):
    server: T
    key: Hashable
    uses: int = 0


class ServerPool(Generic[T]):
    """Lend servers by key: ``with pool.lease(key) as server: ...``.

    At most ``max_servers`` exist at once (a caller waits for one to come back, and an idle server
    of another key is closed to make room). A server goes back to the pool after use unless it
    raised a ``ServerError`` (it is closed) or reached ``max_uses`` (it is retired).
    """

    def __init__(
        self,
        factory: Callable[[Hashable], T],
        *,
        max_uses: int = 100,
        max_servers: int = 2,
    ) -> None:
        if max_uses < 1 or max_servers < 1:
            raise ValueError("max_uses and max_servers must be at least 1")
        self.factory = factory
        self.max_uses = max_uses
        self.max_servers = max_servers
        self.stats = PoolStats()
        self._idle: dict[Hashable, list[_Entry[T]]] = defaultdict(list)
        self._count = 0
        self._closed = False
        self._cond = threading.Condition()

    @classmethod
    def single(cls, make: Callable[[], T], *, max_uses: int = 100) -> ServerPool[T]:
        """A pool of one server made by ``make()`` (whatever the key), replaced after
        ``max_uses`` leases or a failure."""
        return cls(lambda _key: make(), max_uses=max_uses, max_servers=1)

    @contextlib.contextmanager
    def lease(self, key: Hashable) -> Iterator[T]:
        entry = self._acquire(key)
        failed = False
        try:
            yield entry.server
        except ServerError:
            failed = True
            raise
        finally:
            self._release(entry, failed)

    def _acquire(self, key: Hashable) -> _Entry[T]:
        victim: _Entry[T] | None = None
        with self._cond:
            while True:
                if self._closed:
                    raise RuntimeError("the server pool is closed")
                if self._idle[key]:
                    self.stats.reused += 1
                    return self._idle[key].pop()
                if self._count < self.max_servers:
                    self._count += 1
                    break
                others = [k for k, entries in self._idle.items() if entries]
                if others:
                    victim = self._idle[others[0]].pop()
                    self.stats.retired += 1
                    break  # the victim's slot is taken over
                self._cond.wait()
        if victim is not None:
            victim.server.close()
        try:
            server = self.factory(key)
        except BaseException:
            with self._cond:
                self._count -= 1
                self._cond.notify()
            raise
        self.stats.created += 1
        return _Entry(server, key)

    def _release(self, entry: _Entry[T], failed: bool) -> None:
        entry.uses += 1
        retire = failed or entry.uses >= self.max_uses or self._closed
        with self._cond:
            if failed:
                self.stats.failed += 1
            if retire:
                self._count -= 1
                if not failed:
                    self.stats.retired += 1
            else:
                self._idle[entry.key].append(entry)
            self._cond.notify()
        if retire:
            entry.server.close()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            entries = [e for idle in self._idle.values() for e in idle]
            self._idle.clear()
            self._count -= len(entries)
            self._cond.notify_all()
        for entry in entries:
            entry.server.close()

    def __enter__(self) -> ServerPool[T]:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
