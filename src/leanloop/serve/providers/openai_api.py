"""Generators behind an OpenAI-compatible endpoint (OpenAI, vLLM, any compatible server) through
the official ``openai`` client: ``n`` samples per request, ranked by their log-probabilities; the
OpenAI requests of ``/v1`` (chat and text completions, whole or streamed) are passed on."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from leanloop.serve.providers.base import (
    ChatReply,
    Piece,
    RemoteGenerator,
    TextAnswer,
    TextCall,
    TokenLogprob,
)


class OpenAIGenerator(RemoteGenerator):
    provider = "openai"

    def make_client(self, key: str) -> Any:
        from leanloop.prover.external import openai_client

        config = self.config
        return openai_client(
            key,
            config.base_url,
            timeout=config.timeout,
            max_retries=config.retries,
            asynchronous=True,
        )

    async def sample(
        self, messages: list[dict[str, str]], n: int
    ) -> list[tuple[str, float | None]]:
        answer = await self.client.chat.completions.create(
            model=self.config.model,
            messages=messages,
            n=n,
            temperature=self.config.temperature,
            max_tokens=self.config.max_tokens,
            logprobs=True,
        )
        choices = getattr(answer, "choices", None)
        if not isinstance(choices, list):
            raise self.malformed("has no 'choices'")
        replies = []
        for choice in choices:
            content = choice.message.content if choice.message is not None else None
            if not isinstance(content, str):
                continue
            replies.append((content, _logprob(choice)))
        return replies

    # -- the OpenAI requests of /v1, passed on ---------------------------------------------------

    def _arguments(self, call: TextCall) -> dict[str, Any]:
        given = {
            "model": self.config.model,
            "n": call.n,
            "temperature": call.temperature,
            "top_p": call.top_p,
            "max_tokens": self.token_limit(call),
            "stop": call.stop or None,
            "seed": call.seed,
        }
        if call.messages is not None:
            given["messages"] = call.messages
            if call.logprobs is not None:
                given.update(logprobs=True, top_logprobs=call.logprobs or None)
        else:
            given["prompt"] = call.prompt
            given["logprobs"] = call.logprobs
        return {name: value for name, value in given.items() if value is not None}

    async def answer(self, call: TextCall) -> TextAnswer:
        if call.messages is not None:
            answer = await self.client.chat.completions.create(**self._arguments(call))
        else:
            answer = await self.client.completions.create(**self._arguments(call))
        choices = getattr(answer, "choices", None)
        if not isinstance(choices, list):
            raise self.malformed("has no 'choices'")
        replies = [_reply(choice, chat=call.messages is not None) for choice in choices]
        usage = getattr(answer, "usage", None)
        return TextAnswer(
            replies,
            prompt_tokens=getattr(usage, "prompt_tokens", None),
            completion_tokens=getattr(usage, "completion_tokens", None),
        )

    async def answer_stream(self, call: TextCall) -> AsyncIterator[Piece | TextAnswer]:
        chat = call.messages is not None
        endpoint = self.client.chat.completions if chat else self.client.completions
        stream = await endpoint.create(
            **self._arguments(call), stream=True, stream_options={"include_usage": True}
        )
        texts = [""] * call.n
        finishes: list[str | None] = [None] * call.n
        usage = None
        async for chunk in stream:
            usage = getattr(chunk, "usage", None) or usage
            for choice in getattr(chunk, "choices", None) or []:
                index = choice.index
                if not 0 <= index < call.n:
                    raise self.malformed(f"has a choice #{index} of {call.n}")
                text = (choice.delta.content if chat else choice.text) or ""
                if text:
                    texts[index] += text
                    yield Piece(index, text)
                finishes[index] = choice.finish_reason or finishes[index]
        yield TextAnswer(
            [
                ChatReply(text, None, None, None, finish)
                for text, finish in zip(texts, finishes, strict=True)
            ],
            prompt_tokens=getattr(usage, "prompt_tokens", None),
            completion_tokens=getattr(usage, "completion_tokens", None),
        )


def _reply(choice: Any, *, chat: bool) -> ChatReply:
    if chat:
        message = getattr(choice, "message", None)
        text = getattr(message, "content", None) or ""
        tokens = _chat_tokens(choice)
    else:
        text = getattr(choice, "text", None) or ""
        tokens = _text_tokens(choice)
    return ChatReply(text, _logprob(choice), None, tokens, choice.finish_reason)


def _chat_tokens(choice: Any) -> list[TokenLogprob] | None:
    content = getattr(getattr(choice, "logprobs", None), "content", None)
    if not content:
        return None
    return [
        TokenLogprob(t.token, t.logprob, [(a.token, a.logprob) for a in t.top_logprobs or []])
        for t in content
    ]


def _text_tokens(choice: Any) -> list[TokenLogprob] | None:
    logprobs = getattr(choice, "logprobs", None)
    tokens = getattr(logprobs, "tokens", None)
    values = getattr(logprobs, "token_logprobs", None)
    if not tokens or values is None:
        return None
    tops = getattr(logprobs, "top_logprobs", None) or [None] * len(tokens)
    return [
        TokenLogprob(token, value or 0.0, list((top or {}).items()))
        for token, value, top in zip(tokens, values, tops, strict=False)
    ]


def _logprob(choice: Any) -> float | None:
    """The reply's log-probability: the sum over its tokens (None when not given)."""
    logprobs = getattr(choice, "logprobs", None)
    tokens = getattr(logprobs, "content", None) if logprobs is not None else None
    if not tokens:
        values = getattr(logprobs, "token_logprobs", None) if logprobs is not None else None
        if values:
            return float(sum(v for v in values if v is not None))
        return None
    try:
        return float(sum(token.logprob for token in tokens))
    except (TypeError, AttributeError):
        return None
