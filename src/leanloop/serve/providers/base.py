"""What every model backend offers the routes (load once, generate or encode, close), and what the
remote providers share: the prompt for a goal state and tactic prefix, the ranking of sampled
replies, and the mapping of a client's failure to 504 (timeout) or 502 (anything else)."""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from collections.abc import Awaitable, Sequence
from typing import Any, TypeVar

from leanloop.data.prompt import PromptFormat, collapse_whitespace
from leanloop.errors import LeanloopError
from leanloop.ml.generation import rank_tactics
from leanloop.ml.protocols import GeneratedTactic
from leanloop.serve.admission import Gate
from leanloop.serve.config import ModelConfig
from leanloop.serve.errors import ServeError, UpstreamFailure, UpstreamTimeout
from leanloop.serve.keys import Secrets

T = TypeVar("T")

#: The key given to clients of endpoints that need none (``api_key_env`` left out).
NO_KEY = "unused"


class Backend:
    """A configured model: ``await load()`` makes it ready (once; again after a failure), then
    the kind-specific calls run, then ``await close()``."""

    def __init__(self, config: ModelConfig, gate: Gate) -> None:
        self.config = config
        self.gate = gate
        self.loaded = False

    async def load(self) -> None:
        self.loaded = True

    async def close(self) -> None:
        """Release the model or the client."""


class GeneratorBackend(Backend):
    async def generate(self, state: str, prefix: str, k: int) -> list[GeneratedTactic]:
        """Up to ``k`` distinct tactics for ``state`` that begin with ``prefix``, best first;
        a score is the log-probability of the tactic (or the log of its share of the samples
        when the provider gives no probabilities)."""
        raise NotImplementedError


class EncoderBackend(Backend):
    async def encode(self, text: str) -> list[float]:
        """The embedding of ``text`` (a goal state)."""
        raise NotImplementedError


class RemoteGenerator(GeneratorBackend):
    """A generator behind a provider's official client: the client is made on ``load`` (with
    the key, endpoint, timeout and retries of the configuration) and each call waits for a turn
    at the model's gate."""

    provider = ""

    def __init__(self, config: ModelConfig, gate: Gate, secrets: Secrets) -> None:
        super().__init__(config, gate)
        self.secrets = secrets
        self.prompt_format = config.prompt_format or PromptFormat()
        self.client: Any = None

    async def load(self) -> None:
        key = NO_KEY
        if self.config.api_key_env:
            key = self.secrets.key(
                self.config.api_key_env, f"the key of model '{self.config.name}'"
            )
        self.client = self.make_client(key)
        self.loaded = True

    def make_client(self, key: str) -> Any:
        raise NotImplementedError

    async def sample(
        self, messages: list[dict[str, str]], n: int
    ) -> list[tuple[str, float | None]]:
        """``n`` replies to the chat, each with its log-probability when the provider gives
        one."""
        raise NotImplementedError

    async def generate(self, state: str, prefix: str, k: int) -> list[GeneratedTactic]:
        async with self.gate.slot():
            replies = await self.call(self.sample(self.messages(state, prefix), k))
        return rank_samples(replies, self.prompt_format, prefix, k)

    def messages(self, state: str, prefix: str) -> list[dict[str, str]]:
        messages = self.prompt_format.prompt(state)
        if prefix:
            messages[-1] = {
                "role": "user",
                "content": f"{messages[-1]['content']}\n\nThe tactic must begin with: {prefix}",
            }
        return messages

    @property
    def label(self) -> str:
        return f"model '{self.config.name}' ({self.provider})"

    def malformed(self, problem: str) -> UpstreamFailure:
        """The failure for an answer that does not have the provider's shape."""
        return UpstreamFailure(f"{self.label} failed: the answer {problem}")

    async def call(self, work: Awaitable[T]) -> T:
        """``work`` (one provider request with the client's own retries), as 504 when it runs
        out of time and 502 when it fails; the messages name the model, never a key."""
        name = self.label
        # the client's own timeout applies per attempt; this bounds the attempts together
        budget = self.config.timeout * (self.config.retries + 1) + 10.0 * self.config.retries
        try:
            return await asyncio.wait_for(work, budget)
        except ServeError:
            raise
        except Exception as exc:
            if is_timeout(exc):
                raise UpstreamTimeout(
                    f"{name} did not answer within {self.config.timeout:g} s"
                ) from None
            detail = self.secrets.redact(describe_failure(exc))
            raise UpstreamFailure(f"{name} failed: {detail}") from None

    async def close(self) -> None:
        if self.client is not None:
            await _close(self.client)
            self.client = None
        self.loaded = False


async def _close(client: Any) -> None:
    close = getattr(client, "close", None) or getattr(client, "aclose", None)
    if close is not None:
        result = close()
        if asyncio.iscoroutine(result):
            await result


def rank_samples(
    replies: Sequence[tuple[str, float | None]], prompt_format: PromptFormat, prefix: str, k: int
) -> list[GeneratedTactic]:
    """The distinct tactics in ``replies`` that begin with ``prefix``, best first, at most ``k``:
    scored by their best log-probability when every reply has one, else by the log of their
    share of the replies; tactics with equal shares come in the order of their text, so the
    same samples give the same answer whatever order the calls returned in."""
    kept = []
    for text, logprob in replies:
        tactic = prompt_format.parse(text)
        if tactic is not None and tactic.startswith(prefix):
            kept.append((text, tactic, logprob))
    if all(logprob is not None for _, _, logprob in kept):
        return rank_tactics(
            [(text, lp) for text, _, lp in kept if lp is not None], prompt_format, k
        )
    counts = Counter(collapse_whitespace(tactic) for _, tactic, _ in kept)
    shares = [
        (text, math.log(counts[collapse_whitespace(tactic)] / len(replies)))
        for text, tactic, _ in sorted(kept, key=lambda item: collapse_whitespace(item[1]))
    ]
    return rank_tactics(shares, prompt_format, k)


def is_timeout(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) is a timeout of any HTTP stack the clients use."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, TimeoutError) or "Timeout" in type(current).__name__:
            return True
        current = current.__cause__ or current.__context__
    return False


def describe_failure(exc: BaseException) -> str:
    """One short line about a client's failure: the HTTP status and the provider's message when
    there was an answer, else what went wrong."""
    status = getattr(exc, "status_code", None) or getattr(exc, "code", None)
    message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    if isinstance(exc, LeanloopError):
        message = exc.message
    line = str(message).strip().splitlines()[0] if str(message).strip() else type(exc).__name__
    if len(line) > 200:
        line = line[:200] + "..."
    if isinstance(status, int):
        return f"HTTP {status}: {line}"
    return f"{type(exc).__name__}: {line}"
