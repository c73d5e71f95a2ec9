"""``ProgressTrainerConfig``: the configuration of the progress regressor's training."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic.dataclasses import dataclass

from leanloop.trainer.config import TrainerConfig


@dataclass
class ProgressTrainerConfig(TrainerConfig):
    """What ``ProgressTrainer`` trains on and how; the field names are LeanDojo-v2's."""

    data_path: Path = Field(
        description="The JSON-lines file of progress rows (see build_progress_dataset)."
    )
    model_name: str = Field(
        default="bert-base-uncased",
        description="The encoder under the regression head: a hub name, a local directory or "
        "a packaged model (all-minilm-l6-v2 works without the hub).",
    )
    output_dir: Path = Field(
        default=Path("outputs"),
        description="Where the best model, its metrics and curves are saved.",
    )
    max_length: int = Field(
        default=512, ge=1, description="Tokens kept of each text (its end is cut)."
    )
    batch_size: int = Field(default=8, ge=1, description="Rows per training and evaluation batch.")
    epochs: float = Field(default=3.0, gt=0, description="Training epochs (the best one is kept).")
    learning_rate: float = Field(default=1e-5, gt=0, description="Peak learning rate.")
    eval_ratio: float = Field(
        default=0.2,
        gt=0,
        lt=1,
        description="Share of the theorems whose rows are held out to validate.",
    )
    seed: int = Field(
        default=42, description="Seed of the split, the head's weights and data order."
    )
