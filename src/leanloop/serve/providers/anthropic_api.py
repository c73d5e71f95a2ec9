"""Generators behind Anthropic's Messages API through the official ``anthropic`` client: one
reply per call, so ``n`` calls at once, ranked by how often each tactic comes back; the chats of
``/v1`` are passed on the same way (streamed: ``n`` streams at once)."""

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

#: Anthropic's stop reasons as OpenAI's finish reasons.
_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length"}


class AnthropicGenerator(RemoteGenerator):
    provider = "anthropic"

    def make_client(self, key: str) -> Any:
        from anthropic import AsyncAnthropic

        # base_url is the host: the client appends /v1/messages
        return AsyncAnthropic(
            api_key=key,
            base_url=self.config.base_url,
            timeout=self.config.timeout,
            max_retries=self.config.retries,
        )

    async def sample(
        self, messages: list[dict[str, str]], n: int
    ) -> list[tuple[str, float | None]]:
        arguments = self._arguments(messages, self.config.max_tokens)
        replies = await asyncio.gather(*(self._one(arguments) for _ in range(n)))
        return [(reply.text, None) for reply, _ in replies]

    def _arguments(
        self, messages: list[dict[str, str]], max_tokens: int, call: TextCall | None = None
    ) -> dict[str, Any]:
        # this client version has no temperature parameter: the model's default applies
        arguments: dict[str, Any] = {
            "model": self.config.model,
            "max_tokens": max_tokens,
            "system": "\n\n".join(m["content"] for m in messages if m["role"] == "system"),
            "messages": [m for m in messages if m["role"] != "system"],
        }
        if call is not None and call.stop:
            arguments["stop_sequences"] = call.stop
        return arguments

    async def _one(self, arguments: dict[str, Any]) -> tuple[ChatReply, int | None]:
        """One reply, and the prompt's tokens as the provider counted them."""
        answer = await self.client.messages.create(**arguments)
        blocks = getattr(answer, "content", None)
        if not isinstance(blocks, list):
            raise self.malformed("has no 'content'")
        text = "".join(block.text for block in blocks if getattr(block, "type", None) == "text")
        usage = getattr(answer, "usage", None)
        reply = ChatReply(
            text,
            None,
            getattr(usage, "output_tokens", None),
            None,
            _FINISH.get(getattr(answer, "stop_reason", None) or ""),
        )
        return reply, getattr(usage, "input_tokens", None)

    async def answer(self, call: TextCall) -> TextAnswer:
        arguments = self._arguments(self.chat_only(call), self.token_limit(call), call)
        answers = await asyncio.gather(*(self._one(arguments) for _ in range(call.n)))
        return TextAnswer([reply for reply, _ in answers], prompt_tokens=answers[0][1])

    async def answer_stream(self, call: TextCall) -> AsyncIterator[Piece | TextAnswer]:
        arguments = self._arguments(self.chat_only(call), self.token_limit(call), call)
        texts = [""] * call.n
        ends: list[tuple[str | None, int | None]] = [(None, None)] * call.n
        prompt_tokens = None
        streams = [self._events(arguments) for _ in range(call.n)]
        async for index, event in merge_streams(streams):
            kind = getattr(event, "type", None)
            if kind == "message_start":
                usage = getattr(getattr(event, "message", None), "usage", None)
                prompt_tokens = getattr(usage, "input_tokens", None) or prompt_tokens
            elif kind == "content_block_delta":
                text = getattr(event.delta, "text", None)
                if text:
                    texts[index] += text
                    yield Piece(index, text)
            elif kind == "message_delta":
                reason = getattr(event.delta, "stop_reason", None)
                ends[index] = (
                    _FINISH.get(reason or ""),
                    getattr(getattr(event, "usage", None), "output_tokens", None),
                )
        replies = [
            ChatReply(text, None, length, None, finish)
            for text, (finish, length) in zip(texts, ends, strict=True)
        ]
        yield TextAnswer(replies, prompt_tokens=prompt_tokens)

    async def _events(self, arguments: dict[str, Any]) -> AsyncIterator[Any]:
        stream = await self.client.messages.create(**arguments, stream=True)
        async for event in stream:
            yield event
