"""Check whole pieces of Lean code for ``/verify`` through leanloop's pool of Lean servers
(``leanloop.lean.verification.PoolVerifier``: servers of the configured project and backend,
reused by the imports they have elaborated), or say in one line why Lean is not available."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from leanloop.lean.errors import LeanError
from leanloop.lean.verification import PoolVerifier, Verification
from leanloop.serve.admission import Gate
from leanloop.serve.config import LeanConfig
from leanloop.serve.errors import Unavailable

ServerFactory = Callable[[Hashable], Any]

DOCTOR = "'leanloop doctor' shows what is missing"


class VerifyService:
    """``await service.check(codes, timeout)``: each code checked on the pool of the configured
    Lean project, at most ``lean.max_repls`` at once, behind ``gate``. ``factory`` makes a Lean
    server for a pool key (tests give one over recorded transcripts); by default servers of
    the configured backend are started after checking that Lean is installed, on the first
    request."""

    def __init__(
        self,
        lean: LeanConfig | None,
        gate: Gate,
        factory: ServerFactory | None = None,
    ) -> None:
        self.lean = lean
        self.gate = gate
        self._factory = factory
        self._pool: PoolVerifier | None = None
        self._pool_lock = threading.Lock()
        workers = lean.max_repls if lean is not None else 2
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="lean")

    @property
    def max_timeout(self) -> float:
        return self.lean.timeout if self.lean is not None else 300.0

    def _launcher(self) -> ServerFactory:
        """Servers of the configured project; fails when Lean or the backend is not there."""
        from leanloop.lean.backends import LeanOptions, open_servers

        lean = self.lean
        if lean is None:
            raise Unavailable(
                "Lean verification is not configured",
                hint="add a 'lean' section naming the Lean project to the server configuration",
            )
        options = LeanOptions(
            timeout=lean.timeout,
            memory_limit_mb=lean.memory_limit_mb,
            executable=lean.executable,
            sandbox=lean.sandbox,
        )
        try:
            return open_servers(lean.backend, lean.project, options)
        except LeanError as exc:
            raise Unavailable(
                f"Lean verification is unavailable: {exc.message}; {DOCTOR}"
            ) from None

    def _ready_pool(self) -> PoolVerifier:
        with self._pool_lock:
            if self._pool is None:
                factory = self._factory or self._launcher()
                lean = self.lean
                self._pool = PoolVerifier(
                    factory,
                    max_uses=lean.max_uses if lean else 100,
                    max_servers=lean.max_repls if lean else 2,
                    account=False,  # '/verify' is not an audit: Lean's messages are the answer
                )
            return self._pool

    async def check(
        self, codes: list[str], timeout: float, infotree: str | None = None
    ) -> list[Verification]:
        """Lean's answers on ``codes`` (checked at once on up to ``max_repls`` servers), with
        Lean's ``infotree`` of that kind when one is asked for."""
        loop = asyncio.get_running_loop()
        async with self.gate.slot():
            pool = await loop.run_in_executor(self._executor, self._ready_pool)
            limit = min(timeout, self.max_timeout)
            return list(
                await asyncio.gather(
                    *(
                        loop.run_in_executor(self._executor, pool.check, code, limit, infotree)
                        for code in codes
                    )
                )
            )

    def close(self) -> None:
        with self._pool_lock:
            if self._pool is not None:
                self._pool.close()
                self._pool = None
        self._executor.shutdown(wait=True)
