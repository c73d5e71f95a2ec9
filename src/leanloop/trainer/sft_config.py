"""``SFTTrainerConfig``: the configuration of supervised fine-tuning of a tactic generator."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field
from pydantic.dataclasses import dataclass

from leanloop.configfile import KeywordsOf
from leanloop.trainer.hf_config import HFTrainerConfig, trl_args_field


@dataclass
class SFTTrainerConfig(HFTrainerConfig):
    """The shared tactic-trainer fields, how long an example may be and how batches are made."""

    trl_args: Annotated[dict[str, Any], KeywordsOf("trl", "SFTConfig")] = trl_args_field()

    max_length: int | None = Field(
        default=1024,
        ge=8,
        description="Tokens an example may take: a longer prompt is cut inside its user turn "
        "(premises first, then the state's first lines; the template, the system prompt and "
        "the tactic stay whole); an example whose tactic alone does not fit is dropped. None: "
        "no limit.",
    )
    padding_free: bool | None = Field(
        default=None,
        description="Concatenate each batch's examples into one sequence with their positions "
        "(no padding; each example attends to itself). None: on with a flash-attention kernel "
        "(attn_implementation), whose variable-length kernels make it cheaper; off with sdpa "
        "and eager, whose mask over the whole batch grows with its square.",
    )
    group_by_length: bool | None = Field(
        default=None,
        description="Batch examples of similar length together (transformers' length-grouped "
        "sampler) so that little padding is computed. None: on unless padding_free, for a "
        "repository with 8 batches' worth of examples or more (fewer cannot be grouped).",
    )
