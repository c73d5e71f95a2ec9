"""Generators behind an OpenAI-compatible endpoint (OpenAI, vLLM, any compatible server) through
the official ``openai`` client: ``n`` samples per request, ranked by their log-probabilities."""

from __future__ import annotations

from typing import Any

from leanloop.serve.providers.base import RemoteGenerator


class OpenAIGenerator(RemoteGenerator):
    provider = "openai"

    def make_client(self, key: str) -> Any:
        from openai import AsyncOpenAI

        return AsyncOpenAI(
            api_key=key,
            base_url=self.config.base_url,
            timeout=self.config.timeout,
            max_retries=self.config.retries,
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


def _logprob(choice: Any) -> float | None:
    """The reply's log-probability: the sum over its tokens (None when not given)."""
    logprobs = getattr(choice, "logprobs", None)
    tokens = getattr(logprobs, "content", None) if logprobs is not None else None
    if not tokens:
        return None
    try:
        return float(sum(token.logprob for token in tokens))
    except (TypeError, AttributeError):
        return None
