"""How the tactic-generator trainers set up the model they train: the dtype it loads in (float32
master weights for what trains, refusals where that cannot hold), LoRA, and the names of
transformers' settings."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from leanloop.errors import LeanloopError
from leanloop.ml.loading import LoadOptions


def training_dtype(
    options: LoadOptions, compute_dtype, *, trains_adapter: bool, sharded: bool, where: str
):
    """The dtype a model to be trained loads in.

    Weights that train load in float32 (their master copy; bf16 autocast computes with them);
    a LoRA adapter's frozen base loads in ``compute_dtype`` (PEFT keeps the adapter in float32
    over it); under FSDP or DeepSpeed (``sharded``) everything loads in float32 (the engine
    keeps master weights itself and needs one dtype). ``options.dtype`` wins when set.

    Args:
        options: The loading options.
        compute_dtype: The dtype the hardware computes in (bf16 on a GPU that has it).
        trains_adapter: Whether a LoRA adapter is trained (not the whole model).
        sharded: Whether FSDP or DeepSpeed trains the model.
        where: The trainer, for the message.

    Returns:
        A ``torch.dtype``, or ``"auto"``.

    Raises:
        LeanloopError: A 16-bit ``dtype`` for full fine-tuning outside FSDP/DeepSpeed.
    """
    import torch

    default = compute_dtype if trains_adapter and not sharded else torch.float32
    dtype = options.torch_dtype(default)
    if not trains_adapter and not sharded and dtype in (torch.bfloat16, torch.float16):
        raise LeanloopError(
            f"{where}: field 'dtype' is {options.dtype!r} with full fine-tuning: 16-bit weights "
            "without float32 master weights lose the updates smaller than their precision",
            hint="leave dtype unset (float32 weights, bf16 autocast), or train a LoRA adapter "
            "(lora), whose adapter stays float32 over a bf16 base",
        )
    return dtype


def sharded_engine(trl_args: Mapping[str, Any]) -> bool:
    """Whether FSDP or DeepSpeed trains the model: asked for in the TRL arguments, or by the
    launcher (``accelerate launch`` with an FSDP or DeepSpeed configuration)."""
    from leanloop.settings import Settings

    return bool(trl_args.get("fsdp") or trl_args.get("deepspeed")) or any(
        (Settings.variable(f"ACCELERATE_USE_{engine}") or "").lower() == "true"
        for engine in ("FSDP", "DEEPSPEED")
    )


def lora_config_of(lora_config, settings: Mapping[str, Any] | None):
    """A ``peft.LoraConfig`` from the constructor's ``lora_config`` (a LoraConfig, copied, or a
    mapping) or the configuration's ``lora`` fields (None: no LoRA)."""
    if lora_config is None and settings is None:
        return None
    from peft import LoraConfig, PeftConfig

    if isinstance(lora_config, PeftConfig):
        return copy.deepcopy(lora_config)  # PEFT fills fields in; leave the caller's alone
    if lora_config is not None and not isinstance(lora_config, Mapping):
        raise LeanloopError(
            f"lora_config must be a peft.LoraConfig, not {type(lora_config).__name__}",
            hint="from peft import LoraConfig; lora_config=LoraConfig(r=16, lora_alpha=32)",
        )
    fields = dict(settings or {})
    fields.setdefault("task_type", "CAUSAL_LM")
    try:
        return LoraConfig(**fields)
    except (TypeError, ValueError) as exc:
        raise LeanloopError(f"option 'lora': {exc}") from exc


def apply_lora(model, lora_config, *, seed: int | None = None):
    """``model`` with a fresh LoRA adapter (``lora_config`` is a ``peft.LoraConfig``)."""
    from peft import get_peft_model

    if seed is not None:
        from transformers import set_seed

        set_seed(seed)  # the adapter's initial weights are random
    try:
        return get_peft_model(model, copy.deepcopy(lora_config))
    except ValueError as exc:
        raise LeanloopError(
            f"cannot apply the LoRA configuration: {str(exc).splitlines()[0]}",
            hint="check target_modules against the model's module names",
        ) from exc


def checkpointing_field() -> str:
    """transformers 5.x renamed ``gradient_checkpointing`` to ``activation_checkpointing``."""
    import dataclasses

    from transformers import TrainingArguments

    names = {f.name for f in dataclasses.fields(TrainingArguments)}
    return (
        "activation_checkpointing"
        if "activation_checkpointing" in names
        else ("gradient_checkpointing")
    )
