"""A proving worker: proves theorems one attempt at a time with its own prover and Lean servers
leased from a pool (a Ray actor, or run in-process), and what the engine's driver hands a hook
(``ProofHook``) for each proof found."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from leanloop.data.records import AttemptStatus, ProofAttempt, Theorem, TheoremKey
from leanloop.lean.pool import ServerPool
from leanloop.lean.server import LeanServer, TheoremSource
from leanloop.prover.base import BaseProver
from leanloop.prover.config import ProofMode
from leanloop.prover.proof_search import describe_exception
from leanloop.prover.result import SearchResult
from leanloop.prover.target import Target

if TYPE_CHECKING:
    from leanloop.database import DynamicDatabase

log = logging.getLogger(__name__)

#: Where Lean servers come from: a pool (kept open by its owner) or a maker of one server.
Servers = ServerPool[LeanServer] | Callable[[], LeanServer]
#: Lends a Lean server for a block: ``with lease() as server: ...``.
Lease = Callable[[], AbstractContextManager[LeanServer]]
Environment = Literal["lean", "replay"]


class ProofHook(Protocol):
    """Called in the driver, one proof at a time, for each attempt that found a proof Lean
    accepted (``proved``), before it is stored: returns the attempt to store (e.g. with the
    outcome of writing the proof into a file). ``lease`` lends a Lean server of the run."""

    def __call__(self, theorem: Theorem, attempt: ProofAttempt, lease: Lease) -> ProofAttempt: ...


def pool_of(servers: Servers, server_uses: int) -> tuple[ServerPool[LeanServer], bool]:
    """The pool to lease from, and whether it was made here (and so is closed here)."""
    if isinstance(servers, ServerPool):
        return servers, False
    return ServerPool.single(servers, max_uses=server_uses), True


class ProofWorker:
    """Proves theorems one attempt at a time with its own prover and Lean servers (a Ray actor,
    or run in-process); ``servers`` is made where the worker runs, a server is reused for
    ``config.server_uses`` theorems and replaced when it fails. Theorem records are read from
    their files under ``project_root`` on a Lean server, or are given as ``sources`` (e.g. a
    benchmark's statements, which have no file)."""

    def __init__(
        self,
        prover: BaseProver,
        servers: Servers,
        project_root: str | Path | None = None,
        mode: ProofMode = ProofMode.SEARCH,
        sources: Mapping[tuple[TheoremKey, str], TheoremSource] | None = None,
        database_url: str | None = None,
    ) -> None:
        self.prover = prover
        self.pool, self._own_pool = pool_of(servers, prover.config.server_uses)
        self.project_root = Path(project_root) if project_root is not None else None
        self.mode = ProofMode(mode)
        self.sources = dict(sources or {})
        self.database_url = database_url
        self._database: DynamicDatabase | None = None

    def lease(self) -> AbstractContextManager[LeanServer]:
        return self.pool.lease(None)

    def prove(self, theorem: Theorem, attempt: int, run: str) -> ProofAttempt:
        """One attempt at ``theorem``; any failure becomes an ``error`` attempt."""
        environment: Environment | None = None
        try:
            with self.lease() as server:
                environment = "lean" if server.checks_with_lean else "replay"
                source = self.sources.get((theorem.key, theorem.commit))
                target = Target.of(
                    theorem=source if source is not None else theorem,
                    project_root=self.project_root,
                )
                result = self.prover.prove_target(server, target, self.mode, attempt=attempt)
        except Exception as exc:  # this theorem fails, the worker goes on
            result = SearchResult(
                target=theorem.full_name,
                status=AttemptStatus.ERROR,
                error=describe_exception(exc),
            )
        made = result.to_attempt(
            theorem, run=run, attempt=attempt, prover=self.prover.name, environment=environment
        ).model_copy(update={"worker": where()})
        if self.database_url is not None:  # a database every node reaches: stored here
            if self._database is None:
                from leanloop.database import DynamicDatabase

                self._database = DynamicDatabase(self.database_url)
            self._database.record_attempt(made)
        return made

    def close(self) -> None:
        if self._own_pool:
            self.pool.close()
        if self._database is not None:
            self._database.close()


def where() -> str:
    """The host this process runs on, and its Ray node when it is a Ray worker."""
    import socket

    host = socket.gethostname()
    try:
        import ray

        if ray.is_initialized():
            node = ray.get_runtime_context().get_node_id()
            return f"{host}/{node[:12]}"
    except Exception:  # not on Ray, or Ray's context is unavailable
        pass
    return host
