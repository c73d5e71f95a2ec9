"""Generators behind Anthropic's Messages API through the official ``anthropic`` client: one
reply per call, so ``n`` calls at once, ranked by how often each tactic comes back."""

from __future__ import annotations

import asyncio
from typing import Any

from leanloop.serve.providers.base import RemoteGenerator


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
        system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
        turns = [m for m in messages if m["role"] != "system"]
        replies = await asyncio.gather(*(self._one(system, turns) for _ in range(n)))
        return [(text, None) for text in replies]

    async def _one(self, system: str, turns: list[dict[str, str]]) -> str:
        # this client version has no temperature parameter: the model's default applies
        answer = await self.client.messages.create(
            model=self.config.model,
            max_tokens=self.config.max_tokens,
            system=system,
            messages=turns,
        )
        blocks = getattr(answer, "content", None)
        if not isinstance(blocks, list):
            raise self.malformed("has no 'content'")
        return "".join(block.text for block in blocks if getattr(block, "type", None) == "text")
