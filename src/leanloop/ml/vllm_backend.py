"""vLLM in this process as the engine behind leanloop's generator protocol: ``VLLMGenerator``
answers what ``TacticGenerator`` answers (tactics for proof states, raw replies with their
log-probabilities and token counts) from a ``vllm.LLM``, for proof search, whole-proof sampling
and evaluation; ``open_generator`` picks the engine by name (``DecodingOptions.backend``).

vLLM is an optional extra (``pip install 'leanloop[vllm]'``, on a machine with a GPU it
supports); asking for it without the package is a one-line error naming the extra. The prompt
format, the end tokens, the ranking of tactics and the seeds are the transformers generator's:
replies are read and ranked the same way, whichever engine wrote them. A reply's score is vLLM's
cumulative log-probability of its tokens (the model's, before temperature and top-p); beam search
is vLLM's own (``LLM.beam_search``) at length penalty 0, ranking by total log-probability.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from leanloop.data.prompt import PromptFormat
from leanloop.errors import LeanloopError
from leanloop.ml.generation import DecodingOptions, TacticGenerator, with_overrides
from leanloop.ml.loading import installed

#: The extra that installs vLLM.
VLLM_EXTRA = "pip install 'leanloop[vllm]'"
#: The engines a generator can run on.
BACKENDS = ("transformers", "vllm")


def require_vllm(where: str = "backend 'vllm'") -> None:
    """Refuse, in one line, a vLLM backend where the package is not installed.

    Args:
        where: What asked for vLLM, for the message.

    Raises:
        LeanloopError: vLLM is not installed.
    """
    if not installed("vllm"):
        raise LeanloopError(
            f"{where} needs vLLM, which is not installed (the 'vllm' extra)",
            hint=f"{VLLM_EXTRA} on a machine with a GPU vLLM supports, or use the "
            "'transformers' backend",
        )


def open_generator(
    model_name_or_path: str | os.PathLike,
    *,
    prompt_format: PromptFormat | None = None,
    device: str | None = None,
    engine_args: dict[str, Any] | None = None,
    **option_overrides: Any,
) -> TacticGenerator:
    """The generator of a model on the engine ``option_overrides["backend"]`` names
    (``transformers``, the default, or ``vllm``).

    Args:
        model_name_or_path: A model name, checkpoint, trainer output or adapter directory.
        prompt_format: How states become prompts (default: the checkpoint's recorded one).
        device: Where a transformers model runs (vLLM places its own).
        engine_args: Keyword arguments of ``vllm.LLM`` (e.g. ``gpu_memory_utilization``).
        **option_overrides: Fields of ``DecodingOptions``.

    Returns:
        A ``TacticGenerator`` or a ``VLLMGenerator``.

    Raises:
        LeanloopError: An unknown backend, or ``vllm`` without vLLM installed.
    """
    backend = option_overrides.get("backend", "transformers")
    if backend not in BACKENDS:
        raise LeanloopError(
            f"unknown generation backend {backend!r}", hint=f"use one of {', '.join(BACKENDS)}"
        )
    if backend == "vllm":
        return VLLMGenerator(
            model_name_or_path,
            prompt_format=prompt_format,
            engine_args=engine_args,
            **option_overrides,
        )
    return TacticGenerator(
        model_name_or_path, prompt_format=prompt_format, device=device, **option_overrides
    )


class VLLMGenerator(TacticGenerator):
    """A ``TacticGenerator`` whose replies come from a ``vllm.LLM`` in this process.

    Args:
        model_name_or_path: A model name (a hub name or a packaged model), a checkpoint
            directory, a trainer's output directory or a LoRA adapter directory (served on
            its base model through vLLM's LoRA support).
        prompt_format: How states become prompts (default: the checkpoint's recorded format,
            else the default one).
        options: How candidates are produced (default ``DecodingOptions()``).
        engine_args: Keyword arguments of ``vllm.LLM`` (``gpu_memory_utilization``,
            ``max_model_len``, ``tensor_parallel_size``...).
        llm: A ``vllm.LLM`` already made (its model is the one named).
        **option_overrides: Fields of ``DecodingOptions`` that replace those of ``options``.

    Raises:
        LeanloopError: vLLM is not installed, or the model cannot be found.
    """

    def __init__(
        self,
        model_name_or_path: str | os.PathLike,
        *,
        prompt_format: PromptFormat | None = None,
        options: DecodingOptions | None = None,
        engine_args: dict[str, Any] | None = None,
        llm: Any = None,
        **option_overrides: Any,
    ) -> None:
        require_vllm()
        from leanloop.ml.causal import adapter_base
        from leanloop.ml.generation import recorded_prompt_format
        from leanloop.ml.models import resolve_model

        source = resolve_model(os.fspath(model_name_or_path))
        base = adapter_base(source) if Path(source).is_dir() else None
        self.source = source
        self.adapter = base is not None
        self._lora: Any = None
        if llm is None:
            import vllm

            args = dict(engine_args or {})
            if base is not None:
                args.setdefault("enable_lora", True)
            llm = vllm.LLM(model=resolve_model(base) if base else source, **args)
        if base is not None:
            from vllm.lora.request import LoRARequest

            self._lora = LoRARequest("leanloop-adapter", 1, source)
        if prompt_format is None and Path(source).is_dir():
            prompt_format = recorded_prompt_format(source)
        self.llm = llm
        self.model = None  # the weights live in vLLM's engine
        self.tokenizer = llm.get_tokenizer()
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.device = "vllm"
        self.prompt_format = prompt_format or PromptFormat()
        self.options = with_overrides(options or DecodingOptions(), option_overrides)
        self.end_ids = _end_ids(self.tokenizer)
        self.encoder_decoder = False

    def with_prompt_format(self, prompt_format: PromptFormat, **overrides: Any) -> VLLMGenerator:
        """A generator on the same engine with another prompt format (e.g. whole proofs).

        Args:
            prompt_format: The prompt format.
            **overrides: Fields of ``DecodingOptions`` for it.

        Returns:
            The generator.
        """
        other = type(self).__new__(type(self))
        other.__dict__.update(self.__dict__)
        other.prompt_format = prompt_format
        other.options = with_overrides(self.options, overrides)
        return other

    def generate_counted(
        self, prompts: Sequence[str], k: int = 8, *, streamer: Any = None, **overrides: Any
    ) -> list[list[tuple[str, float, int]]]:
        """``TacticGenerator.generate_counted`` on vLLM (``streamer`` is not supported)."""
        if k < 1:
            raise LeanloopError(f"k={k}: ask for at least one tactic")
        if streamer is not None:
            raise LeanloopError("the vLLM backend does not stream tokens to a streamer")
        options = with_overrides(self.options, overrides)
        requests = [{"prompt_token_ids": self._prompt_ids(p, options)} for p in prompts]
        if options.method == "beam" and max(k, options.num_beams or k) > 1:
            return self._beam(requests, max(k, options.num_beams or k), options)
        return self._sample(requests, prompts, k, options)

    def _prompt_ids(self, prompt: str, options: DecodingOptions) -> list[int]:
        ids = list(self.tokenizer(prompt, add_special_tokens=False)["input_ids"])
        if options.max_prompt_tokens is not None:
            ids = ids[-options.max_prompt_tokens :]
        return ids

    def _sample(self, requests, prompts, k: int, options: DecodingOptions):
        from vllm import SamplingParams

        sample = options.method == "sample"  # else greedy decoding (or a single beam)
        params = [
            SamplingParams(
                n=max(k, options.num_samples or k) if sample else 1,
                temperature=options.temperature if sample else 0.0,
                top_p=options.top_p if sample else 1.0,
                max_tokens=options.max_new_tokens,
                stop_token_ids=list(self.end_ids),
                logprobs=0,  # the chosen token's log-probability only
                seed=_stream(options.seed, prompt),
                skip_special_tokens=True,
            )
            for prompt in prompts
        ]
        outputs = self.llm.generate(requests, params, use_tqdm=False, **self._request_extra())
        return [
            [self._reply(o.token_ids, o.cumulative_logprob) for o in output.outputs]
            for output in outputs
        ]

    def _beam(self, requests, beams: int, options: DecodingOptions):
        from vllm.sampling_params import BeamSearchParams

        params = BeamSearchParams(
            beam_width=beams, max_tokens=options.max_new_tokens, length_penalty=0.0
        )
        outputs = self.llm.beam_search(requests, params, use_tqdm=False, **self._request_extra())
        answers = []
        for request, output in zip(requests, outputs, strict=True):
            start = len(request["prompt_token_ids"])  # a beam's tokens begin with its prompt
            ranked = sorted(output.sequences, key=lambda s: -s.cum_logprob)
            answers.append([self._reply(s.tokens[start:], s.cum_logprob) for s in ranked])
        return answers

    def _request_extra(self) -> dict[str, Any]:
        return {"lora_request": self._lora} if self._lora is not None else {}

    def _reply(self, token_ids: Sequence[int], score: float | None) -> tuple[str, float, int]:
        """(text up to its end token, score, tokens up to and including the end token)."""
        ids = list(token_ids)
        ends = [i for i, token in enumerate(ids) if token in self.end_ids]
        length = ends[0] + 1 if ends else len(ids)
        text = self.tokenizer.decode(ids[:length], skip_special_tokens=True)
        return text, float(score if score is not None else 0.0), length


def _end_ids(tokenizer) -> list[int]:
    """The tokens that end a reply, as the transformers generator counts them."""
    from leanloop.ml.causal import end_token_ids

    return end_token_ids(None, tokenizer)


def _stream(seed: int | None, prompt: str) -> int | None:
    """The seed of one request: ``seed`` mixed with its prompt (as the transformers generator
    seeds each batch), so that each prompt and each attempt draws its own reproducible stream."""
    if seed is None:
        return None
    digest = hashlib.blake2b(f"{seed}\0{prompt}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % 2**31
