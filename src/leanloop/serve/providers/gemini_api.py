"""Generators behind Google's Gemini API through the official ``google-genai`` client: several
candidates per call (at most 8, so more calls for more), ranked by how often each tactic comes
back."""

from __future__ import annotations

import asyncio
from typing import Any

from leanloop.serve.providers.base import RemoteGenerator

#: Candidates the Gemini API gives per call at most.
MAX_CANDIDATES = 8


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
        sizes = [MAX_CANDIDATES] * (n // MAX_CANDIDATES)
        if n % MAX_CANDIDATES:
            sizes.append(n % MAX_CANDIDATES)
        batches = await asyncio.gather(*(self._some(messages, size) for size in sizes))
        return [(text, None) for batch in batches for text in batch]

    async def _some(self, messages: list[dict[str, str]], count: int) -> list[str]:
        from google.genai import types

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
            temperature=self.config.temperature,
            candidate_count=count,
            max_output_tokens=self.config.max_tokens,
        )
        answer = await self.client.aio.models.generate_content(
            model=self.config.model, contents=contents, config=config
        )
        candidates = getattr(answer, "candidates", None)
        if not isinstance(candidates, list):
            raise self.malformed("has no 'candidates'")
        texts = []
        for candidate in candidates:
            parts = getattr(getattr(candidate, "content", None), "parts", None) or []
            text = "".join(p.text for p in parts if getattr(p, "text", None))
            if text:
                texts.append(text)
        return texts

    async def close(self) -> None:
        if self.client is not None:
            await self.client.aio.aclose()
            self.client.close()
            self.client = None
        self.loaded = False
