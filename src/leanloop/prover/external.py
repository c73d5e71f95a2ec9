"""``ExternalProver``: proving with a model behind any OpenAI-compatible chat-completions endpoint
(OpenAI, vLLM, leanloop's own server), through the official ``openai`` client: ``n`` replies per
state, ranked by their log-probability when the endpoint gives it (else in the order given),
with a timeout and bounded retries; the failed tactics of a state are shown on a retry."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

from leanloop.data.prompt import PromptFormat
from leanloop.errors import LeanloopError
from leanloop.ml.protocols import GeneratedTactic, Generator
from leanloop.prover.base import BaseProver
from leanloop.prover.config import ProverConfig
from leanloop.prover.proof_search import excerpt
from leanloop.prover.strategy import Failure
from leanloop.prover.whole import WholeProofFormat
from leanloop.settings import Settings


class ChatGenerator:
    """A ``Generator`` asking a chat-completions endpoint for ``k`` replies per state (one
    request per state, ``n=k``); accepts ``feedback`` (the tactics that failed on each state
    and Lean's errors), which goes into the request."""

    accepts_feedback = True

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None,
        api_key_env: str | None,
        timeout: float,
        max_retries: int,
        temperature: float,
        max_tokens: int,
        logprobs: bool,
        prompt_format: PromptFormat,
    ) -> None:
        self.model = model
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.logprobs = logprobs
        self.prompt_format = prompt_format
        self.client = openai_client(
            api_key_from(api_key_env), base_url, timeout=timeout, max_retries=max_retries
        )

    def generate_batch(
        self,
        states: Sequence[str],
        k: int,
        *,
        feedback: Sequence[Sequence[Failure]] | None = None,
        seed: int | None = None,
        **_: Any,
    ) -> list[list[GeneratedTactic]]:
        from leanloop.ml.generation import rank_tactics

        results = []
        for index, state in enumerate(states):
            messages = self.prompt_format.prompt(state)
            failures = feedback[index] if feedback else ()
            if failures:
                messages[-1]["content"] += _feedback_text(failures)
            results.append(rank_tactics(self._replies(messages, k, seed), self.prompt_format, k))
        return results

    def _replies(self, messages: list[dict[str, str]], n: int, seed: int | None):
        request: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "n": n,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }
        if self.logprobs:
            request["logprobs"] = True
        if seed is not None:
            request["seed"] = seed
        try:
            response = self.client.chat.completions.create(**request)
        except ValueError as exc:  # a body that is not JSON
            raise LeanloopError(
                f"the model endpoint's answer is not a chat completion ({exc})"
            ) from None
        choices = getattr(response, "choices", None)
        if not isinstance(choices, list):
            raise LeanloopError(
                f"the model endpoint's answer has no list of choices: {excerpt(response)}"
            )
        replies = []
        for rank, choice in enumerate(choices):
            content = getattr(getattr(choice, "message", None), "content", None)
            if not isinstance(content, str):
                continue
            score = _logprob(choice)
            replies.append((content, -float(rank) if score is None else score))
        return replies


def _logprob(choice: Any) -> float | None:
    """The sum of the reply's token log-probabilities, if the endpoint gave them."""
    tokens = getattr(getattr(choice, "logprobs", None), "content", None)
    if not tokens:
        return None
    try:
        total = sum(float(token.logprob) for token in tokens)
    except (AttributeError, TypeError, ValueError):
        return None
    return total if math.isfinite(total) else None


def _feedback_text(failures: Sequence[Failure]) -> str:
    lines = [f"- {f.tactic.strip()}\n  Lean: {f.error.strip().splitlines()[0]}" for f in failures]
    return "\n\nThese tactics failed on this state:\n" + "\n".join(lines)


#: Hugging Face's OpenAI-compatible router (Inference Providers): LeanDojo-v2's default
#: endpoint. Its models are hub names, optionally with a provider
#: (``deepseek-ai/DeepSeek-Prover-V2-671B:novita``); its key is ``HF_TOKEN``.
HF_ROUTER_URL = "https://router.huggingface.co/v1"
HF_TOKEN_ENV = "HF_TOKEN"
#: ``api_key_env``'s default: ``HF_TOKEN`` for Hugging Face's router, else ``OPENAI_API_KEY``.
AUTO_KEY = "auto"


def resolve_endpoint(
    model_name: str, base_url: str | None, api_key_env: str | None
) -> tuple[str | None, str | None]:
    """The endpoint and the key's variable of a model: without ``base_url``, a hub name
    (``owner/model``, as LeanDojo-v2 names models) is asked at Hugging Face's router and any
    other name at OpenAI's endpoint (None); ``api_key_env="auto"`` is ``HF_TOKEN`` for the
    router and ``OPENAI_API_KEY`` otherwise.

    Args:
        model_name: The model's name at the endpoint.
        base_url: The endpoint given (None: chosen from the name).
        api_key_env: The key's variable given (``auto``: chosen from the endpoint).

    Returns:
        The endpoint (None: OpenAI's) and the key's variable (None: send none).
    """
    if base_url is None and "/" in model_name:
        base_url = HF_ROUTER_URL
    if api_key_env == AUTO_KEY:
        router = base_url is not None and base_url.rstrip("/") == HF_ROUTER_URL
        api_key_env = HF_TOKEN_ENV if router else "OPENAI_API_KEY"
    return base_url, api_key_env


#: The key given to clients of endpoints that need none (no key variable).
NO_KEY = "unused"


