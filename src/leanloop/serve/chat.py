"""OpenAI's wire format for the generators, so that the official ``openai`` client (and anything
built on it) works unchanged: ``GET /v1/models``, ``POST /v1/chat/completions`` and
``POST /v1/completions`` with ``n``, ``temperature``, ``top_p``, ``max_tokens``, ``stop``,
``seed``, ``logprobs``, ``usage``, and streaming (server-sent events, each reply's tokens sent
as they are generated). Local models answer themselves; remote ones pass the request on to their
provider (text completions: OpenAI-compatible endpoints only)."""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field

from leanloop.serve.errors import BadRequest
from leanloop.serve.openai_answers import Shape, answer_body, streamed
from leanloop.serve.providers import GeneratorBackend
from leanloop.serve.providers.base import TextCall
from leanloop.serve.state import ServerState, server_state
from leanloop.serve.wire import Text

#: Replies per request at most.
MAX_CHOICES = 64
#: Tokens a request may ask for at most (the model's ``max_tokens`` caps it further).
MAX_TOKENS = 8192
#: Tokens a text completion gets when the request says none (OpenAI's default).
COMPLETION_DEFAULT_TOKENS = 16


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

    include_usage: bool = Field(
        default=False, description="End the stream with a chunk holding the usage figures."
    )


class Sampling(BaseModel):
    """What chat and text completions share; fields not listed here are accepted and
    ignored."""

    model_config = ConfigDict(extra="allow")

    model: Text
    n: int = Field(default=1, ge=1, le=MAX_CHOICES)
    temperature: float | None = Field(
        default=None,
        ge=0,
        le=2,
        description="0 (or below 1e-4): the most likely replies (greedy, or beam search for "
        "n > 1) on local models; default 1.",
    )
    top_p: float | None = Field(default=None, gt=0, le=1)
    stop: Text | list[Text] | None = None
    seed: int | None = None
    stream: bool | None = Field(
        default=False, description="Send the replies as server-sent events while generated."
    )
    stream_options: StreamOptions | None = None

    def stops(self) -> list[str]:
        return [self.stop] if isinstance(self.stop, str) else list(self.stop or [])

    def usage_streamed(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)


class ChatRequest(Sampling):
    """OpenAI's chat completion request."""

    messages: list[ChatMessage] = Field(min_length=1)
    max_tokens: int | None = Field(default=None, ge=1, le=MAX_TOKENS)
    max_completion_tokens: int | None = Field(default=None, ge=1, le=MAX_TOKENS)
    logprobs: bool | None = False
    top_logprobs: int | None = Field(default=None, ge=0, le=20)


class CompletionRequest(Sampling):
    """OpenAI's (legacy) text completion request: the model continues ``prompt``."""

    prompt: Text | list[Text] = Field(description="The text to continue, or several texts.")
    max_tokens: int | None = Field(default=COMPLETION_DEFAULT_TOKENS, ge=1, le=MAX_TOKENS)
    logprobs: int | None = Field(
        default=None, ge=0, le=20, description="Also give the this many most likely tokens."
    )
    echo: bool | None = False
    suffix: Text | None = None
    best_of: int | None = Field(default=None, ge=1, le=MAX_CHOICES)


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
    """The generators, which /v1/chat/completions and /v1/completions serve."""
    return ModelList(
        data=[
            ModelCard(id=m.name, created=state.started)
            for m in state.config.models
            if m.kind == "generator"
        ]
    )


async def _generator(state: ServerState, name: str) -> GeneratorBackend:
    backend = state.models.backend(name)
    if not isinstance(backend, GeneratorBackend):
        raise BadRequest(
            f"model '{name}' is an encoder",
            hint="/v1/chat/completions and /v1/completions serve the generators",
        )
    await state.models.ready(name)
    return backend


@router.post("/chat/completions", response_model=None)
async def chat_completions(request: ChatRequest, state: ServerState = Depends(server_state)) -> Any:
    """Replies of a model to a chat (OpenAI's chat completions)."""
    backend = await _generator(state, request.model)
    top = request.top_logprobs or 0
    call = TextCall(
        messages=[{"role": m.role, "content": m.text()} for m in request.messages],
        n=request.n,
        temperature=request.temperature,
        top_p=request.top_p,
        max_tokens=request.max_completion_tokens or request.max_tokens,
        stop=request.stops(),
        seed=request.seed,
        logprobs=top if request.logprobs else None,
    )
    shape = Shape("chat", request.model, request.stops(), backend_limit(backend, call))
    if request.stream:
        return await streamed(backend, [call], shape, usage=request.usage_streamed())
    return answer_body(shape, [await backend.complete(call)])


@router.post("/completions", response_model=None)
async def completions(
    request: CompletionRequest, state: ServerState = Depends(server_state)
) -> Any:
    """Continuations of texts (OpenAI's text completions): ``n`` per prompt, in the order of
    the prompts."""
    if request.echo:
        raise BadRequest("echo is not supported", hint="the prompt is the text you sent")
    if request.suffix:
        raise BadRequest("suffix is not supported (no fill-in-the-middle)")
    if request.best_of not in (None, request.n):
        raise BadRequest("best_of other than n is not supported", hint="ask for n replies")
    backend = await _generator(state, request.model)
    prompts = [request.prompt] if isinstance(request.prompt, str) else request.prompt
    if not prompts:
        raise BadRequest("prompt is empty", hint="give a text or a list of texts")
    calls = [
        TextCall(
            prompt=prompt,
            n=request.n,
            temperature=request.temperature,
            top_p=request.top_p,
            max_tokens=request.max_tokens,
            stop=request.stops(),
            seed=request.seed,
            logprobs=request.logprobs,
        )
        for prompt in prompts
    ]
    shape = Shape("text", request.model, request.stops(), backend_limit(backend, calls[0]))
    if request.stream:
        return await streamed(backend, calls, shape, usage=request.usage_streamed())
    answers = await asyncio.gather(*(backend.complete(call) for call in calls))
    return answer_body(shape, list(answers))


def backend_limit(backend: GeneratorBackend, call: TextCall) -> int:
    """The tokens a reply of ``backend`` may have for ``call`` (a reply that long without an
    end was cut: its finish reason is ``length``)."""
    limit = backend.config.max_tokens
    return min(call.max_tokens or limit, limit)
