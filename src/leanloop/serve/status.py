"""``GET /health`` (the server answers) and ``GET /models`` (each configured model: kind,
provider, loaded or not; and the progress model)."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field

from leanloop.serve.registry import ModelStatus
from leanloop.serve.state import ServerState, server_state


class Health(BaseModel):
    status: Literal["ok"] = "ok"


class ProgressStatus(BaseModel):
    configured: bool = Field(description="Whether use_reward can be asked for.")
    loaded: bool


class ModelsStatus(BaseModel):
    models: list[ModelStatus]
    progress_model: ProgressStatus
    lean: bool = Field(description="Whether a Lean project is configured for /verify.")


router = APIRouter(tags=["Server"])


@router.get("/health", response_model=Health)
async def health() -> Health:
    """The server is up."""
    return Health()


@router.get("/models", response_model=ModelsStatus)
async def models(state: ServerState = Depends(server_state)) -> ModelsStatus:
    """The configured models and whether each is loaded."""
    return ModelsStatus(
        models=state.models.status(),
        progress_model=ProgressStatus(
            configured=state.progress.configured, loaded=state.progress.loaded
        ),
        lean=state.config.lean is not None,
    )
