"""The model server as an ASGI application: the routes, and what is set up when it starts (the
configuration — given, or read from ``$LEANLOOP_SERVE_CONFIG`` —, the models, each local model's
checkpoint found, the keys, CORS, the body limit) and closed when it stops, both through FastAPI's
lifespan; a configuration that does not load, or names a model that is not there, stops the start
with one line. Stopping is graceful: see ``lifecycle``."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import secrets
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

from fastapi import FastAPI
from starlette.middleware.body_limit import RequestBodyLimitMiddleware
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

import leanloop.serve.chat as chat
import leanloop.serve.copilot as copilot
import leanloop.serve.kimina as kimina
import leanloop.serve.playground as playground
import leanloop.serve.status as status
from leanloop import __version__
from leanloop.errors import LeanloopError
from leanloop.serve.admission import Gate
from leanloop.serve.config import ServeConfig
from leanloop.serve.keys import Secrets, same_key
from leanloop.serve.lifecycle import STOPPING, RequestWatch, StopSignals
from leanloop.serve.providers import Backend
from leanloop.serve.registry import ModelRegistry
from leanloop.serve.responses import error_response, install_error_handlers
from leanloop.serve.rewards import ProgressService
from leanloop.serve.sources import check_sources
from leanloop.serve.state import ServerState
from leanloop.serve.verifier import ServerFactory, VerifyService

log = logging.getLogger("leanloop.serve")

#: Paths anyone may reach when an API key is configured.
OPEN_PATHS = frozenset({"/", "/health", "/openapi.json", "/docs", "/docs/oauth2-redirect"})

#: Loggers whose handlers get the key-masking filter.
_LOGGERS = ("", "uvicorn", "uvicorn.error", "uvicorn.access", "leanloop")


def build_api(lifespan: Any = None) -> FastAPI:
    """The routes and error handlers (no configuration needed); ``lifespan`` sets up and closes
    what they use."""
    api = FastAPI(
        lifespan=lifespan,
        title="leanloop model server",
        version=__version__,
        description="Tactic generation (Lean Copilot's API), embeddings, LeanProgress rewards, "
        "Lean verification (Kimina's API) and the OpenAI API (chat and text completions, streamed "
        "token by token).",
        redoc_url=None,
        # FastAPI's OpenTelemetry spans and metrics (on whenever opentelemetry is installed)
        # cost every request more than the routes themselves; nothing here reads them
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )
    for module in (copilot, chat, kimina, status, playground):
        api.include_router(module.router)
    install_error_handlers(api)
    return api


class Guard:
    """Gives each request an id (``X-Request-ID``, kept when the client sends a sane one),
    refuses requests without the server's key when it has one (401, compared in constant time)
    and bodies declared larger than ``max_body`` (413; ``RequestBodyLimitMiddleware`` behind it
    stops bodies that turn out larger than declared)."""

    def __init__(self, app: ASGIApp, api_key: str | None, max_body: int) -> None:
        self.app = app
        self.api_key = api_key
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = _given_id(scope) or secrets.token_hex(6)
        scope.setdefault("state", {})["request_id"] = rid
        header = (b"x-request-id", rid.encode())

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), header]
            await send(message)

        locked = self.api_key is not None and scope["path"] not in OPEN_PATHS
        if locked and not self._authorised(scope):
            response = error_response(
                scope["path"],
                401,
                "missing or wrong API key (send 'Authorization: Bearer KEY')",
                headers={"WWW-Authenticate": "Bearer"},
            )
        elif _declared_length(scope) > self.max_body:
            response = error_response(
                scope["path"], 413, f"the body is larger than {self.max_body} bytes"
            )
        else:
            await self.app(scope, receive, send_with_id)
            return
        await response(scope, receive, send_with_id)

    def _authorised(self, scope: Scope) -> bool:
        assert self.api_key is not None
        given = None
        for name, value in scope.get("headers", []):
            if name == b"authorization":
                text = value.decode("latin-1").strip()
                given = text[7:].strip() if text[:7].lower() == "bearer " else text
            elif name == b"x-api-key" and given is None:
                given = value.decode("latin-1").strip()
        return given is not None and same_key(given, self.api_key)


def _declared_length(scope: Scope) -> int:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return 0
    return 0


def _given_id(scope: Scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"x-request-id":
            text = value.decode("latin-1")
            if 0 < len(text) <= 64 and all(c.isalnum() or c in "-_." for c in text):
                return text
    return None


class LeanloopServer:
    """The ASGI application (``uvicorn leanloop.serve:app``, or ``create_app(config)``).

    ``backends`` replaces the backends of some models, ``verifier_factory`` makes the Lean
    servers of /verify (tests and benchmarks)."""

    def __init__(
        self,
        config: ServeConfig | None = None,
        *,
        backends: Mapping[str, Backend] | None = None,
        verifier_factory: ServerFactory | None = None,
    ) -> None:
        self.config = config
        self.backends = backends
        self.verifier_factory = verifier_factory
        self.api = build_api(lifespan=self._lifespan)
        self._entry: ASGIApp | None = None
        self._watch: RequestWatch | None = None
        self._finishing: asyncio.Task | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._signals = StopSignals(self.begin_shutdown)
        self._start_error: LeanloopError | None = None
        self._filters: list[tuple[logging.Handler, logging.Filter]] = []

    @property
    def state(self) -> ServerState | None:
        return getattr(self.api.state, "leanloop", None)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._run_lifespan(scope, receive, send)
        elif self._entry is None:
            await self.api(scope, receive, send)  # not started: the routes answer 503
        else:
            await self._entry(scope, receive, send)

    async def _run_lifespan(self, scope: Scope, receive: Receive, send: Send) -> None:
        """FastAPI's lifespan, with a start that fails for a reason the user can fix reported
        as its one line (not a traceback)."""

        async def send_one_line(message: Message) -> None:
            if message["type"] == "lifespan.startup.failed" and self._start_error is not None:
                message = {**message, "message": f"error: {self._start_error}"}
            await send(message)

        try:
            await self.api(scope, receive, send_one_line)
        except LeanloopError as exc:
            if exc is not self._start_error:
                raise

    @contextlib.asynccontextmanager
    async def _lifespan(self, api: FastAPI) -> AsyncIterator[None]:
        self._start_error = None
        try:
            await self.start()
        except LeanloopError as exc:
            self._start_error = exc
            raise
        # what start-up made lives as long as the server: exempt it from the cycle collector's
        # full passes, which otherwise pause requests for tens of ms
        gc.collect()
        gc.freeze()
        self._signals.install()
        try:
            yield
        finally:
            self._signals.remove()
            await self.stop()
            gc.unfreeze()

    async def start(self) -> None:
        """Read the configuration and set everything up (models load later, or now with
        ``preload``)."""
        from leanloop.settings import Settings

        settings = Settings.from_env()
        config = self.config
        if config is None:
            if settings.serve_config is None:
                raise LeanloopError(
                    "no server configuration: LEANLOOP_SERVE_CONFIG is not set",
                    hint="set it to a YAML file naming the models, or run "
                    "'leanloop serve --config FILE'",
                )
            config = ServeConfig.load(settings.serve_config)
            source = str(settings.serve_config)
        else:
            source = "the server configuration"
        check_sources(config, source, skip=set(self.backends or ()))
        keys = Secrets()
        api_key = (
            keys.key(config.api_key_env, "this server's API key") if config.api_key_env else None
        )
        self._mask_keys(keys)
        state = ServerState(
            config=config,
            secrets=keys,
            models=ModelRegistry(config, keys, self.backends),
            progress=ProgressService(config.progress_model or settings.progress_model),
            verifier=VerifyService(
                config.lean,
                Gate(
                    "lean",
                    concurrency=config.lean.max_repls if config.lean else 2,
                    max_queue=config.max_queue,
                    max_wait=config.max_queue_wait,
                ),
                self.verifier_factory,
            ),
            started=int(time.time()),
        )
        entry: ASGIApp = RequestBodyLimitMiddleware(self.api, config.max_body_bytes)
        self._watch = RequestWatch(entry)
        entry = Guard(self._watch, api_key, config.max_body_bytes)
        if config.cors_origins:
            entry = CORSMiddleware(
                entry,
                allow_origins=config.cors_origins,
                allow_methods=["GET", "POST", "OPTIONS"],
                allow_headers=["authorization", "content-type", "x-api-key", "x-request-id"],
                expose_headers=["x-request-id", "retry-after"],
            )
        self.api.state.leanloop = state
        self._entry = entry
        self._finishing = None
        self._loop = asyncio.get_running_loop()
        names = ", ".join(m.name for m in config.models) or "none"
        log.info("models: %s", names)
        if config.preload:
            await state.models.preload()

    def begin_shutdown(self) -> None:
        """Stop admitting: new requests and the queued ones get a JSON 503 from now on, the
        ones running have ``shutdown_timeout`` seconds to finish and are then cancelled with a
        JSON 503. Runs in the event loop: on SIGTERM or SIGINT under uvicorn, else when the
        server stops (``shutdown_soon`` asks for it from any thread)."""
        state, watch = self.state, self._watch
        if state is None or watch is None or watch.stopping:
            return
        watch.stop()
        grace = state.config.shutdown_timeout
        log.info(
            "shutting down: new and queued requests get 503; %d in flight have %g s to finish",
            len(watch.active),
            grace,
        )
        state.drain(STOPPING)
        self._finishing = asyncio.get_running_loop().create_task(watch.finish(grace))

    def shutdown_soon(self) -> None:
        """``begin_shutdown`` from any thread (the server itself stops when its ASGI server
        does)."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self.begin_shutdown)

    async def stop(self) -> None:
        """Let the requests in flight end (``begin_shutdown``), then close the models, the
        progress model and the Lean servers."""
        self.begin_shutdown()
        if self._finishing is not None:
            await self._finishing
        state = self.state
        self._entry = None
        self._watch = None
        self._loop = None
        self.api.state.leanloop = None
        if state is not None:
            await state.close()
        for handler, log_filter in self._filters:
            handler.removeFilter(log_filter)
        self._filters.clear()

    def _mask_keys(self, keys: Secrets) -> None:
        log_filter = keys.log_filter()
        for name in _LOGGERS:
            for handler in logging.getLogger(name).handlers:
                handler.addFilter(log_filter)
                self._filters.append((handler, log_filter))


def create_app(config: ServeConfig | None = None, **overrides: Any) -> LeanloopServer:
    """The server for ``config`` (default: read from ``$LEANLOOP_SERVE_CONFIG`` when it
    starts); ``overrides`` are ``LeanloopServer``'s test and benchmark hooks."""
    return LeanloopServer(config, **overrides)


app = create_app()
