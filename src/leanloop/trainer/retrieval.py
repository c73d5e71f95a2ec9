"""``RetrievalTrainer``: trains the premise retriever repository by repository with elastic weight
consolidation, configured by a ``TrainingConfig``, and evaluates it (R@1, R@10, MRR)."""

from __future__ import annotations

import csv
import dataclasses
import difflib
import json
import logging
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError, field_validator
from pydantic.dataclasses import dataclass

from leanloop.configfile import read_config_file
from leanloop.data.records import Repository
from leanloop.errors import LeanloopError
from leanloop.ml.device import Hardware, detect_hardware
from leanloop.ml.models import latest_checkpoint
from leanloop.trainer.base import CurriculumStep, CurriculumTrainer

log = logging.getLogger(__name__)

#: Metrics the retriever logs, usable as early-stopping and checkpoint monitors.
MONITORS = ("Recall@1_val", "Recall@10_val", "MRR_val", "loss_train")
_SOURCE = "training config"
_PRECISIONS = ("32-true", "32", "16-mixed", "16-true", "bf16-mixed", "bf16-true", "64-true", "64")


@dataclass(config=ConfigDict(extra="forbid", validate_assignment=True))
class TrainingConfig:
    """Everything ``RetrievalTrainer`` needs, as a dataclass (``dataclasses.asdict`` and
    ``dataclasses.replace`` work); the field names are LeanDojo-v2's. Values are checked when
    the config is made or changed.

    Defaults train the packaged MiniLM encoder on a CPU; ``precision`` left unset means fp32 on
    a CPU and bf16 on a GPU that supports it.
    """

    # curriculum
    run_progressive_training: bool = Field(
        True, description="Continual learning with EWC; False trains without the EWC penalty."
    )
    single_repo: bool = Field(True, description="Accepted for LeanDojo-v2 configs; no effect.")
    num_repos: int = Field(1, ge=1, description="Accepted for LeanDojo-v2 configs; no effect.")
    max_epochs: int = Field(1, ge=1, description="Epochs per repository.")
    max_steps: int = Field(-1, ge=-1, description="Optimizer steps per repository (-1: no cap).")
    max_time: str | None = Field(
        None, description='Training time per repository, "DD:HH:MM:SS" (None: no limit).'
    )
    val_check_interval: float | int = Field(
        1.0, gt=0, description="Validate every this share of an epoch (float) or batches (int)."
    )

    # model
    model_name: str = "sentence-transformers/all-MiniLM-L6-v2"
    lr: float = Field(2e-5, gt=0)
    warmup_steps: int = Field(10, ge=0)
    max_seq_len: int = Field(256, ge=8)
    num_retrieved: int = Field(100, ge=10, description="Premises ranked per query (R@10 needs 10).")
    temperature: float = Field(0.05, gt=0, description="Softmax temperature of the loss.")
    weight_decay: float = Field(0.01, ge=0)

    # training
    batch_size: int = Field(8, ge=1)
    eval_batch_size: int = Field(32, ge=1)
    accumulate_grad_batches: int = Field(1, ge=1)
    num_gpus: int = Field(1, ge=0, description="GPUs to use when CUDA is present.")
    num_workers: int = Field(0, ge=0)
    precision: str | None = Field(None, description="Lightning precision; None: by hardware.")
    gradient_clip_val: float = Field(1.0, ge=0)

    # data
    num_negatives: int = Field(3, ge=0, description="Random accessible negatives per example.")
    num_in_file_negatives: int = Field(1, ge=0, description="Negatives from the positive's file.")
    num_hard_negatives: int = Field(
        0,
        ge=0,
        description="Negatives per example mined with the model being trained: the accessible "
        "premises it ranks highest that the tactic did not use, mined again after each epoch.",
    )
    naming_examples: bool = Field(
        False,
        description="Also train on each training theorem's first proof state paired with the "
        "theorem's own name (Mathlib names lemmas after what they state).",
    )
    data_max_seq_len: int | None = Field(
        None, ge=8, description="Token limit of training texts (None: max_seq_len)."
    )
    tokenizer_model_name: str | None = Field(
        None, description="Accepted for LeanDojo-v2 configs; the encoder's tokenizer is used."
    )
    split_scheme: Literal["random", "novel_premises"] = "random"

    # EWC
    lambda_value: float = Field(0.1, ge=0, description="EWC weight λ; 0 disables EWC.")
    fisher_max_samples: int = Field(256, ge=1, description="Examples used for the Fisher.")

    timeout_seconds: int = Field(7 * 24 * 3600, ge=1, description="DDP timeout (multi-GPU).")

    # callbacks
    early_stopping_patience: int = Field(5, ge=1)
    early_stopping_monitor: str = "Recall@10_val"
    early_stopping_mode: Literal["min", "max"] = "max"
    checkpoint_save_top_k: int = Field(1, ge=-1)
    checkpoint_every_n_epochs: int = Field(1, ge=1)
    checkpoint_monitor: str = "Recall@10_val"
    checkpoint_mode: Literal["min", "max"] = "max"

    # logging
    log_every_n_steps: int = Field(1, ge=1)
    num_sanity_val_steps: int = Field(0, ge=0)
    enable_progress_bar: bool = True

    seed: int = 3407
    output_dir: Path = Path("outputs/retriever")

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

    # -- files -----------------------------------------------------------------------------------

    @classmethod
    def from_dict(cls, data: Any, source: str = "training config") -> TrainingConfig:
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise LeanloopError(f"{source}: expected a mapping of field names to values")
        if "training" in data and isinstance(data["training"], dict):
            data = data["training"]  # LeanDojo-v2 writes {training: ..., prover: ...}
        try:
            return cls(**data)
        except LeanloopError as exc:  # say which file, not just which field
            message = exc.message.replace(_SOURCE, source, 1)
            raise LeanloopError(message, hint=exc.hint) from None

    @classmethod
    def from_yaml(cls, file_path: str | Path) -> TrainingConfig:
        return cls.from_dict(read_config_file(file_path), str(file_path))

    @classmethod
    def from_json(cls, file_path: str | Path) -> TrainingConfig:
        return cls.from_dict(read_config_file(file_path), str(file_path))

    def to_dict(self) -> dict[str, Any]:
        """The fields as plain JSON/YAML values (paths as strings)."""
        return TypeAdapter(TrainingConfig).dump_python(self, mode="json")

    def to_yaml(self, file_path: str | Path) -> Path:
        import yaml

        path = Path(file_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(self.to_dict(), sort_keys=False))
        return path

    def to_json(self, file_path: str | Path) -> Path:
        path = Path(file_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=2) + "\n")
        return path

    # -- derived settings ------------------------------------------------------------------------

    def get_lambda_value(self) -> float:
        """λ in effect: ``lambda_value`` with progressive training, otherwise 0."""
        return self.lambda_value if self.run_progressive_training else 0.0

    def get_model_config(self) -> dict[str, Any]:
        """Hyper-parameters of ``PremiseRetriever`` (all but the model name)."""
        return {
            "lr": self.lr,
            "warmup_steps": self.warmup_steps,
            "max_seq_len": self.max_seq_len,
            "num_retrieved": self.num_retrieved,
            "temperature": self.temperature,
            "lambda_value": self.get_lambda_value(),
            "weight_decay": self.weight_decay,
        }