def openai_client(
    key: str | None,
    base_url: str | None,
    *,
    timeout: float,
    max_retries: int,
    asynchronous: bool = False,
) -> Any:
    """The one set-up of the official ``openai`` client for an OpenAI-compatible endpoint,
    which the prover (``ExternalProver``), the sampler (``EndpointSampler``) and the model
    server's OpenAI provider share: the key (``NO_KEY`` for an endpoint that needs none), the
    endpoint, a timeout per request and bounded retries.

    Args:
        key: The API key (None: the endpoint needs none).
        base_url: The endpoint (``.../v1``; None: OpenAI's).
        timeout: Seconds a request may take.
        max_retries: Retries of a failed request (the client's own back-off).
        asynchronous: An ``AsyncOpenAI`` (the server) instead of an ``OpenAI`` client.

    Returns:
        The client.
    """
    import openai

    kind = openai.AsyncOpenAI if asynchronous else openai.OpenAI
    return kind(api_key=key or NO_KEY, base_url=base_url, timeout=timeout, max_retries=max_retries)


def api_key_from(variable: str | None) -> str | None:
    """The API key in ``$variable`` (never shown; ``HF_TOKEN`` is ``Settings.hf_token``); a
    clear error when it is not set."""
    if variable is None:
        return None
    if variable == HF_TOKEN_ENV:
        key = Settings.from_env().hf_token
    else:
        key = Settings.variable(variable)
    if key is None:
        raise LeanloopError(
            f"ExternalProver: the API key variable ${variable} is not set",
            hint=f"export {variable}=..., or pass api_key_env=None for an endpoint that needs "
            "no key (a local server)",
        )
    return key


class ExternalProver(BaseProver):
    """A prover whose model is behind an OpenAI-compatible chat-completions endpoint.

    ``base_url`` is the endpoint (None: Hugging Face's router for a hub name such as
    ``deepseek-ai/DeepSeek-Prover-V2-671B:novita``, LeanDojo-v2's default, else OpenAI's); the
    API key is read from the environment variable ``api_key_env`` (``auto``: ``HF_TOKEN`` for
    Hugging Face's router, else ``OPENAI_API_KEY``; None: send none, for a local server) when
    the prover is built and again where it is used, never stored. Each request waits
    ``timeout`` seconds at most and is retried ``max_retries`` times on a connection error, a
    timeout or a 5xx answer. Replies are read with the shared prompt format; ``logprobs`` asks
    for log-probabilities to rank them.

    Args:
        model_name: The model's name at the endpoint.
        base_url: The endpoint (e.g. ``http://localhost:8000/v1`` for ``vllm serve``); None
            for Hugging Face's router (a hub name) or OpenAI's (any other name).
        api_key_env: The environment variable holding the API key (``auto``: ``HF_TOKEN`` for
            Hugging Face's router, else ``OPENAI_API_KEY``); None sends none.
        timeout: Seconds a request may take.
        max_retries: Retries of a request after a connection error, a timeout or a 5xx
            answer.
        temperature: The sampling temperature.
        max_tokens: Tokens a reply may have (four times as many for a whole proof).
        logprobs: Ask for log-probabilities to rank the replies.
        config: A ``ProverConfig``, a mapping of its fields or a YAML/JSON file.
        prompt_format: How states become prompts and replies tactics (default: the default
            format).

    Raises:
        LeanloopError: ``timeout`` is not positive, ``max_retries`` is negative, or the
            variable ``api_key_env`` is not set.
    """

    def __init__(
        self,
        model_name: str = "gpt-4o-mini",
        base_url: str | None = None,
        api_key_env: str | None = AUTO_KEY,
        *,
        timeout: float = 60.0,
        max_retries: int = 2,
        temperature: float = 0.7,
        max_tokens: int = 256,
        logprobs: bool = True,
        config: ProverConfig | Mapping[str, Any] | str | os.PathLike | None = None,
        prompt_format: PromptFormat | None = None,
    ) -> None:
        super().__init__(config)
        if timeout <= 0 or max_retries < 0:
            raise LeanloopError(
                f"ExternalProver: timeout={timeout}, max_retries={max_retries}: the timeout must "
                "be positive and the retries at least 0"
            )
        base_url, api_key_env = resolve_endpoint(model_name, base_url, api_key_env)
        api_key_from(api_key_env)  # a missing key is an error now, not in a worker
        self.model_name = model_name
        self.base_url = base_url
        self.api_key_env = api_key_env
        self.timeout = timeout
        self.max_retries = max_retries
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.logprobs = logprobs
        self.prompt_format = prompt_format or PromptFormat()

    @property
    def name(self) -> str:
        return f"external:{self.model_name}"

    def _chat(self, prompt_format: PromptFormat, max_tokens: int) -> ChatGenerator:
        return ChatGenerator(
            self.model_name,
            base_url=self.base_url,
            api_key_env=self.api_key_env,
            timeout=self.timeout,
            max_retries=self.max_retries,
            temperature=self.temperature,
            max_tokens=max_tokens,
            logprobs=self.logprobs,
            prompt_format=prompt_format,
        )

    def load_generator(self) -> Generator:
        return self._chat(self.prompt_format, self.max_tokens)

    def load_whole_proof_generator(self) -> Generator:
        return self._chat(WholeProofFormat(), 4 * self.max_tokens)

    def generator_options(self, attempt: int) -> dict[str, Any]:
        return {"seed": self.config.seed + attempt}
