"""``ProgressTrainer``: fine-tunes a regression head to predict how many proof steps remain after
a tactic, keeping the checkpoint with the lowest validation MSE."""

from __future__ import annotations

import json
import logging
import math
import shutil
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from leanloop.errors import LeanloopError
from leanloop.ml.device import Hardware, detect_hardware
from leanloop.ml.models import require_model
from leanloop.ml.progress import MAX_LENGTH_KEY, MEAN_KEY, STD_KEY, progress_text
from leanloop.trainer.config import config_field, trainer_arguments
from leanloop.trainer.progress_config import ProgressTrainerConfig
from leanloop.trainer.progress_data import (
    ProgressRow,
    build_progress_dataset,
    read_progress_rows,
    split_rows,
)

if TYPE_CHECKING:
    from leanloop.database.dynamic import DynamicDatabase, RepositoryLike

log = logging.getLogger(__name__)

#: Written next to the trained model: MSE and MAE on the validation rows, in steps.
METRICS_FILE = "progress_metrics.json"


class ProgressTrainer:
    """Fine-tune ``model_name`` with a one-output regression head on the progress rows (see
    ``leanloop.trainer.progress_data.ProgressRow``) of the JSONL file ``data_path``.
    The arguments are LeanDojo-v2's and the fields of
    [ProgressTrainerConfig][leanloop.trainer.progress_config.ProgressTrainerConfig]
    (``from_config`` reads them from a file).

    Targets are standardised (mean and standard deviation of the training rows, stored in the
    model config). After each epoch the validation MSE is measured in steps; the epoch with the
    lowest is the model saved in ``output_dir``, with ``progress_metrics.json`` (its MSE and MAE
    in steps) and ``training_curves.png``. ``callbacks`` are extra ``transformers`` callbacks.

    Args:
        data_path: The JSONL file of progress rows (``from_database`` writes one).
        model_name: The encoder to fine-tune (a hub name, a packaged model or a directory).
        output_dir: Where the best model is saved.
        max_length: Tokens an input keeps.
        batch_size: Rows per device and step.
        epochs: Training epochs.
        learning_rate: The learning rate.
        eval_ratio: The share of rows held out for validation.
        seed: The seed of the split and of the head's initial weights.
        callbacks: Extra ``transformers`` callbacks.
        hardware: The device and precision (default: detected).

    Raises:
        LeanloopError: ``data_path`` does not exist, or a field has a value it cannot take.
    """

    def __init__(
        self,
        data_path: str | Path,
        model_name: str = "bert-base-uncased",
        output_dir: str | Path = "outputs",
        max_length: int = 512,
        batch_size: int = 8,
        epochs: float = 3.0,
        learning_rate: float = 1e-5,
        eval_ratio: float = 0.2,
        seed: int = 42,
        *,
        callbacks: Sequence = (),
        hardware: Hardware | None = None,
    ) -> None:
        self.config = ProgressTrainerConfig.from_dict(
            {
                "data_path": data_path,
                "model_name": str(model_name),
                "output_dir": output_dir,
                "max_length": max_length,
                "batch_size": batch_size,
                "epochs": epochs,
                "learning_rate": learning_rate,
                "eval_ratio": eval_ratio,
                "seed": seed,
            },
            source=type(self).__name__,
        )
        if not self.data_path.is_file():
            raise LeanloopError(
                f"progress data file {self.data_path} does not exist",
                hint="write one with build_progress_dataset(database, path) or "
                "ProgressTrainer.from_database",
            )
        require_model(self.model_name, type(self).__name__, "model_name")
        self.callbacks = list(callbacks)
        self.hardware = hardware
        self.metrics: dict[str, Any] = {}

    data_path = config_field("data_path")
    model_name = config_field("model_name")
    output_dir = config_field("output_dir")
    max_length = config_field("max_length")
    batch_size = config_field("batch_size")
    epochs = config_field("epochs")
    learning_rate = config_field("learning_rate")
    eval_ratio = config_field("eval_ratio")
    seed = config_field("seed")

    @classmethod
    def from_config(
        cls, source: str | Path | Mapping[str, Any] | ProgressTrainerConfig, **kwargs: Any
    ) -> ProgressTrainer:
        """A trainer from a YAML/JSON file, a mapping of fields or a configuration.

        Args:
            source: A YAML or JSON file, a mapping of the configuration's fields, or a
                configuration.
            **kwargs: Fields that override ``source``'s; the others (``callbacks``,
                ``hardware``) go to the constructor.

        Returns:
            The trainer.

        Raises:
            DataFormatError: The file cannot be read or a field is wrong.
        """
        return cls(**trainer_arguments(ProgressTrainerConfig, source, kwargs))

    @classmethod
    def from_database(
        cls,
        database: DynamicDatabase,
        data_path: str | Path,
        repositories: Iterable[RepositoryLike] | None = None,
        **kwargs: Any,
    ) -> ProgressTrainer:
        """A trainer on the progress rows of a database's traced proofs of the train split
        (see ``build_progress_dataset``: the val and test theorems are never trained on).

        Args:
            database: The database.
            data_path: Where the rows are written (JSONL).
            repositories: Only these repositories (``Repository`` or ``(url, commit)``);
                None for every one.
            **kwargs: The constructor's other arguments.

        Returns:
            The trainer, its data written (``train()`` trains it).

        Raises:
            LeanloopError: The database holds no traced proof.
        """
        count = build_progress_dataset(database, data_path, repositories)
        if count == 0:
            raise LeanloopError(
                f"{database!r} holds no traced proof to learn progress from",
                hint="import a traced dataset first",
            )
        return cls(data_path, **kwargs)

    def _datasets(
        self,
        tokenizer,
        training: list[ProgressRow],
        evaluation: list[ProgressRow],
        max_length: int,
    ):
        from datasets import Dataset

        steps = [float(r.steps_remaining) for r in training]
        mean = sum(steps) / len(steps)
        std = math.sqrt(sum((s - mean) ** 2 for s in steps) / len(steps)) or 1.0

        def build(rows: list[ProgressRow]):
            data = Dataset.from_dict(
                {
                    "text": [progress_text(r.goal, r.prefix, r.tactic) for r in rows],
                    "labels": [(float(r.steps_remaining) - mean) / std for r in rows],
                }
            )
            return data.map(
                lambda batch: tokenizer(batch["text"], truncation=True, max_length=max_length),
                batched=True,
                remove_columns=["text"],
            )

        return build(training), build(evaluation), mean, std

    def training_arguments(self, work: Path, steps_per_epoch: int) -> dict[str, Any]:
        """``transformers.TrainingArguments`` values: an evaluation and a checkpoint each epoch,
        the epoch with the lowest validation MSE kept; fp32 on a CPU, bf16 on a GPU that has
        it (``hardware`` if given, else what is present).

        Args:
            work: The directory of the intermediate checkpoints.
            steps_per_epoch: Optimizer steps per epoch (the loss is logged four times an
                epoch).

        Returns:
            Keyword arguments of ``transformers.TrainingArguments``.
        """
        hardware = self.hardware or detect_hardware()
        return {
            "output_dir": str(work),
            "learning_rate": self.learning_rate,
            "per_device_train_batch_size": self.batch_size,
            "per_device_eval_batch_size": self.batch_size,
            "num_train_epochs": self.epochs,
            "weight_decay": 0.01,
            "eval_strategy": "epoch",
            "save_strategy": "epoch",
            "save_only_model": True,
            "save_total_limit": 1,
            "load_best_model_at_end": True,
            "metric_for_best_model": "mse",
            "greater_is_better": False,  # lower validation MSE is better
            "logging_strategy": "steps",
            "logging_steps": max(1, steps_per_epoch // 4),
            "report_to": "none",
            "seed": self.seed,
            "use_cpu": hardware.device == "cpu",
            "bf16": hardware.bf16,
        }

    def train(self) -> dict[str, Any]:
        """Train, keep the best epoch and save it in ``output_dir``.

        Returns:
            The best epoch's metrics (MSE and MAE in steps, among others), as written to
            ``progress_metrics.json``.
        """
        import numpy as np
        from transformers import DataCollatorWithPadding, Trainer, TrainingArguments

        rows = read_progress_rows(self.data_path)
        training, evaluation = split_rows(rows, self.eval_ratio, self.seed)
        model, tokenizer = self._load_model()
        positions = getattr(model.config, "max_position_embeddings", None) or self.max_length
        max_length = min(self.max_length, int(positions))
        train_set, eval_set, mean, std = self._datasets(tokenizer, training, evaluation, max_length)

        def compute_metrics(prediction) -> dict[str, float]:
            predicted = np.asarray(prediction.predictions).reshape(-1) * std + mean
            actual = np.asarray(prediction.label_ids).reshape(-1) * std + mean
            error = predicted - actual
            return {"mse": float(np.mean(error**2)), "mae": float(np.mean(np.abs(error)))}

        work = self.output_dir / "checkpoints"
        steps_per_epoch = max(1, math.ceil(len(training) / self.batch_size))
        args = TrainingArguments(**self.training_arguments(work, steps_per_epoch))
        trainer = Trainer(
            model=model,
            args=args,
            train_dataset=train_set,
            eval_dataset=eval_set,
            processing_class=tokenizer,
            data_collator=DataCollatorWithPadding(tokenizer),
            compute_metrics=compute_metrics,
            callbacks=self.callbacks,
        )
        trainer.train()
        history = [
            {"epoch": e["epoch"], "mse": e["eval_mse"], "mae": e["eval_mae"]}
            for e in trainer.state.log_history
            if "eval_mse" in e
        ]
        final = trainer.evaluate()  # the kept (best) model
        setattr(trainer.model.config, MEAN_KEY, mean)
        setattr(trainer.model.config, STD_KEY, std)
        setattr(trainer.model.config, MAX_LENGTH_KEY, max_length)
        self.metrics = {
            "mse": final["eval_mse"],
            "mae": final["eval_mae"],
            "train_rows": len(training),
            "eval_rows": len(evaluation),
            "best_epoch": next(
                (h["epoch"] for h in history if h["mse"] == trainer.state.best_metric), None
            ),
            "history": history,
            "model_name": self.model_name,
            "steps_mean": mean,
            "steps_std": std,
        }
        self._save(trainer, tokenizer, work)
        return self.metrics

    def _load_model(self):
        """The regression model (one output, a fresh head seeded by ``seed``) and its tokenizer,
        with a pad token."""
        from transformers import AutoModelForSequenceClassification, AutoTokenizer, set_seed

        from leanloop.ml.pretrained import load_pretrained

        tokenizer = load_pretrained(AutoTokenizer, self.model_name)
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
        set_seed(self.seed)  # the regression head's initial weights are random
        model = load_pretrained(
            AutoModelForSequenceClassification,
            self.model_name,
            num_labels=1,
            problem_type="regression",
        )
        if model.config.pad_token_id is None:
            model.config.pad_token_id = tokenizer.pad_token_id
        return model, tokenizer

    def _save(self, trainer, tokenizer, work: Path) -> None:
        """Save the kept model into ``output_dir`` (through the trainer, on every process: a
        sharded model is gathered first), and, on the main process, its tokenizer, the metrics
        and the curves; the epochs' checkpoints go."""
        from leanloop.ml import distributed
        from leanloop.trainer.plots import plot_curves

        trainer.save_model(str(self.output_dir))
        processes = distributed.current()
        if processes.is_main:
            tokenizer.save_pretrained(self.output_dir)
            (self.output_dir / METRICS_FILE).write_text(json.dumps(self.metrics, indent=2) + "\n")
            plot_curves(
                trainer.state.log_history,
                self.output_dir / "training_curves.png",
                title="steps remaining",
            )
            shutil.rmtree(work, ignore_errors=True)
        processes.barrier()
        log.info(
            "progress model saved to %s: MSE %.3f, MAE %.3f steps",
            self.output_dir,
            self.metrics["mse"],
            self.metrics["mae"],
        )