def _config_error(exc: ValidationError, source: str) -> LeanloopError:
    error = exc.errors()[0]
    field = ".".join(str(p) for p in error.get("loc", ())) or "?"
    if error.get("type") in ("extra_forbidden", "unexpected_keyword_argument"):
        names = [f.name for f in dataclasses.fields(TrainingConfig)]
        close = difflib.get_close_matches(field, names, n=1)
        hint = f"did you mean '{close[0]}'?" if close else "see TrainingConfig for the fields"
        return LeanloopError(f"{source}: unknown field '{field}'", hint=hint)
    message = error.get("msg", "invalid value").removeprefix("Value error, ")
    return LeanloopError(
        f"{source}: field '{field}': {message} (got {error.get('input')!r})",
        hint="fix the value or leave the field out to use its default",
    )


def _explained(validated_init):
    """``TrainingConfig.__init__`` reporting a bad field as a ``LeanloopError`` naming it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        try:
            validated_init(self, *args, **kwargs)
        except ValidationError as exc:
            raise _config_error(exc, _SOURCE) from None

    __init__.__doc__ = validated_init.__doc__
    return __init__


TrainingConfig.__init__ = _explained(TrainingConfig.__init__)  # type: ignore[method-assign]


class RetrievalTrainer(CurriculumTrainer):
    """Train the premise retriever on repositories in order, each continuing from the
    checkpoint of the one before, with EWC against forgetting.

    ``train(repos, database, data_path, model_checkpoint_path=None)`` starts from
    ``model_checkpoint_path`` when given, else from the newest checkpoint in
    ``config.output_dir`` (a previous run), else from ``config.model_name``. Each repository's
    checkpoint directory holds ``retriever.ckpt`` (weights, hyper-parameters, the EWC Fisher
    and anchor weights), the encoder and tokenizer in Hugging Face format, ``metrics.csv``,
    ``metrics.json`` and ``training_curves.png``. ``callbacks`` are extra Lightning callbacks.
    """

    def __init__(
        self,
        config: TrainingConfig | None = None,
        *,
        callbacks: Sequence = (),
        hardware: Hardware | None = None,
    ) -> None:
        self.config = config or TrainingConfig()
        self.hardware = hardware
        self.output_dir = Path(self.config.output_dir)
        self.callbacks = list(callbacks)
        self.data_path: Path | None = None
        self.reports: list[dict[str, Any]] = []
        self._start: str | None = None

    # -- training --------------------------------------------------------------------------------

    def train(
        self,
        repos: Sequence[Repository],
        database,
        data_path: str | Path,
        model_checkpoint_path: str | Path | None = None,
    ) -> list[Path]:
        if model_checkpoint_path is not None and not Path(model_checkpoint_path).exists():
            raise LeanloopError(
                f"model_checkpoint_path {model_checkpoint_path} does not exist",
                hint="give a checkpoint directory written by RetrievalTrainer, or leave it out",
            )
        previous = latest_checkpoint(self.output_dir)
        self._start = str(model_checkpoint_path or previous or self.config.model_name)
        self.data_path = Path(data_path)
        return super().train(repos, database, data_path)

    def _hardware(self) -> Hardware:
        """The device to train on: ``hardware`` if given, else what is present; ``num_gpus=0``
        keeps training on the CPU even where CUDA is present."""
        hardware = self.hardware or detect_hardware()
        if hardware.device == "cuda" and self.config.num_gpus == 0:
            return detect_hardware(force_cpu=True)
        return hardware

    def device_arguments(self) -> dict[str, Any]:
        """Lightning's accelerator, devices, strategy and precision for this config and device:
        fp32 on a CPU; on CUDA ``num_gpus`` devices (DDP for more than one) and bf16 where the
        GPU has it; an explicit ``precision`` always wins."""
        config = self.config
        hardware = self._hardware()
        strategy: Any = "auto"
        devices = 1
        if hardware.device == "cuda":
            devices = max(1, config.num_gpus)
            if devices > 1:
                from datetime import timedelta

                from lightning.pytorch.strategies import DDPStrategy

                strategy = DDPStrategy(timeout=timedelta(seconds=config.timeout_seconds))
        return {
            "accelerator": hardware.lightning_accelerator,
            "devices": devices,
            "strategy": strategy,
            "precision": config.precision or hardware.lightning_precision,
        }

    def _lightning_trainer(self, work_dir: Path, has_val: bool):
        import lightning.pytorch as pl
        from lightning.pytorch.callbacks import EarlyStopping, LearningRateMonitor, ModelCheckpoint
        from lightning.pytorch.loggers import CSVLogger

        config = self.config
        callbacks: list = [LearningRateMonitor(logging_interval="step")]
        monitors_val = config.checkpoint_monitor.endswith("_val")
        if has_val or not monitors_val:
            callbacks.append(
                ModelCheckpoint(
                    dirpath=work_dir / "checkpoints",
                    filename="{epoch}-{step}",
                    monitor=config.checkpoint_monitor,
                    mode=config.checkpoint_mode,
                    save_top_k=config.checkpoint_save_top_k,
                    every_n_epochs=config.checkpoint_every_n_epochs,
                    save_weights_only=True,
                )
            )
        else:
            log.warning("no validation steps: keeping the weights of the last epoch")
        if has_val or not config.early_stopping_monitor.endswith("_val"):
            callbacks.append(
                EarlyStopping(
                    monitor=config.early_stopping_monitor,
                    mode=config.early_stopping_mode,
                    patience=config.early_stopping_patience,
                    check_on_train_epoch_end=not config.early_stopping_monitor.endswith("_val"),
                )
            )
        if config.num_hard_negatives > 0:
            from leanloop.retrieval.datamodule import HardNegativeMining

            callbacks.append(HardNegativeMining())
        callbacks.extend(self.callbacks)
        return pl.Trainer(
            **self.device_arguments(),
            max_epochs=config.max_epochs,
            max_steps=config.max_steps,
            max_time=config.max_time,
            val_check_interval=config.val_check_interval if has_val else None,
            accumulate_grad_batches=config.accumulate_grad_batches,
            gradient_clip_val=config.gradient_clip_val or None,
            callbacks=callbacks,
            logger=CSVLogger(work_dir, name="logs", version=""),
            log_every_n_steps=config.log_every_n_steps,
            num_sanity_val_steps=config.num_sanity_val_steps if has_val else 0,
            limit_val_batches=None if has_val else 0,
            enable_progress_bar=config.enable_progress_bar,
            enable_model_summary=False,
            default_root_dir=work_dir,
        )

    def load_model(self, path: str | Path):
        """The retriever stored at ``path`` (or a fresh one around the encoder ``path`` names),
        with this config's hyper-parameters."""
        from leanloop.retrieval.model import PremiseRetriever

        return PremiseRetriever.load(path, **self.config.get_model_config())

    def data_module(self, dataset_dir: Path, model):
        from leanloop.retrieval.datamodule import RetrievalDataModule

        config = self.config
        module = RetrievalDataModule(
            dataset_dir,
            model.tokenizer,
            scheme=config.split_scheme,
            num_negatives=config.num_negatives,
            num_in_file_negatives=config.num_in_file_negatives,
            num_hard_negatives=config.num_hard_negatives,
            naming_examples=config.naming_examples,
            batch_size=config.batch_size,
            eval_batch_size=config.eval_batch_size,
            max_seq_len=min(config.data_max_seq_len or config.max_seq_len, model.max_length),
            num_workers=config.num_workers,
            seed=config.seed,
        )
        module.setup("fit")
        return module

    def train_step(self, step: CurriculumStep) -> None:
        import lightning.pytorch as pl
        import torch

        from leanloop.atomic import replace_directory
        from leanloop.retrieval.model import CHECKPOINT_FILE

        config = self.config
        pl.seed_everything(config.seed, verbose=False)
        model = self.load_model(self._start)
        log.info("repository %s: starting from %s", step.repository, self._start)
        data = self.data_module(step.dataset_dir, model)
        if not data.train_steps:
            raise LeanloopError(
                f"no training examples in {step.dataset_dir}/{config.split_scheme}/train.json: "
                "no tactic step uses a premise of the corpus",
                hint="add repositories with traced tactics that use premises",
            )
        work_dir = step.checkpoint_dir.with_name(f".{step.checkpoint_dir.name}.work")
        shutil.rmtree(work_dir, ignore_errors=True)
        trainer = self._lightning_trainer(work_dir, has_val=bool(data.val_steps))
        model.train()  # pretrained encoders load in eval mode (dropout off)
        trainer.fit(model, datamodule=data)

        best = self._best_checkpoint(trainer)
        if best is not None:
            state = torch.load(best, map_location="cpu", weights_only=False)["state_dict"]
            model.load_state_dict(state)
        report: dict[str, Any] = {
            "repository": str(step.repository),
            "url": step.repository.url,
            "commit": step.repository.commit,
            "started_from": self._start,
            "train_steps": len(data.train_steps),
            "naming_examples": len(data.naming),
            "val_steps": len(data.val_steps),
            "corpus_premises": len(data.corpus),
            "best_checkpoint_score": _score_of(trainer),
            "fisher_samples": 0,
        }
        if config.get_lambda_value() > 0:
            report["fisher_samples"] = self._consolidate(model, data, step.repository)
        report["ewc_repositories"] = model.ewc.repositories

        with replace_directory(
            step.checkpoint_dir, may_replace=lambda p: (p / CHECKPOINT_FILE).is_file()
        ) as staging:
            model.save_retriever(staging, trainer)
            history = _read_csv_log(work_dir / "logs" / "metrics.csv")
            if (work_dir / "logs" / "metrics.csv").is_file():
                shutil.copy(work_dir / "logs" / "metrics.csv", staging / "metrics.csv")
            from leanloop.trainer.plots import plot_curves

            plot_curves(history, staging / "training_curves.png", title=str(step.repository))
            (staging / "metrics.json").write_text(json.dumps(report, indent=2) + "\n")
        shutil.rmtree(work_dir, ignore_errors=True)
        self.reports.append(report)
        self._start = str(step.checkpoint_dir)

    @staticmethod
    def _best_checkpoint(trainer) -> str | None:
        callback = getattr(trainer, "checkpoint_callback", None)
        path = getattr(callback, "best_model_path", "") if callback is not None else ""
        return path or None

    def _consolidate(self, model, data, repository: Repository) -> int:
        """The Fisher of ``repository``'s training examples (all of them when the export holds
        none of its own), folded into the model's EWC state."""
        import random

        steps = [s for s in data.train_steps if s.belongs_to(repository.url, repository.commit)]
        if not steps:
            log.warning("%s has no training steps of its own: Fisher on all of them", repository)
            steps = data.train_steps
        examples = data.training_set(steps, seed=self.config.seed + 1)
        order = list(range(len(examples)))
        random.Random(self.config.seed).shuffle(order)
        collate = data.training_collator()
        batches = (collate([examples[i]]) for i in order)
        device = self._hardware().device
        model.to(device)
        count = model.consolidate(batches, self.config.fisher_max_samples)
        model.to("cpu")
        return count

    # -- evaluation ------------------------------------------------------------------------------

    def evaluate(
        self,
        dataset_path: str | Path | None = None,
        *,
        split: str = "test",
        checkpoint: str | Path | None = None,
    ) -> dict[str, float]:
        """R@1, R@10 and MRR (fractions) of the newest checkpoint (or ``checkpoint``) on
        ``split`` of ``dataset_path`` (default: the data of the last ``train``); also written to
        ``evaluation-<scheme>-<split>.json`` in the checkpoint directory."""
        from leanloop.retrieval.corpus import Corpus
        from leanloop.retrieval.examples import load_all_splits, retrieval_steps, split_file
        from leanloop.retrieval.index import PremiseIndex, evaluate_index

        dataset = dataset_path if dataset_path is not None else self.data_path
        if dataset is None:
            raise LeanloopError(
                "no dataset to evaluate on: dataset_path was not given and train() has not run",
                hint="pass dataset_path (a LeanDojo-format export)",
            )
        scheme = self.config.split_scheme
        split_file(dataset, scheme, split)
        chosen = Path(checkpoint) if checkpoint is not None else latest_checkpoint(self.output_dir)
        if chosen is None or not chosen.exists():
            raise LeanloopError(
                f"no trained retriever in {checkpoint or self.output_dir}",
                hint="run train() first, or pass checkpoint=<a checkpoint directory>",
            )
        theorems = load_all_splits(dataset, scheme)
        corpus = Corpus.from_dataset(dataset, [t for part in theorems.values() for t in part])
        steps = retrieval_steps(theorems[split], corpus)
        if not steps:
            raise LeanloopError(
                f"{dataset}/{scheme}/{split}.json has no tactic step using a corpus premise",
                hint="evaluate on another split or a larger export",
            )
        model = self.load_model(chosen).to(self._hardware().device)
        model.freeze()
        index = PremiseIndex.build(model, corpus, batch_size=self.config.eval_batch_size)
        metrics = evaluate_index(index, steps, k=self.config.num_retrieved)
        result = metrics.as_dict()
        log.info("%s on %s/%s: %s", chosen.name, scheme, split, metrics)
        if chosen.is_dir():
            (chosen / f"evaluation-{scheme}-{split}.json").write_text(
                json.dumps({"dataset": str(dataset), **result}, indent=2) + "\n"
            )
        return result


def _score_of(trainer) -> float | None:
    callback = getattr(trainer, "checkpoint_callback", None)
    score = getattr(callback, "best_model_score", None) if callback is not None else None
    return None if score is None else float(score)


def _read_csv_log(path: Path) -> list[dict[str, float]]:
    """Rows of a Lightning ``metrics.csv`` as dicts holding only the values they have."""
    if not path.is_file():
        return []
    rows = []
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            entry: dict[str, float] = {}
            for key, value in row.items():
                if value not in (None, ""):
                    try:
                        entry[key] = float(value)
                    except ValueError:
                        continue
            if "step" in entry:
                rows.append(entry)
    return rows
