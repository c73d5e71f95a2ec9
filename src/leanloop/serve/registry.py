"""The configured models by name: each backend built when the server starts, loaded once (on its
first request, or at startup with ``preload``), shared by every request, with its status."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import TypeVar

from pydantic import BaseModel, Field

from leanloop.errors import LeanloopError
from leanloop.serve.admission import Gate
from leanloop.serve.config import Kind, Provider, ServeConfig
from leanloop.serve.errors import BadRequest, ModelNotFound, ServeError, Unavailable
from leanloop.serve.keys import Secrets
from leanloop.serve.providers import Backend, EncoderBackend, GeneratorBackend, build_backend
from leanloop.serve.wire import omitted_when_null

log = logging.getLogger(__name__)

B = TypeVar("B", bound=Backend)


class ModelStatus(BaseModel):
    name: str = Field(description="The name clients ask for.")
    kind: Kind = Field(description="generator or encoder.")
    provider: Provider = Field(description="Where the model runs.")
    loaded: bool = Field(description="Whether it is loaded (local) or its client is ready.")
    queued: int = Field(description="Requests waiting for the model or running on it now.")
    error: str | None = omitted_when_null(description="Why its last load failed, if it did.")


class ModelRegistry:
    """``await registry.generator(name)``, ``encoder(name)`` or ``ready(name)`` give a loaded
    backend, or fail with 404 (unknown name), 400 (wrong kind) or 503 (it does not load).
    ``backends`` replaces the backends of some names (tests and benchmarks)."""

    def __init__(
        self,
        config: ServeConfig,
        secrets: Secrets,
        backends: Mapping[str, Backend] | None = None,
    ) -> None:
        self.config = config
        self._backends: dict[str, Backend] = {}
        for model in config.models:
            given = (backends or {}).get(model.name)
            if given is None:
                gate = Gate(
                    model.name,
                    concurrency=model.max_concurrency,
                    max_queue=config.max_queue,
                    max_wait=config.max_queue_wait,
                )
                given = build_backend(model, gate, secrets)
            self._backends[model.name] = given
        self._locks = {name: asyncio.Lock() for name in self._backends}
        self._errors: dict[str, str] = {}

    def backend(self, name: str) -> Backend:
        backend = self._backends.get(name)
        if backend is None:
            known = ", ".join(sorted(self._backends)) or "none are configured"
            raise ModelNotFound(f"unknown model '{name}'", hint=f"known models: {known}")
        return backend

    async def ready(self, name: str) -> Backend:
        backend = self.backend(name)
        if backend.loaded:
            return backend
        async with self._locks[name]:
            if backend.loaded:
                return backend
            try:
                await backend.load()
            except ServeError:
                raise
            except LeanloopError as exc:
                self._errors[name] = str(exc)
                raise Unavailable(f"model '{name}' could not be loaded: {exc.message}") from None
            except Exception as exc:
                log.exception("model '%s' could not be loaded", name)
                self._errors[name] = f"{type(exc).__name__}: {exc}"
                raise Unavailable(
                    f"model '{name}' could not be loaded ({type(exc).__name__}; the server log "
                    "has the details)"
                ) from None
            self._errors.pop(name, None)
        return backend

    async def generator(self, name: str) -> GeneratorBackend:
        return await self._of_kind(name, GeneratorBackend, "a generator", "/encode")

    async def encoder(self, name: str) -> EncoderBackend:
        return await self._of_kind(name, EncoderBackend, "an encoder", "/generate")

    async def _of_kind(self, name: str, kind: type[B], wanted: str, other: str) -> B:
        backend = self.backend(name)
        if not isinstance(backend, kind):
            raise BadRequest(f"model '{name}' is not {wanted}", hint=f"it answers {other} requests")
        await self.ready(name)
        return backend

    def status(self) -> list[ModelStatus]:
        return [
            ModelStatus(
                name=name,
                kind=backend.config.kind or "generator",
                provider=backend.config.provider,
                loaded=backend.loaded,
                queued=backend.gate.pending,
                error=self._errors.get(name),
            )
            for name, backend in self._backends.items()
        ]

    async def preload(self) -> None:
        """Load every local model now (a failure is logged and reported by /models)."""
        for name, backend in self._backends.items():
            if backend.config.local:
                try:
                    await self.ready(name)
                except ServeError as exc:
                    log.warning("%s", exc)

    def drain(self, reason: str) -> None:
        """Refuse new and waiting requests with 503 saying ``reason``; the running ones go on."""
        for backend in self._backends.values():
            backend.gate.close(reason)

    async def close(self) -> None:
        for backend in self._backends.values():
            await backend.close()
