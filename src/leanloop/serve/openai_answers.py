"""The answers of the OpenAI routes in OpenAI's shapes: a chat or text completion whole (with
``usage``), or streamed as server-sent events (``data: {chunk}`` with each reply's new text as it
is generated, a last chunk per reply with its ``finish_reason``, with ``include_usage`` a chunk of
the usage figures, then ``data: [DONE]``)."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson
from fastapi.responses import StreamingResponse

from leanloop.serve.errors import ServeError
from leanloop.serve.providers import GeneratorBackend
from leanloop.serve.providers.base import (
    ChatReply,
    Piece,
    TextAnswer,
    TextCall,
    TokenLogprob,
    merge_streams,
)
from leanloop.serve.responses import openai_error
from leanloop.serve.streaming import SentText

log = logging.getLogger("leanloop.serve")


@dataclass
class Shape:
    """What an answer looks like: a chat (``message``/``delta``) or text completion, for which
    model, the stop sequences that cut the replies, and the token limit of a reply."""

    kind: Literal["chat", "text"]
    model: str
    stops: list[str]
    limit: int
    ident: str = field(default_factory=lambda: uuid.uuid4().hex)
    created: int = field(default_factory=lambda: int(time.time()))

    @property
    def object(self) -> str:
        return "chat.completion" if self.kind == "chat" else "text_completion"

    def head(self, chunk: bool = False) -> dict[str, Any]:
        prefix = "chatcmpl" if self.kind == "chat" else "cmpl"
        kind = self.object + (".chunk" if chunk and self.kind == "chat" else "")
        return {"id": f"{prefix}-{self.ident}", "object": kind, "created": self.created,
                "model": self.model}  # fmt: skip

    def cut(self, reply: ChatReply) -> tuple[str, str]:
        """The reply's text cut at its first stop sequence, and why it ended."""
        text = reply.text
        cuts = [text.index(s) for s in self.stops if s and s in text]
        if cuts:
            return text[: min(cuts)], "stop"
        if reply.finish is not None:
            return text, reply.finish
        return text, "length" if (reply.length or 0) >= self.limit else "stop"

    def logprobs(self, reply: ChatReply, text: str) -> Any:
        """The reply's token log-probabilities in OpenAI's shape (chat or text), for the
        tokens of ``text`` (the reply as cut); None when not asked for."""
        if reply.tokens is None:
            return None
        tokens = _within(reply.tokens, len(text))
        if self.kind == "chat":
            return {"content": [_chat_token(t) for t in tokens]}
        offsets, at = [], 0
        for token in tokens:
            offsets.append(at)
            at += len(token.token)
        return {
            "tokens": [t.token for t in tokens],
            "token_logprobs": [t.logprob for t in tokens],
            "top_logprobs": [_best(t.top) for t in tokens] if any(t.top for t in tokens) else None,
            "text_offset": offsets,
        }


def _within(tokens: list[TokenLogprob], length: int) -> list[TokenLogprob]:
    """The tokens that make up the first ``length`` characters of their text."""
    kept, at = [], 0
    for token in tokens:
        if at >= length:
            break
        kept.append(token)
        at += len(token.token)
    return kept


def _best(top: list[tuple[str, float]]) -> dict[str, float]:
    """The most likely tokens as a mapping (of tokens that read the same, the likeliest)."""
    best: dict[str, float] = {}
    for token, value in top:
        best.setdefault(token, value)
    return best


def _chat_token(token: TokenLogprob) -> dict[str, Any]:
    return {
        "token": token.token,
        "logprob": token.logprob,
        "bytes": list(token.token.encode()),
        "top_logprobs": [
            {"token": t, "logprob": v, "bytes": list(t.encode())} for t, v in token.top
        ],
    }


def usage(answers: list[TextAnswer]) -> dict[str, int] | None:
    """OpenAI's ``usage`` of the answers together (None when a provider did not count)."""
    prompt = [a.prompt_tokens for a in answers]
    generated = [a.generated_tokens() for a in answers]
    if any(p is None for p in prompt) or any(g is None for g in generated):
        return None
    p = sum(x for x in prompt if x is not None)
    g = sum(x for x in generated if x is not None)
    return {"prompt_tokens": p, "completion_tokens": g, "total_tokens": p + g}


