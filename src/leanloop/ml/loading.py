"""How a causal language model is loaded: its dtype, 4-bit or 8-bit quantization (bitsandbytes),
the attention kernel and where its layers go (``device_map``), as options the trainers and provers
share; and the precision rule that keeps training right.

The rule: weights that are trained are kept in float32 (their *master* copy), whatever the
compute dtype; bf16 autocast computes with them. Frozen weights (the base under a LoRA adapter, a
model used for inference) load in the compute dtype (bf16 on a GPU that has it). A 16-bit weight
updated in place by a small learning rate mostly does not change at all: bf16 keeps 8 bits of
mantissa, so an update smaller than about 1/256 of the weight is rounded away.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from leanloop.errors import LeanloopError

if TYPE_CHECKING:
    from leanloop.ml.device import Hardware

#: The quantizations bitsandbytes gives (QLoRA trains a LoRA adapter over a 4-bit base).
Quantization = Literal["4bit", "8bit"]
#: The dtypes a model may be loaded in (``auto``: what the checkpoint says).
DtypeName = Literal["auto", "float32", "bfloat16", "float16"]

#: Attention kernels that need a package beyond torch, and the check transformers makes for it.
_FLASH_KERNELS = {
    "flash_attention_2": ("is_flash_attn_2_available", "flash-attn"),
    "flash_attention_3": ("is_flash_attn_3_available", "flash-attn (its hopper build)"),
    "flash_attention_4": ("is_flash_attn_4_available", "flash-attn (its cute build)"),
}


def is_varlen_attention(attn_implementation: str | None) -> bool:
    """Whether an attention kernel attends within each example of a padding-free batch by the
    examples' boundaries (flash-attention's variable-length kernels) instead of a mask over the
    whole concatenated batch (sdpa, eager)."""
    if not attn_implementation:
        return False
    return attn_implementation.startswith("flash_attention") or "flash" in attn_implementation


@dataclass(frozen=True)
class LoadOptions:
    """The loading options of a trainer's or prover's configuration (fields of the same names).

    Attributes:
        quantization: ``4bit`` (NF4, double quantization) or ``8bit`` through bitsandbytes;
            None loads the weights as they are.
        attn_implementation: The attention kernel transformers uses (``sdpa``, ``eager``,
            ``flash_attention_2``, a kernels hub name...); None: transformers' default.
        device_map: Where the layers go (``auto``, ``{"": 0}``, ...); None: one device, placed
            by the trainer or the generator.
        dtype: The dtype to load in; None follows the precision rule (see the module).
    """

    quantization: Quantization | None = None
    attn_implementation: str | None = None
    device_map: str | Mapping[str, Any] | None = None
    dtype: DtypeName | None = None

    @classmethod
    def of(cls, config: Any) -> LoadOptions:
        """The options named by fields of ``config`` (a trainer's or prover's configuration)."""
        return cls(
            quantization=getattr(config, "quantization", None),
            attn_implementation=getattr(config, "attn_implementation", None),
            device_map=getattr(config, "device_map", None),
            dtype=getattr(config, "dtype", None),
        )

    def check(self, hardware: Hardware, *, where: str, processes: int = 1) -> None:
        """Refuse, before anything is loaded, options this machine cannot honour.

        Args:
            hardware: The device the model will run on.
            where: What the options belong to, for the message (e.g. ``SFTTrainer``).
            processes: How many processes of one training run share this machine.

        Raises:
            LeanloopError: ``quantization`` without bitsandbytes or without a CUDA GPU, a
                flash-attention kernel whose package is missing, or a ``device_map`` that
                spreads one model over devices while several processes each hold one.
        """
        if self.quantization is not None:
            if not installed("bitsandbytes"):
                raise LeanloopError(
                    f"{where}: field 'quantization' is {self.quantization!r}, which needs the "
                    "bitsandbytes package (not installed)",
                    hint="pip install bitsandbytes (on a machine with a CUDA GPU), or leave "
                    "quantization unset",
                )
            if hardware.device != "cuda":
                raise LeanloopError(
                    f"{where}: field 'quantization' is {self.quantization!r}, which needs a CUDA "
                    "GPU (bitsandbytes' kernels); this machine has none",
                    hint="leave quantization unset on a CPU",
                )
        kernel = _FLASH_KERNELS.get(self.attn_implementation or "")
        if kernel is not None:
            import transformers.utils as available

            check, package = kernel
            if not getattr(available, check, lambda: False)():
                raise LeanloopError(
                    f"{where}: field 'attn_implementation' is {self.attn_implementation!r}, which "
                    f"needs {package} and a CUDA GPU",
                    hint="pip install flash-attn --no-build-isolation on the GPU machine, or "
                    "use attn_implementation='sdpa'",
                )
        if processes > 1 and isinstance(self.device_map, str):
            raise LeanloopError(
                f"{where}: field 'device_map' is {self.device_map!r}, which spreads one model over "
                f"this machine's devices, but {processes} processes each train their own copy",
                hint="leave device_map unset with several processes (each takes its own GPU)",
            )

    def torch_dtype(self, default):
        """The dtype to load in: ``dtype`` when given (``auto``: the checkpoint's), else
        ``default``."""
        import torch

        if self.dtype is None:
            return default
        if self.dtype == "auto":
            return "auto"
        return getattr(torch, self.dtype)

    def model_kwargs(self, *, dtype, compute_dtype) -> dict[str, Any]:
        """Keyword arguments for ``from_pretrained``.

        Args:
            dtype: The dtype of the weights (a ``torch.dtype`` or ``"auto"``).
            compute_dtype: The dtype quantized layers compute in.

        Returns:
            ``dtype`` and whichever of ``quantization_config``, ``attn_implementation`` and
            ``device_map`` are set.
        """
        kwargs: dict[str, Any] = {"dtype": dtype}
        if self.quantization is not None:
            kwargs["quantization_config"] = bitsandbytes_config(self.quantization, compute_dtype)
        if self.attn_implementation is not None:
            kwargs["attn_implementation"] = self.attn_implementation
        if self.device_map is not None:
            kwargs["device_map"] = (
                dict(self.device_map) if isinstance(self.device_map, Mapping) else self.device_map
            )
        return kwargs


def installed(package: str) -> bool:
    """Whether ``package`` can be imported here."""
    return importlib.util.find_spec(package) is not None


def bitsandbytes_config(quantization: Quantization, compute_dtype):
    """transformers' ``BitsAndBytesConfig`` for ``4bit`` (QLoRA's: NF4 with double
    quantization, computing in ``compute_dtype``) or ``8bit`` (LLM.int8())."""
    from transformers import BitsAndBytesConfig

    if quantization == "4bit":
        return BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type="nf4",
            bnb_4bit_use_double_quant=True,
            bnb_4bit_compute_dtype=compute_dtype,
        )
    return BitsAndBytesConfig(load_in_8bit=True)


def is_quantized(model) -> bool:
    """Whether a model (or a PEFT model's base) was loaded in 4 or 8 bits."""
    base = getattr(model, "get_base_model", lambda: model)()
    return any(getattr(base, f"is_loaded_in_{bits}bit", False) for bits in (4, 8))


def upcast_trainable(model) -> int:
    """Keep every trainable parameter in float32 (the master weights): 16-bit ones are cast up in
    place. Returns how many were cast."""
    import torch

    cast = 0
    for parameter in model.parameters():
        if parameter.requires_grad and parameter.dtype in (torch.bfloat16, torch.float16):
            parameter.data = parameter.data.float()
            cast += 1
    return cast
