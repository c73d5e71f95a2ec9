"""The OpenAI wire format for the local models, so that the official ``openai`` client (and
anything built on it) works unchanged: ``GET /v1/models`` and ``POST /v1/chat/completions`` with
``n``, ``temperature``, ``top_p``, ``max_tokens``, ``stop``, ``seed``, ``logprobs`` and
streaming (the replies are generated first, then streamed as chunks)."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from typing import Any, Literal

import orjson
from fastapi import APIRouter, Depends
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from leanloop.serve.errors import BadRequest
from leanloop.serve.providers.local import ChatReply, LocalGenerator
from leanloop.serve.state import ServerState, server_state
from leanloop.serve.wire import Text

#: Replies per request at most.
MAX_CHOICES = 64
#: Temperatures below this decode as 0 (dividing the logits by less overflows them).
MIN_TEMPERATURE = 1e-4


class ContentPart(BaseModel):
    model_config = ConfigDict(extra="allow")

    type: Text
    text: Text | None = None


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: Text = Field(
        min_length=1,
        description="system, user or assistant (as the model's chat template accepts).",
    )
    content: Text | list[ContentPart] | None = None

    def text(self) -> str:
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        parts = [p for p in self.content if p.type == "text"]
        if len(parts) != len(self.content):
            raise BadRequest("only text content is supported")
        return "".join(p.text or "" for p in parts)


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")

    include_usage: bool = False


class ChatRequest(BaseModel):
    """OpenAI's chat completion request; fields not listed here are accepted and ignored."""

    model_config = ConfigDict(extra="allow")

    model: Text
    messages: list[ChatMessage] = Field(min_length=1)
    n: int = Field(default=1, ge=1, le=MAX_CHOICES)
    temperature: float | None = Field(
        default=None,
        ge=0,
        le=2,
        description="0 (or below 1e-4): the most likely replies (greedy, or beam search for "
        "n > 1); default 1.",
    )
    top_p: float | None = Field(default=None, gt=0, le=1)
    max_tokens: int | None = Field(default=None, ge=1, le=8192)
    max_completion_tokens: int | None = Field(default=None, ge=1, le=8192)
    stop: Text | list[Text] | None = None
    seed: int | None = None
    logprobs: bool | None = False
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    stream: bool | None = False
    stream_options: StreamOptions | None = None


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "leanloop"


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


router = APIRouter(prefix="/v1", tags=["OpenAI"])


@router.get("/models", response_model=ModelList)
async def list_models(state: ServerState = Depends(server_state)) -> ModelList:
    """The local generators, which /v1/chat/completions serves."""
    return ModelList(
        data=[
            ModelCard(id=m.name, created=state.started)
            for m in state.config.models
            if m.provider == "hf"
        ]
    )


@router.post("/chat/completions", response_model=None)
async def chat_completions(request: ChatRequest, state: ServerState = Depends(server_state)) -> Any:
    """Replies of a local model to a chat (OpenAI's chat completions)."""
    backend = state.models.backend(request.model)
    if not isinstance(backend, LocalGenerator):
        raise BadRequest(
            f"model '{request.model}' runs at provider '{backend.config.provider}'",
            hint="/v1/chat/completions serves the local models (provider hf)",
        )
    await state.models.ready(request.model)
    messages = [{"role": m.role, "content": m.text()} for m in request.messages]
    options = _decoding(request, backend)
    replies = await backend.chat(messages, request.n, options, logprobs=bool(request.logprobs))
    stops = [request.stop] if isinstance(request.stop, str) else list(request.stop or [])
    limit = options["max_new_tokens"]
    choices = [_choice(i, reply, stops, limit) for i, reply in enumerate(replies)]
    ident = f"chatcmpl-{uuid.uuid4().hex}"
    created = int(time.time())
    if request.stream:
        return StreamingResponse(
            _chunks(ident, created, request.model, choices), media_type="text/event-stream"
        )
    return {
        "id": ident,
        "object": "chat.completion",
        "created": created,
        "model": request.model,
        "choices": choices,
    }


def _decoding(request: ChatRequest, backend: LocalGenerator) -> dict[str, Any]:
    """The request as the local model's decoding options."""
    temperature = 1.0 if request.temperature is None else request.temperature
    limit = backend.config.max_tokens
    asked = request.max_completion_tokens or request.max_tokens or limit
    options: dict[str, Any] = {
        "max_new_tokens": min(asked, limit),
        "seed": request.seed,
    }
    if temperature < MIN_TEMPERATURE:
        if request.n == 1:
            options["method"] = "greedy"
        else:
            options.update(method="beam", num_beams=request.n)
    else:
        options.update(
            method="sample",
            num_samples=request.n,
            temperature=temperature,
            top_p=request.top_p or 1.0,
        )
    return options


def _choice(index: int, reply: ChatReply, stops: list[str], max_new: int) -> dict[str, Any]:
    text, finish = reply.text, "stop"
    cut = [text.index(s) for s in stops if s and s in text]
    if cut:
        text = text[: min(cut)]
    elif reply.length >= max_new:
        finish = "length"
    choice: dict[str, Any] = {
        "index": index,
        "message": {"role": "assistant", "content": text},
        "finish_reason": finish,
        "logprobs": None,
    }
    if reply.tokens is not None:
        choice["logprobs"] = {
            "content": [
                {
                    "token": token,
                    "logprob": logprob,
                    "bytes": list(token.encode()),
                    "top_logprobs": [],
                }
                for token, logprob in reply.tokens
            ]
        }
    return choice


async def _chunks(
    ident: str, created: int, model: str, choices: list[dict[str, Any]]
) -> AsyncIterator[bytes]:
    def event(delta: dict[str, Any], index: int, finish: str | None, logprobs: Any = None):
        chunk = {
            "id": ident,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [
                {"index": index, "delta": delta, "finish_reason": finish, "logprobs": logprobs}
            ],
        }
        return b"data: " + orjson.dumps(chunk) + b"\n\n"

    for choice in choices:
        index = choice["index"]
        yield event({"role": "assistant", "content": ""}, index, None)
        yield event({"content": choice["message"]["content"]}, index, None, choice["logprobs"])
        yield event({}, index, choice["finish_reason"])
    yield b"data: [DONE]\n\n"
