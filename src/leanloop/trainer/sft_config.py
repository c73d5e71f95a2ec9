"""``SFTTrainerConfig``: the configuration of supervised fine-tuning of a tactic generator."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field
from pydantic.dataclasses import dataclass

from leanloop.configfile import KeywordsOf
from leanloop.trainer.hf_config import HFTrainerConfig, trl_args_field


@dataclass
class SFTTrainerConfig(HFTrainerConfig):
    """The shared tactic-trainer fields, and how long an example may be."""

    trl_args: Annotated[dict[str, Any], KeywordsOf("trl", "SFTConfig")] = trl_args_field()

    max_length: int | None = Field(
        default=1024,
        ge=8,
        description="Tokens kept of each example (longer ones lose their end; one whose "
        "completion is cut away entirely is dropped); None: no limit.",
    )
