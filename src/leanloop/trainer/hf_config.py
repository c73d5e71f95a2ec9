"""``HFTrainerConfig``: what the tactic-generator trainers (SFT and GRPO) share in their
configuration: the model and how it is loaded, LeanDojo-v2's arguments, the optimizer, precision,
retrieved premises in the prompts, and checkpoints."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import Field
from pydantic.dataclasses import dataclass

from leanloop.configfile import KeywordsOf
from leanloop.data.prompt import PromptFormat
from leanloop.ml.loading import DtypeName, Quantization
from leanloop.trainer.config import TrainerConfig


def trl_args_field() -> Any:
    """The ``trl_args`` field; each trainer's configuration declares it again, annotated with
    ``KeywordsOf`` its TRL configuration class, whose parameters the keys are checked
    against when the configuration is loaded."""
    return Field(
        default_factory=dict, description="Passed to TRL's config unchanged, over the rest."
    )


@dataclass
class HFTrainerConfig(TrainerConfig):
    """The configuration of a tactic-generator trainer. The first six fields are LeanDojo-v2's
    constructor arguments (in code a ``peft.LoraConfig`` goes to ``lora_config``; a file gives
    its keyword arguments as ``lora``)."""

    model_name: str = Field(
        description="The model to train: a hub name, a checkpoint or LoRA adapter directory, a "
        "trainer's output directory, or a packaged model (smollm2-135m-instruct, tinycoder)."
    )
    output_dir: Path = Field(
        default=Path("outputs"),
        description="Where each repository's checkpoint goes; the newest is mirrored on top.",
    )
    epochs_per_repo: float = Field(
        default=1, gt=0, description="Epochs over each repository's merged export (see max_steps)."
    )
    batch_size: int = Field(
        default=1, ge=1, description="Examples per device and step (for GRPO: completions)."
    )
    lr: float = Field(default=2e-5, gt=0, description="Peak learning rate.")
    lora: Annotated[
        dict[str, Any] | None,
        KeywordsOf("peft", "LoraConfig", build=True, defaults=(("task_type", "CAUSAL_LM"),)),
    ] = Field(
        default=None,
        description="peft.LoraConfig keyword arguments: train a LoRA adapter instead of the "
        "whole model (None: the whole model).",
    )
    quantization: Quantization | None = Field(
        default=None,
        description="Load the model's weights in 4 or 8 bits with bitsandbytes (a CUDA GPU): "
        "4bit with lora is QLoRA; a quantized model trains a LoRA adapter only (None: as "
        "stored).",
    )
    attn_implementation: str | None = Field(
        default=None,
        description="The attention kernel (sdpa, eager, flash_attention_2 with flash-attn "
        "installed, ...); None: transformers' default.",
    )
    device_map: str | dict[str, int | str] | None = Field(
        default=None,
        description="Where the model's layers go, passed to from_pretrained (auto, {'': 0}); "
        "for one process (None: the trainer places the model).",
    )
    dtype: DtypeName | None = Field(
        default=None,
        description="The dtype to load in (None: weights that train load in float32 and bf16 "
        "autocast computes where the GPU has it; a LoRA adapter's frozen base loads in bf16 "
        "there). bfloat16/float16 with full fine-tuning is refused: 16-bit weights without "
        "float32 master weights lose the updates.",
    )
    retriever: str | None = Field(
        default=None,
        description="A retriever (RetrievalTrainer's checkpoint or output directory): each "
        "prompt then lists the num_retrieved premises it ranks best for the state, in "
        "RetrievalProver's format, as ReProver trains (None: prompts are the state alone).",
    )
    num_retrieved: int = Field(
        default=10, ge=1, description="Premises before each state when retriever is given."
    )
    save_steps: int | None = Field(
        default=500,
        ge=1,
        description="Optimizer steps between step checkpoints within a repository (the newest "
        "kept in output_dir/.<checkpoint>.work until the repository is finished; a run started "
        "again resumes from it). None: none.",
    )
    resume: bool = Field(
        default=True,
        description="Skip the repositories an earlier run into output_dir finished and resume "
        "an interrupted one from its last step checkpoint (False: train them all again).",
    )
    gradient_accumulation_steps: int = Field(
        default=1, ge=1, description="Batches per optimizer step."
    )
    max_steps: int | None = Field(
        default=None, ge=1, description="Optimizer steps per repository; overrides epochs_per_repo."
    )
    max_seconds: float | None = Field(
        default=None,
        gt=0,
        description="Training time per repository in seconds: training stops after the first "
        "optimizer step past it (None: no limit). The learning-rate schedule still follows "
        "epochs_per_repo or max_steps.",
    )
    warmup_steps: float = Field(
        default=0.0, ge=0, description="Warm-up steps, or a share of all steps when below 1."
    )
    lr_scheduler_type: str = Field(
        default="linear",
        description="The transformers learning-rate schedule (linear, cosine, ...).",
    )
    weight_decay: float = Field(default=0.0, ge=0, description="AdamW weight decay.")
    max_grad_norm: float = Field(default=1.0, gt=0, description="Gradient norm clip.")
    logging_steps: int = Field(default=10, ge=1, description="Steps between logged metrics.")
    seed: int = Field(
        default=3407, description="Seed of data order, sampling and LoRA initialisation."
    )
    gradient_checkpointing: bool | None = Field(
        default=None,
        description="Recompute activations to save memory (None: on with CUDA, off on a CPU).",
    )
    bf16: bool | None = Field(
        default=None,
        description="bf16 mixed precision, autocast over float32 weights (None: where the GPU "
        "has it, never on a CPU).",
    )
    evaluate: bool = Field(
        default=True, description="Evaluate on the export's validation split after each repository."
    )
    eval_max_examples: int | None = Field(
        default=1000, ge=1, description="Validation examples used at most (None: all)."
    )
    prompt_format: PromptFormat = Field(
        default_factory=PromptFormat,
        description="How states become prompts and replies become tactics; saved with each "
        "checkpoint, whose generators use it.",
    )
    plot_curves: bool = Field(
        default=True, description="Write training_curves.png into checkpoints."
    )
    progress_bars: bool = Field(
        default=True,
        description="Show progress bars while training (False: train quietly; the metrics go "
        "to the checkpoint's log history and curves).",
    )
    trl_args: Annotated[dict[str, Any], KeywordsOf("transformers", "TrainingArguments")] = (
        trl_args_field()
    )
