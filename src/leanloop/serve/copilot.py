"""Lean Copilot's external-model API: ``POST /generate`` (tactics for a goal state, best first,
optionally rescored by the progress model, as LeanDojo-v2 adds) and ``POST /encode`` (the
embedding of a goal state)."""

from __future__ import annotations

import math
import sys

from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field

from leanloop.ml.protocols import GeneratedTactic
from leanloop.serve.state import ServerState, server_state
from leanloop.serve.wire import Text, omitted_when_null

#: The score of a candidate the progress model could not score (it comes last).
UNSCORED = -sys.float_info.max


class GenerateRequest(BaseModel):
    name: Text = Field(description="The model, as named in the server configuration.")
    input: Text = Field(description="The goal state, as Lean pretty-prints it.")
    prefix: Text | None = Field(
        default="", description='The start of the tactic (Lean Copilot\'s suggest_tactics "rw").'
    )
    use_reward: bool = Field(
        default=False,
        description="Rank by the progress model's reward (fewer steps left is better).",
    )
    num_samples: int | None = Field(
        default=None, ge=1, le=64, description="Tactics wanted (default: the model's num_samples)."
    )


class Generation(BaseModel):
    output: str = Field(description="A tactic (it begins with the prefix).")
    score: float = Field(
        description="Higher is better: the model's probability of the tactic, or with "
        "use_reward the reward."
    )
    model_score: float | None = omitted_when_null(
        description="With use_reward: the model's probability of the tactic."
    )
    steps_remaining: float | None = omitted_when_null(
        description="With use_reward: the steps the progress model predicts after the tactic."
    )
    reward: float | None = omitted_when_null(description="With use_reward: -steps_remaining.")


class GenerateResponse(BaseModel):
    outputs: list[Generation] = Field(description="Best first.")


class EncodeRequest(BaseModel):
    name: Text = Field(description="An encoder, as named in the server configuration.")
    input: Text = Field(description="The text to embed (a goal state).")


class EncodeResponse(BaseModel):
    outputs: list[float] = Field(description="The embedding (unit length).")


router = APIRouter(tags=["Lean Copilot"])


def probability(log_score: float) -> float:
    """A candidate's log-probability as a probability in [0, 1] (0 for a broken score)."""
    value = math.exp(min(log_score, 0.0)) if not math.isnan(log_score) else 0.0
    return value if math.isfinite(value) else 0.0


@router.post("/generate", response_model=GenerateResponse)
async def generate(
    request: GenerateRequest, state: ServerState = Depends(server_state)
) -> GenerateResponse:
    """Tactics for a goal state, best first (Lean Copilot's external generator API)."""
    if request.use_reward:
        # fail before generating when there is no progress model
        state.progress.require()
    generator = await state.models.generator(request.name)
    k = request.num_samples or generator.config.num_samples
    prefix = request.prefix or ""
    tactics = await generator.generate(request.input, prefix, k)
    if not request.use_reward:
        return GenerateResponse(
            outputs=[Generation(output=t.tactic, score=probability(t.score)) for t in tactics]
        )
    return GenerateResponse(outputs=await _rewarded(state, request.input, tactics))


async def _rewarded(
    state: ServerState, goal: str, tactics: list[GeneratedTactic]
) -> list[Generation]:
    steps = await state.progress.steps_remaining(goal, [t.tactic for t in tactics])
    outputs = []
    for tactic, left in zip(tactics, steps, strict=True):
        known = math.isfinite(left)
        outputs.append(
            Generation(
                output=tactic.tactic,
                score=-left if known else UNSCORED,
                model_score=probability(tactic.score),
                steps_remaining=left if known else None,
                reward=-left if known else None,
            )
        )
    outputs.sort(key=lambda g: (-g.score, -(g.model_score or 0.0)))
    return outputs


@router.post("/encode", response_model=EncodeResponse)
async def encode(
    request: EncodeRequest, state: ServerState = Depends(server_state)
) -> EncodeResponse:
    """The embedding of a goal state (Lean Copilot's external encoder API)."""
    encoder = await state.models.encoder(request.name)
    return EncodeResponse(outputs=await encoder.encode(request.input))
