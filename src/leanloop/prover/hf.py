"""``HFProver``: proving with a causal language model checkpoint as the trainers write it (a full
model or a LoRA adapter, or a trainer's output directory), k tactics per state by beam search or
sampling, ranked by log-probability, in the prompt format it was trained with."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from leanloop.errors import LeanloopError
from leanloop.ml.loading import LoadOptions
from leanloop.ml.protocols import Generator
from leanloop.prover.base import BaseProver
from leanloop.prover.config import ProverConfig
from leanloop.prover.whole import WholeProofFormat


class HFProver(BaseProver):
    """A prover around ``TacticGenerator`` (see ``BaseProver`` for ``config``).

    ``ckpt_path`` is a checkpoint directory, a trainer's ``output_dir`` (its latest checkpoint),
    a LoRA adapter directory (loaded onto its base model) or a model name. ``use_lora=True``
    asserts it is an adapter. ``device="auto"`` picks the accelerator there is. ``decoding``
    holds ``DecodingOptions`` fields (``method``: ``beam`` by default, or ``sample`` with
    ``temperature``/``top_p``, seeded per attempt from ``config.seed``; ``max_new_tokens``, ...);
    ``config.num_attempts`` above 1 needs ``sample`` (beam search or greedy decoding would repeat
    one search: a ``LeanloopError`` says so). A LoRA adapter is merged into its base model once
    loaded (the prover only generates).
    ``decoding={"backend": "vllm"}`` generates with vLLM in this process (the ``vllm`` extra).
    The configuration's ``quantization``, ``attn_implementation``, ``device_map`` and ``dtype``
    say how the model is loaded (e.g. ``quantization: 4bit`` for a 7B model on one GPU).

    Args:
        ckpt_path: A checkpoint directory, a trainer's ``output_dir``, a LoRA adapter
            directory or a model name.
        use_lora: Assert that ``ckpt_path`` is a LoRA adapter.
        device: ``auto`` (the accelerator there is), ``cuda`` or ``cpu``.
        config: A ``ProverConfig``, a mapping of its fields or a YAML/JSON file.
        decoding: Fields of ``DecodingOptions``.

    Raises:
        LeanloopError: ``use_lora`` is set but ``ckpt_path`` holds no adapter, or
            ``ckpt_path`` cannot load (a path that is not there, a name the hub cannot give;
            a ``DataFormatError`` naming the field).
    """

    #: The constructor's argument naming the tactic generator (said when it cannot load).
    checkpoint_field = "ckpt_path"

    def __init__(
        self,
        ckpt_path: str | os.PathLike,
        use_lora: bool = False,
        device: str = "auto",
        *,
        config: ProverConfig | Mapping[str, Any] | str | os.PathLike | None = None,
        decoding: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(config)
        # several attempts need a decoding that differs between them (a one-line refusal)
        _check_attempts(self.config.num_attempts, dict(decoding or {}).get("method", "beam"))
        self.ckpt_path = os.fspath(ckpt_path)
        self.use_lora = use_lora
        self.device = device
        self.decoding = dict(decoding or {})
        _check_checkpoint(self.ckpt_path, use_lora, type(self).__name__, self.checkpoint_field)

    @property
    def name(self) -> str:
        return f"hf:{self.ckpt_path}"

    @property
    def version(self) -> str:
        from leanloop.ml.models import checkpoint_version

        return checkpoint_version(self.ckpt_path)

    def load_generator(self) -> Generator:
        from leanloop.ml.vllm_backend import open_generator

        device = None if self.device == "auto" else self.device
        options = LoadOptions.of(self.config)
        if options == LoadOptions() or self.decoding.get("backend") == "vllm":
            return open_generator(self.ckpt_path, device=device, **self.decoding)
        return self._load_with(options, device)

    def _load_with(self, options: LoadOptions, device: str | None) -> Generator:
        """The generator loaded with the configuration's loading options (quantization,
        attention kernel, device map, dtype)."""
        from leanloop.ml.causal import load_causal_lm, merged_for_inference
        from leanloop.ml.device import detect_hardware
        from leanloop.ml.generation import TacticGenerator, recorded_prompt_format

        hardware = detect_hardware(force_cpu=device == "cpu" or None)
        options.check(hardware, where=type(self).__name__)
        loaded = load_causal_lm(
            self.ckpt_path,
            dtype=options.torch_dtype(hardware.torch_dtype),
            options=options,
            compute_dtype=hardware.torch_dtype,
        )
        recorded = recorded_prompt_format(loaded.source) if Path(loaded.source).is_dir() else None
        if options.device_map is not None or options.quantization is not None:
            device = str(next(loaded.model.parameters()).device)  # placed where it was loaded
        generator = TacticGenerator.from_model(
            merged_for_inference(loaded.model),
            loaded.tokenizer,
            prompt_format=recorded,
            device=device or hardware.device,
            **self.decoding,
        )
        generator.source = loaded.source
        return generator

    def load_whole_proof_generator(self) -> Generator:
        from leanloop.ml.generation import TacticGenerator

        tactics = cast(TacticGenerator, self.generator)  # what load_generator made
        whole = dict(self.decoding)
        whole.setdefault("max_new_tokens", max(4 * tactics.options.max_new_tokens, 256))
        return tactics.with_prompt_format(WholeProofFormat(), **whole)

    def generator_options(self, attempt: int) -> dict[str, Any]:
        if self.decoding.get("method") == "sample":
            return {"seed": self.config.seed + attempt}
        return {}


def _check_checkpoint(ckpt_path: str, use_lora: bool, source: str, field: str) -> None:
    """A clear error now, not when the model loads in a worker, for a checkpoint that cannot
    load (a missing directory, a name the hub cannot give: ``ml.models.model_problem``) or a
    directory that is not the adapter ``use_lora`` asks for."""
    from leanloop.ml.causal import ADAPTER_CONFIG
    from leanloop.ml.models import latest_checkpoint, require_model

    path = Path(ckpt_path).expanduser()
    if not path.exists():
        require_model(ckpt_path, source, field)
        if use_lora:
            raise LeanloopError(f"use_lora=True needs a LoRA adapter directory, not {ckpt_path}")
        return
    directory = latest_checkpoint(path) or path
    if use_lora and not (directory / ADAPTER_CONFIG).is_file():
        raise LeanloopError(
            f"checkpoint {directory} holds no LoRA adapter ({ADAPTER_CONFIG} is missing)",
            hint="use_lora=False loads a full model",
        )


def _check_attempts(num_attempts: int, method: str) -> None:
    """Several attempts need a decoding that differs between them: beam search and greedy
    decoding would repeat one identical search."""
    if num_attempts > 1 and method != "sample":
        raise LeanloopError(
            f"num_attempts={num_attempts} with decoding method '{method}' repeats one identical "
            "search (beam search and greedy decoding draw nothing at random)",
            hint="use decoding method 'sample' (each attempt its own seed) or num_attempts=1",
        )
