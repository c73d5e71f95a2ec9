"""Generators behind Google's Gemini API through the official ``google-genai`` client: several
candidates per call (at most 8, so more calls for more), ranked by how often each tactic comes
back; the chats of ``/v1`` are passed on the same way (streamed: one stream per reply)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from leanloop.serve.providers.base import (
    ChatReply,
    Piece,
    RemoteGenerator,
    TextAnswer,
    TextCall,
    merge_streams,
)

#: Candidates the Gemini API gives per call at most.
MAX_CANDIDATES = 8

#: Gemini's finish reasons as OpenAI's.
_FINISH = {"STOP": "stop", "MAX_TOKENS": "length"}


class GeminiGenerator(RemoteGenerator):
    provider = "gemini"

    def make_client(self, key: str) -> Any:
        from google import genai
        from google.genai import types

        retry = None
        if self.config.retries:
            retry = types.HttpRetryOptions(
                attempts=self.config.retries + 1, initial_delay=0.5, max_delay=8.0
            )
        options = types.HttpOptions(
            base_url=self.config.base_url,
            timeout=int(self.config.timeout * 1000),  # milliseconds
            retry_options=retry,
        )
        return genai.Client(api_key=key, http_options=options)

    async def sample(
        self, messages: list[dict[str, str]], n: int
    ) -> list[tuple[str, float | None]]:
        call = TextCall(messages=messages, n=n, temperature=self.config.temperature)
        answer = await self.answer(call)
        return [(reply.text, None) for reply in answer.replies if reply.text]

    def _request(self, call: TextCall, count: int) -> dict[str, Any]:
        from google.genai import types

        messages = self.chat_only(call)
        system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
        contents = [
            types.Content(
                role="model" if m["role"] == "assistant" else "user",
                parts=[types.Part(text=m["content"])],
            )
            for m in messages
            if m["role"] != "system"
        ]
        config = types.GenerateContentConfig(
            system_instruction=system or None,
            temperature=call.temperature,
            top_p=call.top_p,
            seed=call.seed,
            candidate_count=count,
            max_output_tokens=self.token_limit(call),
            stop_sequences=call.stop or None,
        )
        return {"model": self.config.model, "contents": contents, "config": config}

    async def answer(self, call: TextCall) -> TextAnswer:
        sizes = [MAX_CANDIDATES] * (call.n // MAX_CANDIDATES)
        if call.n % MAX_CANDIDATES:
            sizes.append(call.n % MAX_CANDIDATES)
        batches = await asyncio.gather(*(self._some(call, size) for size in sizes))
        replies = [reply for batch, _, _ in batches for reply in batch]
        generated = [tokens for _, _, tokens in batches]
        return TextAnswer(
            replies,
            prompt_tokens=batches[0][1] if batches else None,
            completion_tokens=None if None in generated else sum(filter(None, generated)),
        )

    async def _some(
        self, call: TextCall, count: int
    ) -> tuple[list[ChatReply], int | None, int | None]:
        """``count`` replies, and the tokens of the prompt and of the replies together as the
        provider counted them."""
        answer = await self.client.aio.models.generate_content(**self._request(call, count))
        candidates = getattr(answer, "candidates", None)
        if not isinstance(candidates, list):
            raise self.malformed("has no 'candidates'")
        replies = [
            ChatReply(_text(candidate), None, None, None, _finish(candidate))
            for candidate in candidates
        ]
        usage = getattr(answer, "usage_metadata", None)
        return (
            replies,
            getattr(usage, "prompt_token_count", None),
            getattr(usage, "candidates_token_count", None),
        )

    async def answer_stream(self, call: TextCall) -> AsyncIterator[Piece | TextAnswer]:
        request = self._request(call, 1)
        texts = [""] * call.n
        finishes: list[str | None] = [None] * call.n
        lengths: list[int | None] = [None] * call.n
        prompt_tokens = None
        streams = [self._chunks(request) for _ in range(call.n)]
        async for index, chunk in merge_streams(streams):
            for candidate in getattr(chunk, "candidates", None) or []:
                text = _text(candidate)
                if text:
                    texts[index] += text
                    yield Piece(index, text)
                finishes[index] = _finish(candidate) or finishes[index]
            usage = getattr(chunk, "usage_metadata", None)
            if usage is not None:
                prompt_tokens = getattr(usage, "prompt_token_count", None) or prompt_tokens
                lengths[index] = getattr(usage, "candidates_token_count", None) or lengths[index]
        replies = [
            ChatReply(text, None, length, None, finish)
            for text, length, finish in zip(texts, lengths, finishes, strict=True)
        ]
        yield TextAnswer(replies, prompt_tokens=prompt_tokens)

    async def _chunks(self, request: dict[str, Any]) -> AsyncIterator[Any]:
        stream = await self.client.aio.models.generate_content_stream(**request)
        async for chunk in stream:
            yield chunk

    async def close(self) -> None:
        if self.client is not None:
            await self.client.aio.aclose()
            self.client.close()
            self.client = None
        self.loaded = False


def _text(candidate: Any) -> str:
    parts = getattr(getattr(candidate, "content", None), "parts", None) or []
    return "".join(p.text for p in parts if getattr(p, "text", None))


def _finish(candidate: Any) -> str | None:
    reason = getattr(candidate, "finish_reason", None)
    name = getattr(reason, "name", None) or (reason if isinstance(reason, str) else None)
    return _FINISH.get(name or "", "stop" if name else None)
