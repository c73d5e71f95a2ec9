"""A stand-in for the part of vLLM's API leanloop uses (``vllm.LLM`` with ``get_tokenizer``,
``generate`` and ``beam_search``; ``SamplingParams``; ``vllm.sampling_params.BeamSearchParams``;
``vllm.lora.request.LoRARequest``; outputs with token ids and cumulative log-probabilities),
answering with a real transformers model: what a test checks is what leanloop does with vLLM's
answers, on a machine where vLLM cannot be installed. ``install(monkeypatch)`` puts it in
``sys.modules`` as ``vllm``."""

from __future__ import annotations

import importlib.machinery
import sys
import types
from dataclasses import dataclass, field
from typing import Any, ClassVar


@dataclass
class SamplingParams:
    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 16
    stop_token_ids: list[int] = field(default_factory=list)
    logprobs: int | None = None
    seed: int | None = None
    skip_special_tokens: bool = True


@dataclass
class BeamSearchParams:
    beam_width: int
    max_tokens: int
    length_penalty: float = 1.0


@dataclass
class LoRARequest:
    lora_name: str
    lora_int_id: int
    lora_path: str


@dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: list[int]
    cumulative_logprob: float | None


@dataclass
class RequestOutput:
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput]


@dataclass
class BeamSearchSequence:
    tokens: list[int]  # the prompt's, then the generated ones
    cum_logprob: float


@dataclass
class BeamSearchOutput:
    sequences: list[BeamSearchSequence]


class LLM:
    """Answers with the transformers model at ``model`` (every instance is recorded in
    ``LLM.made`` with its arguments, every call in ``calls``)."""

    made: ClassVar[list[LLM]] = []

    def __init__(self, model: str, **engine_args: Any) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.model_path, self.engine_args = model, engine_args
        self.model = AutoModelForCausalLM.from_pretrained(model)
        self.model.eval()
        self.tokenizer = AutoTokenizer.from_pretrained(model)
        self.calls: list[tuple[str, Any, dict]] = []
        LLM.made.append(self)

    def get_tokenizer(self):
        return self.tokenizer

    def _logprob(self, prompt: list[int], reply: list[int]) -> float:
        import torch

        with torch.no_grad():
            logits = self.model(torch.tensor([prompt + reply])).logits[0].float()
        logprobs = torch.log_softmax(logits, dim=-1)
        return sum(logprobs[len(prompt) + i - 1, t].item() for i, t in enumerate(reply))

    def generate(self, prompts, sampling_params, use_tqdm: bool = True, **extra):
        import torch

        params = sampling_params if isinstance(sampling_params, list) else [sampling_params]
        self.calls.append(("generate", params, extra))
        answers = []
        for request, p in zip(prompts, params, strict=True):
            ids = request["prompt_token_ids"]
            if p.seed is not None:
                torch.manual_seed(p.seed)
            sample = p.temperature > 0
            with torch.no_grad():
                out = self.model.generate(
                    torch.tensor([ids]),
                    do_sample=sample,
                    temperature=p.temperature if sample else None,
                    top_p=p.top_p if sample else None,
                    top_k=0 if sample else None,
                    num_return_sequences=p.n,
                    max_new_tokens=p.max_tokens,
                    eos_token_id=p.stop_token_ids,
                    pad_token_id=self.tokenizer.pad_token_id,
                )
            outputs = []
            for index, row in enumerate(out[:, len(ids) :].tolist()):
                stops = [i for i, t in enumerate(row) if t in p.stop_token_ids]
                reply = row[: stops[0] + 1] if stops else row
                score = self._logprob(ids, reply) if p.logprobs is not None else None
                text = self.tokenizer.decode(reply, skip_special_tokens=True)
                outputs.append(CompletionOutput(index, text, reply, score))
            answers.append(RequestOutput(ids, outputs))
        return answers

    def beam_search(self, prompts, params: BeamSearchParams, use_tqdm: bool = False, **extra):
        import torch

        self.calls.append(("beam_search", params, extra))
        answers = []
        for request in prompts:
            ids = request["prompt_token_ids"]
            with torch.no_grad():
                out = self.model.generate(
                    torch.tensor([ids]),
                    num_beams=params.beam_width,
                    num_return_sequences=params.beam_width,
                    max_new_tokens=params.max_tokens,
                    length_penalty=params.length_penalty,
                    early_stopping=True,
                    eos_token_id=self.tokenizer.eos_token_id,
                    pad_token_id=self.tokenizer.pad_token_id,
                    return_dict_in_generate=True,
                    output_scores=True,
                )
            sequences = [
                BeamSearchSequence(row, float(score))
                for row, score in zip(out.sequences.tolist(), out.sequences_scores, strict=True)
            ]
            answers.append(BeamSearchOutput(sorted(sequences, key=lambda s: s.cum_logprob)))
        return answers


def _module(name: str, **members: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__spec__ = importlib.machinery.ModuleSpec(name, None)
    module.__dict__.update(members)
    return module


def install(monkeypatch) -> type[LLM]:
    """Make ``import vllm`` give this stand-in for the rest of the test; returns its ``LLM``."""
    LLM.made = []
    modules = {
        "vllm": _module("vllm", LLM=LLM, SamplingParams=SamplingParams),
        "vllm.sampling_params": _module(
            "vllm.sampling_params", SamplingParams=SamplingParams, BeamSearchParams=BeamSearchParams
        ),
        "vllm.lora": _module("vllm.lora"),
        "vllm.lora.request": _module("vllm.lora.request", LoRARequest=LoRARequest),
    }
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    return LLM
