"""Load a causal language model and its tokenizer for tactic generation from a packaged name, a
hub name, a checkpoint directory or a LoRA adapter directory, with errors a user can act on."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from leanloop.errors import LeanloopError
from leanloop.ml.loading import LoadOptions, is_quantized
from leanloop.ml.models import END_OF_TURN, fallback_chat_template, resolve_model
from leanloop.ml.pretrained import load_pretrained

log = logging.getLogger(__name__)

#: The file PEFT writes into a saved adapter directory.
ADAPTER_CONFIG = "adapter_config.json"


@dataclass
class CausalLM:
    """A loaded model with its tokenizer, and where it came from."""

    model: Any
    tokenizer: Any
    source: str  # what was resolved: a directory or a hub name
    base_model: str  # the full model underneath (the source itself unless it is an adapter)
    adapter: bool  # whether ``model`` is a PEFT model with a LoRA adapter


def adapter_base(directory: str | os.PathLike) -> str | None:
    """The base model named by a saved LoRA adapter directory (None if it is not one)."""
    config = Path(directory) / ADAPTER_CONFIG
    if not config.is_file():
        return None
    try:
        base = json.loads(config.read_text()).get("base_model_name_or_path")
    except (OSError, ValueError) as exc:
        raise LeanloopError(f"{config}: cannot read the adapter configuration: {exc}") from exc
    if not base:
        raise LeanloopError(
            f"{config}: field 'base_model_name_or_path' is missing",
            hint="write the base model's name or path into it",
        )
    return str(base)


def load_tokenizer(name_or_path: str | os.PathLike, *, cache_dir: Path | None = None):
    """The tokenizer of a model, ready for chat prompts: a pad token and a chat template.

    A tokenizer without a template gets ChatML whose turns end with a token it has (see
    ``leanloop.ml.models.fallback_chat_template``); a saved checkpoint keeps the template it was
    trained with.
    """
    from transformers import AutoTokenizer

    tokenizer = load_pretrained(AutoTokenizer, name_or_path, cache_dir=cache_dir)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if not getattr(tokenizer, "chat_template", None):
        log.warning("%s has no chat template; using ChatML", name_or_path)
        tokenizer.chat_template = fallback_chat_template(tokenizer)
    return tokenizer


def load_causal_lm(
    name_or_path: str | os.PathLike,
    *,
    dtype=None,
    trainable: bool = False,
    cache_dir: Path | None = None,
    options: LoadOptions | None = None,
    compute_dtype=None,
    gradient_checkpointing: bool = False,
) -> CausalLM:
    """Load a model for generation or further training.

    ``name_or_path`` goes through :func:`resolve_model`. A directory holding a LoRA adapter
    (``adapter_config.json``) loads its base model (resolved the same way) with the adapter on
    top; ``trainable`` keeps the adapter weights trainable (PEFT keeps them in float32 over a
    16-bit base). ``dtype`` (default float32) is the dtype of the weights; ``options`` adds
    quantization, the attention kernel and the device map (see ``LoadOptions``; its own
    ``dtype`` is the caller's to apply). A quantized model loaded ``trainable`` is prepared for
    k-bit training (``peft.prepare_model_for_kbit_training``) before an adapter goes on top.

    Args:
        name_or_path: A model name, checkpoint, trainer output or adapter directory.
        dtype: The dtype of the weights (a ``torch.dtype`` or ``"auto"``).
        trainable: Whether the model (or its adapter) is going to be trained.
        cache_dir: Where packaged models are converted.
        options: Quantization, attention kernel and device map.
        compute_dtype: The dtype quantized layers compute in (default: ``dtype``).
        gradient_checkpointing: Whether training recomputes activations (a quantized model
            is prepared for it).

    Returns:
        The model, its tokenizer and where they came from.
    """
    import torch

    name = os.fspath(name_or_path)
    source = resolve_model(name, cache_dir=cache_dir)
    dtype = dtype or torch.float32
    options = options or LoadOptions()
    kwargs = options.model_kwargs(dtype=dtype, compute_dtype=compute_dtype or _dtype_of(dtype))
    base_name = adapter_base(source) if Path(source).is_dir() else None
    if base_name is None:
        # what was resolved once is loaded: a trainer moving LATEST meanwhile cannot make the
        # weights and the tokenizer come from different checkpoints
        model = _load_model(source, cache_dir, kwargs)
        if trainable:
            model = _prepare_kbit(model, gradient_checkpointing)
        tokenizer = load_tokenizer(source, cache_dir=cache_dir)
        # a local checkpoint is named by its absolute path; hub and packaged names stay names,
        # so that an adapter trained on them reloads on another machine
        base = str(Path(source).absolute()) if Path(name).expanduser().exists() else name
        return CausalLM(model, tokenizer, source, base, adapter=False)

    from peft import PeftModel

    base_source = resolve_model(base_name, cache_dir=cache_dir)
    if adapter_base(base_source) is not None:
        raise LeanloopError(
            f"adapter {source}: its base model {base_name} is itself an adapter",
            hint="merge the first adapter into a full model before training another on top",
        )
    base_model = _load_model(base_source, cache_dir, kwargs)
    if trainable:
        base_model = _prepare_kbit(base_model, gradient_checkpointing)
    model = PeftModel.from_pretrained(base_model, source, is_trainable=trainable)
    has_tokenizer = any(
        (Path(source) / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json")
    )
    tokenizer = load_tokenizer(source if has_tokenizer else base_source, cache_dir=cache_dir)
    return CausalLM(model, tokenizer, source, base_name, adapter=True)


def _load_model(source: str, cache_dir: Path | None, kwargs: dict[str, Any]):
    """The model of ``source``: a causal LM, or an encoder-decoder (T5, ByT5: ReProver's
    generator) when its configuration says it is one."""
    from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM

    encoder_decoder = _is_encoder_decoder(source, cache_dir)
    loader = AutoModelForSeq2SeqLM if encoder_decoder else AutoModelForCausalLM
    try:
        return load_pretrained(loader, source, cache_dir=cache_dir, **kwargs)
    except ImportError as exc:  # a kernel or quantization library transformers could not use
        option = "attn_implementation" if "attn" in str(exc).lower() else "quantization"
        raise LeanloopError(
            f"cannot load {source} with {option}={kwargs.get(option)!r}: {str(exc).splitlines()[0]}"
        ) from None


def _is_encoder_decoder(source: str, cache_dir: Path | None) -> bool:
    """Whether ``source`` holds an encoder-decoder (T5, ByT5), as its configuration says."""
    from transformers import AutoConfig

    config = load_pretrained(AutoConfig, source, cache_dir=cache_dir)
    return bool(getattr(config, "is_encoder_decoder", False))


def merged_for_inference(model):
    """A model that only generates, as fast as its base: a PEFT model's LoRA weights merged into
    the base weights (``merge_and_unload``), so that no step computes the adapter's extra
    products. A plain model, or an adapter over a quantized base (whose 4/8-bit weights cannot
    take the sum exactly), is returned as it is.

    Args:
        model: A ``transformers`` model, or a PEFT model over one.

    Returns:
        The model to generate with.
    """
    if not hasattr(model, "merge_and_unload") or is_quantized(model):
        return model
    return model.merge_and_unload()


def _prepare_kbit(model, gradient_checkpointing: bool):
    """A quantized model made ready for training an adapter over it (its other weights in
    float32, inputs requiring gradients for checkpointing); any other model as it is."""
    if not is_quantized(model):
        return model
    from peft import prepare_model_for_kbit_training

    return prepare_model_for_kbit_training(model, use_gradient_checkpointing=gradient_checkpointing)


def _dtype_of(dtype):
    import torch

    return dtype if isinstance(dtype, torch.dtype) else torch.bfloat16


def end_token_ids(model, tokenizer) -> list[int]:
    """Every token id that ends a reply: the tokenizer's and the model's end tokens and the
    ChatML end-of-turn token when the vocabulary has it as one token."""
    ids: list[int] = []
    configured = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if isinstance(configured, int):
        configured = [configured]
    for token_id in [tokenizer.eos_token_id, *(configured or [])]:
        if token_id is not None and token_id not in ids:
            ids.append(int(token_id))
    vocab = tokenizer.get_vocab()
    if END_OF_TURN in vocab and vocab[END_OF_TURN] not in ids:
        ids.append(int(vocab[END_OF_TURN]))
    return ids
