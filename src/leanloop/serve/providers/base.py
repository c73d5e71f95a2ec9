"""What every model backend offers the routes (load once, generate or encode, close; a
generator also answers OpenAI-style text requests, whole or streamed), and what the remote
providers share: the prompt for a goal state and tactic prefix, the ranking of sampled replies,
and the mapping of a client's failure to 504 (timeout) or 502 (anything else)."""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar

from leanloop.data.prompt import PromptFormat, collapse_whitespace
from leanloop.errors import LeanloopError
from leanloop.ml.generation import rank_tactics
from leanloop.ml.protocols import GeneratedTactic
from leanloop.serve.admission import Gate
from leanloop.serve.config import ModelConfig
from leanloop.serve.errors import BadRequest, ServeError, UpstreamFailure, UpstreamTimeout
from leanloop.serve.keys import Secrets

T = TypeVar("T")

#: The key given to clients of endpoints that need none (``api_key_env`` left out).
NO_KEY = "unused"


class TokenLogprob(NamedTuple):
    """A generated token with its log-probability and, when asked, the most likely tokens at
    its place with theirs."""

    token: str
    logprob: float
    top: list[tuple[str, float]]


class ChatReply(NamedTuple):
    """One reply: its text, log-probability (None when the provider gives none), length in
    tokens (None when unknown), each token with its log-probability when asked, and the
    provider's own finish reason when it gave one (``stop`` or ``length``)."""

    text: str
    logprob: float | None
    length: int | None
    tokens: list[TokenLogprob] | None
    finish: str | None = None


@dataclass(frozen=True)
class TextCall:
    """One OpenAI-style request to a generator: a chat (``messages``) or a text to continue
    (``prompt``), and how to decode (None: the model's default)."""

    messages: list[dict[str, str]] | None = None
    prompt: str | None = None
    n: int = 1
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    stop: list[str] = field(default_factory=list)
    seed: int | None = None
    #: None: no log-probabilities; 0: each token's; k: also the k most likely at its place
    logprobs: int | None = None


@dataclass
class TextAnswer:
    """The ``n`` replies to a ``TextCall`` and the tokens counted (None: not known)."""

    replies: list[ChatReply]
    prompt_tokens: int | None = None
    completion_tokens: int | None = None

    def generated_tokens(self) -> int | None:
        """The tokens of every reply together (the provider's count when it gave one)."""
        if self.completion_tokens is not None:
            return self.completion_tokens
        lengths = [reply.length for reply in self.replies]
        if any(length is None for length in lengths):
            return None
        return sum(length for length in lengths if length is not None)


class Piece(NamedTuple):
    """Text a streamed reply gained: the reply's number and the new text."""

    reply: int
    text: str


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

    async def complete(self, call: TextCall) -> TextAnswer:
        """The replies to an OpenAI-style request, whole."""
        raise BadRequest(
            f"model '{self.config.name}' (provider {self.config.provider}) does not answer "
            "OpenAI requests"
        )

    async def stream(self, call: TextCall) -> AsyncIterator[Piece | TextAnswer]:
        """The replies to an OpenAI-style request as they are generated: ``Piece``s, then the
        whole ``TextAnswer`` last. By default the answer is made first and sent in one piece
        per reply."""
        answer = await self.complete(call)
        for index, reply in enumerate(answer.replies):
            yield Piece(index, reply.text)
        yield answer


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

    async def complete(self, call: TextCall) -> TextAnswer:
        async with self.gate.slot():
            return await self.call(self.answer(call))

    async def stream(self, call: TextCall) -> AsyncIterator[Piece | TextAnswer]:
        async with self.gate.slot():
            async for item in self.guard(self.answer_stream(call)):
                yield item

    async def answer(self, call: TextCall) -> TextAnswer:
        """The provider's replies to an OpenAI-style request (one upstream request, or one
        per sample where the provider gives one reply per call)."""
        raise BadRequest(f"{self.label} does not answer this request")

    def answer_stream(self, call: TextCall) -> AsyncIterator[Piece | TextAnswer]:
        """The provider's replies as it streams them (``Piece``s, then the ``TextAnswer``)."""
        raise BadRequest(f"{self.label} does not answer this request")

    def chat_only(self, call: TextCall) -> list[dict[str, str]]:
        """The messages of a chat request; a text to continue is refused (the provider has
        no text completions)."""
        if call.messages is None:
            raise BadRequest(
                f"{self.label} has no text completions",
                hint="ask /v1/chat/completions instead",
            )
        return call.messages

    def token_limit(self, call: TextCall) -> int:
        """The tokens a reply may have: what the request asks, at most ``max_tokens``."""
        return min(call.max_tokens or self.config.max_tokens, self.config.max_tokens)

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
        # the client's own timeout applies per attempt; this bounds the attempts together
        budget = self.config.timeout * (self.config.retries + 1) + 10.0 * self.config.retries
        try:
            return await asyncio.wait_for(work, budget)
        except ServeError:
            raise
        except Exception as exc:
            raise self.failure(exc) from None

    async def guard(self, stream: AsyncIterator[T]) -> AsyncIterator[T]:
        """``stream`` (a provider's streamed answer), its failures as 504 or 502 like
        ``call``'s (the client's timeout applies to each read)."""
        try:
            async for item in stream:
                yield item
        except ServeError:
            raise
        except Exception as exc:
            raise self.failure(exc) from None

    def failure(self, exc: Exception) -> ServeError:
        """A client's failure as 504 (it ran out of time) or 502; the message names the model,
        never a key."""
        if is_timeout(exc):
            return UpstreamTimeout(f"{self.label} did not answer within {self.config.timeout:g} s")
        detail = self.secrets.redact(describe_failure(exc))
        return UpstreamFailure(f"{self.label} failed: {detail}")

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


async def merge_streams(streams: Sequence[AsyncIterator[T]]) -> AsyncGenerator[tuple[int, T]]:
    """The items of several streams as they come, each with its stream's index; the first
    failure ends the merged stream (and the other streams)."""
    queue: asyncio.Queue[tuple[int, Any]] = asyncio.Queue()
    done = object()

    async def pump(index: int, stream: AsyncIterator[T]) -> None:
        try:
            async for item in stream:
                await queue.put((index, item))
        except Exception as exc:
            await queue.put((index, exc))
        finally:
            await queue.put((index, done))

    tasks = [asyncio.create_task(pump(i, stream)) for i, stream in enumerate(streams)]
    remaining = len(tasks)
    try:
        while remaining:
            index, item = await queue.get()
            if item is done:
                remaining -= 1
            elif isinstance(item, Exception):
                raise item
            else:
                yield index, item
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
