"""``TrainingConfig``: everything ``RetrievalTrainer`` is configured with, under LeanDojo-v2's field
names, with the checks of values that depend on each other."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Self

from pydantic import Field, ValidationInfo, field_validator, model_validator
from pydantic.dataclasses import dataclass

from leanloop.trainer.config import TrainerConfig

#: Metrics the retriever logs, usable as early-stopping and checkpoint monitors, and whether a
#: higher value is better.
MONITORS = {"Recall@1_val": "max", "Recall@10_val": "max", "MRR_val": "max", "loss_train": "min"}
_PRECISIONS = ("32-true", "32", "16-mixed", "16-true", "bf16-mixed", "bf16-true", "64-true", "64")


@dataclass
class TrainingConfig(TrainerConfig):
    """Everything ``RetrievalTrainer`` needs; the field names are LeanDojo-v2's. Defaults train
    on a CPU; ``precision`` left unset means fp32 on a CPU and bf16 on a GPU that supports it.
    A file may hold the fields at its top level or, as LeanDojo-v2 writes them, under
    ``training:``."""

    # curriculum
    run_progressive_training: bool = Field(
        default=True,
        description="Continual learning with EWC; False trains without the EWC penalty.",
    )
    single_repo: bool = Field(
        default=True, description="Accepted for LeanDojo-v2 configs; no effect."
    )
    num_repos: int = Field(
        default=1, ge=1, description="Accepted for LeanDojo-v2 configs; no effect."
    )
    max_epochs: int = Field(default=1, ge=1, description="Epochs per repository.")
    max_steps: int = Field(
        default=-1, ge=-1, description="Optimizer steps per repository (-1: no cap)."
    )
    max_time: str | None = Field(
        default=None, description='Training time per repository, "DD:HH:MM:SS" (None: no limit).'
    )
    val_check_interval: float | int = Field(
        default=1.0,
        gt=0,
        description="Validate every this share of an epoch (float) or batches (int).",
    )

    # model
    model_name: str = Field(
        default="sentence-transformers/all-MiniLM-L6-v2",
        description="The encoder to start from: a hub name, a local directory or a packaged "
        "model (all-minilm-l6-v2 works without the hub).",
    )
    lr: float = Field(
        default=2e-5, gt=0, description="Peak learning rate (AdamW, cosine schedule)."
    )
    warmup_steps: int = Field(
        default=10, ge=0, description="Steps of linear learning-rate warm-up."
    )
    max_seq_len: int = Field(default=256, ge=8, description="Token limit of states and premises.")
    num_retrieved: int = Field(
        default=100, ge=10, description="Premises ranked per query (R@10 needs 10)."
    )
    temperature: float = Field(default=0.05, gt=0, description="Softmax temperature of the loss.")
    weight_decay: float = Field(
        default=0.01, ge=0, description="AdamW weight decay (not on norms)."
    )

    # training
    batch_size: int = Field(default=8, ge=1, description="Training examples per batch.")
    eval_batch_size: int = Field(
        default=32, ge=1, description="Texts embedded per batch in evaluation."
    )
    accumulate_grad_batches: int = Field(default=1, ge=1, description="Batches per optimizer step.")
    num_gpus: int = Field(
        default=1, ge=0, description="GPUs to use when CUDA is present (0: the CPU)."
    )
    num_workers: int = Field(default=0, ge=0, description="Data loader worker processes.")
    precision: str | None = Field(
        default=None, description="Lightning precision; None: by hardware."
    )
    gradient_clip_val: float = Field(default=1.0, ge=0, description="Gradient norm clip (0: none).")

    # data
    num_negatives: int = Field(
        default=3, ge=0, description="Random accessible negatives per example."
    )
    num_in_file_negatives: int = Field(
        default=1, ge=0, description="Negatives from the positive's file."
    )
    num_hard_negatives: int = Field(
        default=0,
        ge=0,
        description="Negatives per example mined with the model being trained: the accessible "
        "premises it ranks highest that the tactic did not use, mined again after each epoch.",
    )
    naming_examples: bool = Field(
        default=False,
        description="Also train on each training theorem's first proof state paired with the "
        "theorem's own name (Mathlib names lemmas after what they state).",
    )
    data_max_seq_len: int | None = Field(
        default=None, ge=8, description="Token limit of training texts (None: max_seq_len)."
    )
    tokenizer_model_name: str | None = Field(
        default=None,
        description="Accepted for LeanDojo-v2 configs; the encoder's tokenizer is used.",
    )
    split_scheme: Literal["random", "novel_premises"] = Field(
        default="random",
        description="Which of the export's split schemes to train and evaluate on.",
    )

    # EWC
    lambda_value: float = Field(
        default=0.1,
        ge=0,
        description="EWC weight λ (0 disables EWC). The loss is InfoNCE + λ Σ F (θ − θ*)², with F "
        "each earlier repository's diagonal Fisher scaled to mean 1 over the weights: the "
        "penalty is the Fisher-weighted squared distance from the weights the last repository "
        "ended with, and λ weighs it against the loss directly (in bench/ewc.py, λ = 0.1 "
        "halves the Fisher-weighted drift of λ = 0 and keeps more of repository 1's R@10).",
    )
    fisher_max_samples: int = Field(default=256, ge=1, description="Examples used for the Fisher.")

    timeout_seconds: int = Field(
        default=7 * 24 * 3600, ge=1, description="DDP timeout (multi-GPU)."
    )

    # callbacks
    early_stopping_patience: int = Field(
        default=5, ge=1, description="Validations without improvement before a repository stops."
    )
    early_stopping_monitor: str = Field(
        default="Recall@10_val",
        description=f"Metric early stopping watches: {', '.join(MONITORS)}.",
    )
    early_stopping_mode: Literal["min", "max"] = Field(
        default="max", description="Whether the monitored metric should fall (min) or rise (max)."
    )
    checkpoint_save_top_k: int = Field(
        default=1, ge=-1, description="Best checkpoints kept while training (-1: all)."
    )
    checkpoint_every_n_epochs: int = Field(
        default=1, ge=1, description="Epochs between checkpoints."
    )
    checkpoint_every_n_train_steps: int = Field(
        default=200,
        ge=0,
        description="Optimizer steps between the checkpoints (weights, optimizer, progress) an "
        "interrupted repository resumes from when training runs again; one is also written when "
        "an exception stops training on one process (0: only that one).",
    )
    checkpoint_monitor: str = Field(
        default="Recall@10_val",
        description=f"Metric that picks the checkpoint kept: {', '.join(MONITORS)}.",
    )
    checkpoint_mode: Literal["min", "max"] = Field(
        default="max", description="Whether the checkpoint metric should fall (min) or rise (max)."
    )

    # logging
    log_every_n_steps: int = Field(
        default=1, ge=1, description="Steps between logged training metrics."
    )
    num_sanity_val_steps: int = Field(
        default=0, ge=0, description="Validation batches run before training, as a check."
    )
    enable_progress_bar: bool = Field(default=True, description="Show Lightning's progress bar.")

    seed: int = Field(
        default=3407, description="Seed of shuffling, negative sampling and the Fisher's examples."
    )
    output_dir: Path = Field(
        default=Path("outputs/retriever"),
        description="Where each repository's checkpoint is written.",
    )

    @field_validator("precision")
    @classmethod
    def _check_precision(cls, value: str | None) -> str | None:
        if value is not None and str(value) not in _PRECISIONS:
            raise ValueError(f"must be one of {', '.join(_PRECISIONS)}")
        return value

    @field_validator("max_time")
    @classmethod
    def _check_time(cls, value: str | None) -> str | None:
        if value is not None:
            parts = value.split(":")
            if len(parts) != 4 or not all(p.isdigit() for p in parts):
                raise ValueError('expected "DD:HH:MM:SS", e.g. "00:00:05:00" for five minutes')
        return value

    @field_validator("early_stopping_monitor", "checkpoint_monitor")
    @classmethod
    def _check_monitor(cls, value: str) -> str:
        if value not in MONITORS:
            raise ValueError(f"must be one of {', '.join(MONITORS)}")
        return value

    @model_validator(mode="after")
    def _check_modes(self, info: ValidationInfo) -> Self:
        """A monitor's mode must be the direction in which its metric improves."""
        for what in ("early_stopping", "checkpoint"):
            monitor = getattr(self, f"{what}_monitor")
            mode = getattr(self, f"{what}_mode")
            if mode != MONITORS[monitor]:
                raise self.invalid(
                    info,
                    f"{what}_mode='{mode}' does not fit {what}_monitor='{monitor}', which "
                    f"improves as it {'rises' if MONITORS[monitor] == 'max' else 'falls'}: "
                    f"set {what}_mode to '{MONITORS[monitor]}'",
                )
        return self

    @classmethod
    def from_dict(cls, data: Any, source: str | None = None) -> Self:
        """A configuration from a mapping of its fields, or of LeanDojo-v2's file of both
        configurations (its ``training:`` part is read).

        Args:
            data: The mapping (None for every default).
            source: What errors name as the values' origin.

        Returns:
            The configuration.
        """
        if isinstance(data, dict) and isinstance(data.get("training"), dict):
            data = data["training"]  # LeanDojo-v2 writes {training: ..., prover: ...}
        return super().from_dict(data, source)

    # -- derived settings ------------------------------------------------------------------------

    def get_lambda_value(self) -> float:
        """The EWC weight in effect.

        Returns:
            ``lambda_value`` with progressive training, otherwise 0.
        """
        return self.lambda_value if self.run_progressive_training else 0.0

    def max_seconds(self) -> float | None:
        """``max_time`` in seconds (None: no limit)."""
        if self.max_time is None:
            return None
        days, hours, minutes, seconds = (int(part) for part in self.max_time.split(":"))
        return float(((days * 24 + hours) * 60 + minutes) * 60 + seconds)

    def get_model_config(self) -> dict[str, Any]:
        """The retriever's hyper-parameters.

        Returns:
            The keyword arguments of ``PremiseRetriever`` but the model name.
        """
        return {
            "lr": self.lr,
            "warmup_steps": self.warmup_steps,
            "max_seq_len": self.max_seq_len,
            "num_retrieved": self.num_retrieved,
            "temperature": self.temperature,
            "lambda_value": self.get_lambda_value(),
            "weight_decay": self.weight_decay,
        }
