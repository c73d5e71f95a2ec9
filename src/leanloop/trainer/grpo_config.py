"""``GRPOTrainerConfig``: the configuration of GRPO on tactics (how completions are sampled and
scored), and the rule that fits generation batches to whole groups of completions."""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal, Self

from pydantic import Field, ValidationInfo, model_validator
from pydantic.dataclasses import dataclass

from leanloop.configfile import KeywordsOf
from leanloop.errors import LeanloopError
from leanloop.trainer.hf_config import HFTrainerConfig, trl_args_field

#: Completions sampled per prompt when ``num_generations`` is not given.
DEFAULT_NUM_GENERATIONS = 4


@dataclass
class GRPOTrainerConfig(HFTrainerConfig):
    """The shared tactic-trainer fields, and GRPO's. ``batch_size`` counts completions, as in
    TRL; a generation batch holds whole groups of ``num_generations`` completions of one prompt
    (see :func:`generation_plan`)."""

    trl_args: Annotated[dict[str, Any], KeywordsOf("trl", "GRPOConfig")] = trl_args_field()

    num_generations: int | None = Field(
        default=None,
        description=f"Completions sampled per prompt, at least 2 (None: "
        f"{DEFAULT_NUM_GENERATIONS}, the generation batch enlarged to fit them).",
    )
    generation_batch_size: int | None = Field(
        default=None,
        ge=1,
        description="Completions generated at once (None: batch_size × "
        "gradient_accumulation_steps, enlarged to whole groups when num_generations is unset).",
    )
    max_completion_length: int = Field(
        default=128, ge=1, description="Tokens per completion at most."
    )
    max_prompt_length: int | None = Field(
        default=1024,
        ge=8,
        description="Tokens a prompt may take: a longer one is cut inside its user turn "
        "(premises first, then the state's first lines), the template and the system prompt "
        "kept whole. None: no limit.",
    )
    temperature: float = Field(default=1.0, gt=0, description="Sampling temperature.")
    top_p: float = Field(default=1.0, gt=0, le=1, description="Nucleus sampling mass.")
    beta: float = Field(
        default=0.0, ge=0, description="KL penalty against the starting model (0: none)."
    )
    scale_rewards: Literal["group", "batch", "none"] = Field(
        default="group", description="How rewards are scaled into advantages (TRL's scale_rewards)."
    )
    reward_weights: list[float] | None = Field(
        default=None, description="Weights of a list of reward functions (None: all 1)."
    )
    generation_backend: Literal["transformers", "vllm"] = Field(
        default="transformers",
        description="What samples the completions: transformers' generate, or vLLM in this "
        "process, sharing the GPU with training (TRL's colocated vLLM; the 'vllm' extra).",
    )
    evaluate: bool = Field(
        default=False,
        description="After each repository, sample num_generations completions for each of "
        "up to eval_max_examples validation prompts and report their mean rewards (off by "
        "default: generating them takes minutes on a CPU).",
    )
    eval_max_examples: int | None = Field(
        default=16, ge=1, description="Validation prompts evaluated at most (None: all)."
    )

    @model_validator(mode="after")
    def _check_generation_plan(self, info: ValidationInfo) -> Self:
        try:
            self.generation_sizes()
        except LeanloopError as exc:
            raise self.invalid(info, exc.message, hint=exc.hint) from None
        return self

    def generation_sizes(self) -> tuple[int, int]:
        """The generation sizes in effect, for the processes of this run (the generation
        batch is global: every process's batches together).

        Returns:
            ``(num_generations, generation_batch_size)``.

        Raises:
            LeanloopError: The sizes do not divide each other as TRL needs.
        """
        from leanloop.ml import distributed

        return generation_plan(
            self.batch_size * distributed.current().world_size,
            self.gradient_accumulation_steps,
            self.num_generations,
            self.generation_batch_size,
        )


def generation_plan(
    batch_size: int,
    gradient_accumulation_steps: int = 1,
    num_generations: int | None = None,
    generation_batch_size: int | None = None,
) -> tuple[int, int]:
    """``(num_generations, generation_batch_size)`` for these settings (``batch_size``: the
    batch of all processes together), or a LeanloopError saying which of them do not fit
    together."""
    if num_generations is not None and num_generations < 2:
        raise LeanloopError(
            f"num_generations={num_generations}: GRPO compares at least 2 completions per prompt",
            hint="use num_generations=2 or more",
        )
    count = num_generations or DEFAULT_NUM_GENERATIONS
    per_step = batch_size * gradient_accumulation_steps
    if generation_batch_size is not None:
        if generation_batch_size % batch_size:
            raise LeanloopError(
                f"generation_batch_size={generation_batch_size} is not a multiple of "
                f"batch_size={batch_size}"
            )
        if generation_batch_size % count:
            raise LeanloopError(
                f"generation_batch_size={generation_batch_size} does not divide by "
                f"num_generations={count}: a generation batch holds whole groups of completions",
                hint=f"use a multiple of {count}",
            )
        return count, generation_batch_size
    if per_step % count == 0:
        return count, per_step
    if num_generations is not None:
        raise LeanloopError(
            f"batch_size={batch_size} × gradient_accumulation_steps={gradient_accumulation_steps}"
            f" = {per_step} completions per step does not divide by num_generations={count}",
            hint=f"make batch_size a multiple of {count}, choose num_generations dividing "
            f"{per_step}, or set generation_batch_size={math.lcm(per_step, count)}",
        )
    return count, math.lcm(per_step, count)
