"""Check whole pieces of Lean code through a pool of Lean REPLs of the configured project (REPLs
are reused by the imports they have elaborated), or say in one line why Lean is not available."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from leanloop.lean.elaboration import Elaboration
from leanloop.lean.errors import LeanError, LeanRequestError, ServerError
from leanloop.lean.pool import ServerPool
from leanloop.lean.repl import split_header
from leanloop.lean.verification import time_limit
from leanloop.serve.admission import Gate
from leanloop.serve.config import LeanConfig
from leanloop.serve.errors import Unavailable

ServerFactory = Callable[[Hashable], Any]

DOCTOR = "'leanloop doctor' shows what is missing"


@dataclass(frozen=True)
class Checked:
    """Lean's answer on one piece of code (``elaboration``), or why there is none (``error``:
    a timeout, a crash, imports that do not elaborate), and the seconds it took."""

    elaboration: Elaboration | None
    error: str | None
    seconds: float


class Verifier:
    """``await verifier.check(codes, timeout)``. ``factory`` makes a Lean server for a pool key
    (tests give one over recorded transcripts); by default REPLs of the configured project are
    launched after checking that Lean is installed."""

    def __init__(
        self,
        lean: LeanConfig | None,
        gate: Gate,
        factory: ServerFactory | None = None,
    ) -> None:
        self.lean = lean
        self.gate = gate
        self._factory = factory
        self._pool: ServerPool | None = None
        self._pool_lock = threading.Lock()
        workers = lean.max_repls if lean is not None else 2
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="lean")

    @property
    def max_timeout(self) -> float:
        return self.lean.timeout if self.lean is not None else 300.0

    def _launcher(self) -> ServerFactory:
        """REPLs of the configured project; fails when Lean or the REPL is not installed."""
        from leanloop.lean.launch import ReplLauncher

        lean = self.lean
        if lean is None:
            raise Unavailable(
                "Lean verification is not configured",
                hint="add a 'lean' section naming the Lean project to the server configuration",
            )
        try:
            return ReplLauncher.for_project(
                lean.project,
                timeout=lean.timeout,
                memory_limit_mb=lean.memory_limit_mb,
                executable=lean.repl,
                sandbox=lean.sandbox,
            )
        except LeanError as exc:
            raise Unavailable(
                f"Lean verification is unavailable: {exc.message}; {DOCTOR}"
            ) from None

    def _ready_pool(self) -> ServerPool:
        with self._pool_lock:
            if self._pool is None:
                factory = self._factory or self._launcher()
                lean = self.lean
                self._pool = ServerPool(
                    factory,
                    max_uses=lean.max_uses if lean else 100,
                    max_servers=lean.max_repls if lean else 2,
                )
            return self._pool

    async def check(
        self, codes: list[str], timeout: float, infotree: str | None = None
    ) -> list[Checked]:
        """Lean's answers on ``codes`` (checked at once on up to ``max_repls`` REPLs), with the
        REPL's ``infotree`` of that kind when one is asked for."""
        loop = asyncio.get_running_loop()
        async with self.gate.slot():
            pool = await loop.run_in_executor(self._executor, self._ready_pool)
            limit = min(timeout, self.max_timeout)
            return list(
                await asyncio.gather(
                    *(
                        loop.run_in_executor(
                            self._executor, self._check_one, pool, code, limit, infotree
                        )
                        for code in codes
                    )
                )
            )

    def _check_one(
        self, pool: ServerPool, code: str, timeout: float, infotree: str | None = None
    ) -> Checked:
        start = time.monotonic()
        header, _, _ = split_header(code)
        try:
            with pool.lease(header) as server:
                # the imports (elaborated once per REPL, e.g. Mathlib's) under the server's own
                # limit: timing them out would lose them and the next request would start over
                server.environment(header)
                with time_limit(server, timeout):
                    elaboration = server.elaborate(code, infotree=infotree)
        except (LeanRequestError, ServerError) as exc:
            return Checked(None, exc.message, time.monotonic() - start)
        return Checked(elaboration, None, time.monotonic() - start)

    def close(self) -> None:
        with self._pool_lock:
            if self._pool is not None:
                self._pool.close()
                self._pool = None
        self._executor.shutdown(wait=True)
