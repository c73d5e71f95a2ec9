"""What the routes share while the server runs: the configuration, the models, the progress model,
the Lean verifier and the keys; built when the server starts, drained and closed when it
stops."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request

from leanloop.serve.config import ServeConfig
from leanloop.serve.errors import Unavailable
from leanloop.serve.keys import Secrets
from leanloop.serve.registry import ModelRegistry
from leanloop.serve.rewards import ProgressService
from leanloop.serve.verifier import VerifyService


@dataclass
class ServerState:
    config: ServeConfig
    secrets: Secrets
    models: ModelRegistry
    progress: ProgressService
    verifier: VerifyService
    started: int  # when the server started (seconds since the epoch)

    def drain(self, reason: str) -> None:
        """Refuse new and queued requests (models and Lean) with 503 saying ``reason``."""
        self.models.drain(reason)
        self.verifier.gate.close(reason)

    async def close(self) -> None:
        await self.models.close()
        self.progress.close()
        self.verifier.close()


async def server_state(request: Request) -> ServerState:
    """The running server's state (a dependency of every route; async, so that FastAPI does not
    hand it to a worker thread)."""
    state = getattr(request.app.state, "leanloop", None)
    if state is None:
        raise Unavailable("the server is starting or stopping")
    return state