def answer_body(shape: Shape, answers: list[TextAnswer]) -> dict[str, Any]:
    """The whole answer: every reply of every prompt (indices in that order) and ``usage``."""
    choices: list[dict[str, Any]] = []
    for answer in answers:
        for reply in answer.replies:
            text, finish = shape.cut(reply)
            choice: dict[str, Any] = {"index": len(choices), "finish_reason": finish,
                                      "logprobs": shape.logprobs(reply, text)}  # fmt: skip
            if shape.kind == "chat":
                choice["message"] = {"role": "assistant", "content": text}
            else:
                choice["text"] = text
            choices.append(choice)
    return {**shape.head(), "choices": choices, "usage": usage(answers)}


def _event(payload: Any) -> bytes:
    return b"data: " + orjson.dumps(payload) + b"\n\n"


async def streamed(
    backend: GeneratorBackend, calls: list[TextCall], shape: Shape, *, usage: bool
) -> StreamingResponse:
    """The streamed answer to ``calls`` (one per prompt). The stream starts once the model
    gives its first output, so that a request refused before (a full queue, a model that does
    not load, a provider that fails at once) gets its HTTP error instead."""
    n = calls[0].n
    merged = merge_streams([backend.stream(call) for call in calls])
    try:
        first = await anext(merged)
    except BaseException:
        await merged.aclose()
        raise
    return StreamingResponse(
        _events(shape, n, merged, first, usage), media_type="text/event-stream"
    )


async def _events(
    shape: Shape,
    n: int,
    merged: AsyncGenerator[tuple[int, Piece | TextAnswer]],
    first: tuple[int, Piece | TextAnswer],
    with_usage: bool,
) -> AsyncIterator[bytes]:
    sent: dict[int, SentText] = {}
    answers: list[TextAnswer] = []

    def chunk(index: int, text: str | None, finish: str | None = None, logprobs: Any = None):
        choice: dict[str, Any] = {"index": index, "finish_reason": finish, "logprobs": logprobs}
        if shape.kind == "chat":
            choice["delta"] = {} if text is None else {"content": text}
        else:
            choice["text"] = text or ""
        return _event({**shape.head(chunk=True), "choices": [choice]})

    def start(index: int) -> list[bytes]:
        """A reply's first chunk (a chat's says who speaks), before its first text."""
        if index in sent:
            return []
        sent[index] = SentText(shape.stops)
        if shape.kind != "chat":
            return []
        return [
            _event(
                {
                    **shape.head(chunk=True),
                    "choices": [
                        {
                            "index": index,
                            "delta": {"role": "assistant", "content": ""},
                            "finish_reason": None,
                            "logprobs": None,
                        }
                    ],
                }
            )
        ]

    try:
        item: tuple[int, Piece | TextAnswer] | None = first
        while item is not None:
            call_index, output = item
            if isinstance(output, Piece):
                index = call_index * n + output.reply
                for event in start(index):
                    yield event
                new = sent[index].grow(output.text)
                if new:
                    yield chunk(index, new)
            else:
                answers.append(output)
                for number, reply in enumerate(output.replies):
                    index = call_index * n + number
                    for event in start(index):
                        yield event
                    text, finish = shape.cut(reply)
                    rest = sent[index].finish(text)
                    logprobs = shape.logprobs(reply, text)
                    if rest or logprobs is not None:
                        yield chunk(index, rest, logprobs=logprobs)
                    yield chunk(index, None, finish)
            item = await anext(merged, None)
        if with_usage:
            yield _event({**shape.head(chunk=True), "choices": [], "usage": usage(answers)})
    except ServeError as exc:
        log.warning("a streamed answer ended early: %s", exc)
        yield _event(openai_error(exc.status, str(exc)))
    except Exception:
        log.exception("a streamed answer failed")
        yield _event(openai_error(500, "internal error; the server log has the details"))
    finally:
        await merged.aclose()
    yield b"data: [DONE]\n\n"
