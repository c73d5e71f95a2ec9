"""What the SFT and GRPO trainers share: building their configuration, loading the model
through ``resolve_model``, LoRA, TRL arguments fitted to the hardware, reading the exported splits,
and saving each repository's checkpoint (full model or adapter, tokenizer, training curves)."""

from __future__ import annotations

import copy
import gc
import json
import logging
import tempfile
import time
from abc import abstractmethod
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar, Self

from pydantic import BaseModel, Field

from leanloop.atomic import replace_directory
from leanloop.data import open_dataset
from leanloop.data.prompt import PromptExample
from leanloop.errors import LeanloopError
from leanloop.ml import distributed
from leanloop.ml.device import Hardware, detect_hardware
from leanloop.ml.generation import CHECKPOINT_INFO
from leanloop.trainer.base import CurriculumStep, CurriculumTrainer
from leanloop.trainer.config import config_field, trainer_arguments
from leanloop.trainer.hf_config import HFTrainerConfig
from leanloop.trainer.plots import plot_curves
from leanloop.words import plural

log = logging.getLogger(__name__)

#: Files written into every checkpoint directory besides the model, the tokenizer and
#: ``CHECKPOINT_INFO``.
CURVES_PNG = "training_curves.png"
LOG_HISTORY = "log_history.json"


class StepReport(BaseModel):
    """What training on one repository produced."""

    index: int = Field(description="The repository's position in the curriculum.")
    repository: str = Field(description="The repository trained on.")
    checkpoint: Path = Field(description="Where its checkpoint was saved.")
    train_examples: int = Field(description="Training examples (merged export).")
    val_examples: int = Field(description="Validation examples evaluated on.")
    global_steps: int = Field(description="Optimizer steps taken.")
    train_seconds: float = Field(description="Time spent training.")
    train_tokens: int | None = Field(default=None, description="Tokens read (None: not counted).")
    metrics: dict[str, float] = Field(
        default_factory=dict, description="Evaluation and trainer-specific figures."
    )


class HFCurriculumTrainer(CurriculumTrainer):
    """A Hugging Face causal LM trained repository by repository with a TRL trainer.

    The model is loaded once, in the constructor; each repository continues from the model
    trained so far (the same object, or the same LoRA adapter). Subclasses say how to turn the
    exported theorems into rows (``example_row``) and how to build the TRL trainer
    (``build_trl_trainer``).
    """

    config_class: ClassVar[type[HFTrainerConfig]] = HFTrainerConfig
    kind: ClassVar[str] = "hf"
    config: HFTrainerConfig

    def __init__(
        self,
        model_name: str,
        output_dir: str | Path = "outputs",
        epochs_per_repo: float = 1,
        batch_size: int = 1,
        lr: float = 2e-5,
        lora_config=None,
        *,
        hardware: Hardware | None = None,
        **options: Any,
    ) -> None:
        lora_dict = lora_config if isinstance(lora_config, Mapping) else options.pop("lora", None)
        self.config = self.config_class.from_dict(
            {
                "model_name": str(model_name),
                "output_dir": output_dir,
                "epochs_per_repo": epochs_per_repo,
                "batch_size": batch_size,
                "lr": lr,
                "lora": dict(lora_dict) if lora_dict is not None else None,
                **options,
            },
            source=type(self).__name__,
        )
        self.hardware = hardware or detect_hardware()
        self.lora_config = self._lora_config(lora_config)
        self.check_arguments()
        self.reports: list[StepReport] = []
        self._load_model()

    @classmethod
    def from_config(
        cls, source: str | Path | Mapping[str, Any] | HFTrainerConfig, **kwargs: Any
    ) -> Self:
        """A trainer from a YAML/JSON file, a mapping of fields or a configuration.

        ``kwargs`` naming fields override the file; the others (``reward_func``, ``lora_config``,
        ``hardware``) go to the constructor.

        Args:
            source: A YAML or JSON file, a mapping of the configuration's fields, or a
                configuration.
            **kwargs: Fields that override ``source``'s, and constructor arguments that are
                not fields.

        Returns:
            The trainer, its model loaded.

        Raises:
            DataFormatError: The file cannot be read or a field is wrong (the message names
                the file and the field).
        """
        return cls(**trainer_arguments(cls.config_class, source, kwargs))

    # -- LeanDojo-v2 attribute names --------------------------------------------------------

    model_name = config_field("model_name")
    output_dir = config_field("output_dir")
    epochs_per_repo = config_field("epochs_per_repo")
    batch_size = config_field("batch_size")
    lr = config_field("lr")
    prompt_format = config_field("prompt_format")

    @property
    def use_lora(self) -> bool:
        """Whether a LoRA adapter is trained (not the whole model)."""
        return self.is_adapter

    # -- model --------------------------------------------------------------------------------

    def check_arguments(self) -> None:
        """Reject arguments that do not fit together before the model is loaded (subclasses
        add checks; the configuration checks its own fields)."""

    def _lora_config(self, lora_config):
        if lora_config is None and self.config.lora is None:
            return None
        from peft import LoraConfig, PeftConfig

        if isinstance(lora_config, PeftConfig):
            return copy.deepcopy(lora_config)  # PEFT fills fields in; leave the caller's alone
        if lora_config is not None and not isinstance(lora_config, Mapping):
            raise LeanloopError(
                f"lora_config must be a peft.LoraConfig, not {type(lora_config).__name__}",
                hint="from peft import LoraConfig; lora_config=LoraConfig(r=16, lora_alpha=32)",
            )
        settings = dict(self.config.lora or {})
        settings.setdefault("task_type", "CAUSAL_LM")
        try:
            return LoraConfig(**settings)
        except (TypeError, ValueError) as exc:
            raise LeanloopError(f"option 'lora': {exc}") from exc

    def _load_model(self) -> None:
        from leanloop.ml.causal import load_causal_lm

        loaded = load_causal_lm(
            self.config.model_name, dtype=self.hardware.torch_dtype, trainable=True
        )
        self.model = loaded.model
        self.tokenizer = loaded.tokenizer
        self.base_model = loaded.base_model
        self.is_adapter = loaded.adapter
        if loaded.adapter:
            if self.lora_config is not None:
                log.warning(
                    "%s is a LoRA adapter: training continues it; lora_config is not used",
                    self.config.model_name,
                )
        elif self.lora_config is not None:
            self.model = apply_lora(self.model, self.lora_config, seed=self.config.seed)
            self.is_adapter = True

    # -- TRL arguments ------------------------------------------------------------------------

    def trl_arguments(self, work_dir: str | Path) -> dict[str, Any]:
        """Keyword arguments for TRL's config: the configuration, fitted to ``self.hardware``.

        TRL turns bf16 and gradient checkpointing on by default; here they follow the hardware
        unless the configuration says otherwise.
        """
        o = self.config
        hw = self.hardware
        args: dict[str, Any] = {
            "output_dir": str(work_dir),
            "num_train_epochs": o.epochs_per_repo,
            "max_steps": o.max_steps or -1,
            "per_device_train_batch_size": o.batch_size,
            "per_device_eval_batch_size": o.batch_size,
            "gradient_accumulation_steps": o.gradient_accumulation_steps,
            "learning_rate": o.lr,
            "warmup_steps": o.warmup_steps,
            "lr_scheduler_type": o.lr_scheduler_type,
            "weight_decay": o.weight_decay,
            "max_grad_norm": o.max_grad_norm,
            "logging_steps": o.logging_steps,
            "logging_first_step": True,
            "seed": o.seed,
            "bf16": hw.bf16 if o.bf16 is None else o.bf16,
            "fp16": False,
            _checkpointing_field(): (
                hw.gradient_checkpointing
                if o.gradient_checkpointing is None
                else o.gradient_checkpointing
            ),
            "use_cpu": hw.device == "cpu",
            "save_strategy": "no",
            "eval_strategy": "no",
            "report_to": "none",
            "disable_tqdm": not o.progress_bars,
            "dataloader_num_workers": 0,
        }
        args.update(o.trl_args)
        return args

    # -- data ---------------------------------------------------------------------------------

    @abstractmethod
    def example_row(self, example: PromptExample) -> dict[str, Any]:
        """The dataset row of one example."""

    def read_examples(
        self, path: Path, *, required: bool, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """Rows for every usable step of a LeanDojo split file (``sorry`` steps skipped)."""
        if not path.is_file():
            if required:
                raise LeanloopError(
                    f"missing data split file {path}",
                    hint="data_path must hold an export of the database "
                    "(random/train.json, random/val.json)",
                )
            return []
        rows: list[dict[str, Any]] = []
        theorems = open_dataset(path).iter_theorems()
        for example in self.config.prompt_format.examples(theorems):
            rows.append(self.example_row(example))
            if limit is not None and len(rows) >= limit:
                break
        return rows

    @abstractmethod
    def build_trl_trainer(self, train_dataset, eval_dataset, work_dir: Path):
        """The TRL trainer for one repository, training ``self.model``."""

    # -- one repository -------------------------------------------------------------------------

    def train_step(self, step: CurriculumStep) -> None:
        from datasets import Dataset

        o = self.config
        train_file = Path(step.dataset_dir) / "random" / "train.json"
        val_file = Path(step.dataset_dir) / "random" / "val.json"
        train_rows = self.read_examples(train_file, required=True)
        if not train_rows:
            names = ", ".join(str(r) for r in step.seen)
            raise LeanloopError(
                f"no training examples in {train_file}: the theorems of {names} in the train "
                "split have no traced tactics other than sorry",
                hint="add repositories with traced proofs before training",
            )
        val_rows = self.read_examples(val_file, required=False, limit=o.eval_max_examples)
        if not o.evaluate:
            val_rows = []
        log.info(
            "%s: repository %d (%s): %d training and %d validation examples",
            type(self).__name__,
            step.index + 1,
            step.repository,
            len(train_rows),
            len(val_rows),
        )
        self.output_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".trl-", dir=self.output_dir) as work_dir:
            trl_trainer = self.build_trl_trainer(
                Dataset.from_list(train_rows),
                Dataset.from_list(val_rows) if val_rows else None,
                Path(work_dir),
            )
            started = time.perf_counter()
            if o.max_seconds is not None:
                trl_trainer.add_callback(time_limit(o.max_seconds))
            evaluation = self.evaluation_description(len(val_rows)) if val_rows else ""
            if o.progress_bars:
                from transformers import ProgressCallback

                if trl_trainer.pop_callback(ProgressCallback) is not None:
                    trl_trainer.add_callback(labelled_progress(str(step.repository), evaluation))
            else:
                from transformers import PrinterCallback

                trl_trainer.remove_callback(PrinterCallback)  # it prints every log line
                if val_rows:
                    trl_trainer.add_callback(evaluation_lines(self.evaluation_unit, log.info))
            trl_trainer.train()
            seconds = time.perf_counter() - started
            metrics: dict[str, float] = {}
            if val_rows:
                log.info("%s: %s", type(self).__name__, evaluation)
                evaluation_started = time.perf_counter()
                metrics.update(
                    {k: float(v) for k, v in trl_trainer.evaluate().items() if _is_number(v)}
                )
                log.info(
                    "%s: evaluation done in %.0f s",
                    type(self).__name__,
                    time.perf_counter() - evaluation_started,
                )
            self.model = trl_trainer.model
            history = list(trl_trainer.state.log_history)
            report = StepReport(
                index=step.index,
                repository=str(step.repository),
                checkpoint=step.checkpoint_dir,
                train_examples=len(train_rows),
                val_examples=len(val_rows),
                global_steps=int(trl_trainer.state.global_step),
                train_seconds=seconds,
                train_tokens=self.trained_tokens(trl_trainer),
                metrics=metrics,
            )
            self.after_training(trl_trainer, step, report)
            del trl_trainer
            gc.collect()
        self.save_checkpoint(step.checkpoint_dir, history=history, step=step, report=report)
        self.reports.append(report)

    #: What one step of the evaluation after training covers (in its progress lines).
    evaluation_unit: ClassVar[str] = "batch"

    def evaluation_description(self, count: int) -> str:
        """What the evaluation after training does, in words, for ``count`` validation rows
        (it starts with "evaluating")."""
        return (
            f"evaluating {plural(count, 'example')} of the val split: the loss and token "
            "accuracy of the recorded tactic"
        )

    def after_training(self, trl_trainer, step: CurriculumStep, report: StepReport) -> None:
        """Hook run after training and evaluation, before the checkpoint is saved."""

    def trained_tokens(self, trl_trainer) -> int | None:
        """How many tokens the training read (None when the trainer does not count them)."""
        return None

    # -- checkpoints --------------------------------------------------------------------------

    def save_checkpoint(
        self,
        directory: str | Path,
        *,
        history: list[dict[str, Any]] | None = None,
        step: CurriculumStep | None = None,
        report: StepReport | None = None,
    ) -> Path:
        """Write the model (or its LoRA adapter), the tokenizer, the log history and the training
        curves to ``directory``; it appears complete or not at all. Among several processes the
        main one writes it (the model is the same on all) and the others wait for it."""
        directory = Path(directory)
        processes = distributed.current()
        if not processes.is_main:
            processes.barrier()
            return directory
        history = history or []
        with replace_directory(
            directory, may_replace=lambda path: (path / CHECKPOINT_INFO).is_file()
        ) as staging:
            self.model.save_pretrained(staging)
            if self.is_adapter:
                _name_adapter_base(staging, self.base_model)
            self.tokenizer.save_pretrained(staging)
            (staging / LOG_HISTORY).write_text(json.dumps(history, indent=1, default=str))
            if self.config.plot_curves:
                title = f"{self.kind.upper()} {step.repository}" if step else self.kind.upper()
                plot_curves(history, staging / CURVES_PNG, title=title)
            info = {
                "trainer": self.kind,
                "base_model": self.base_model,
                "adapter": self.is_adapter,
                "created": datetime.now(UTC).isoformat(timespec="seconds"),
                "config": self.config.to_dict(),
            }
            if step is not None:
                info["repository"] = step.repository.model_dump(mode="json")
                info["seen"] = [r.model_dump(mode="json") for r in step.seen]
            if report is not None:
                info["report"] = report.model_dump(mode="json")
            (staging / CHECKPOINT_INFO).write_text(json.dumps(info, indent=1))
        log.info("saved %s", directory)
        processes.barrier()
        return directory


def time_limit(seconds: float):
    """A transformers callback stopping training after the first optimizer step that ends
    ``seconds`` after training began."""
    from transformers import TrainerCallback

    class TimeLimit(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            self.deadline = time.perf_counter() + seconds

        def on_step_end(self, args, state, control, **kwargs):
            if time.perf_counter() >= self.deadline:
                control.should_training_stop = True

    return TimeLimit()


def labelled_progress(training: str, evaluation: str):
    """transformers' progress bars (a ``ProgressCallback``) with what each one counts written
    on it: the training steps on ``training``, the evaluation after it as ``evaluation``
    says."""
    from transformers import ProgressCallback

    class LabelledProgress(ProgressCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            super().on_train_begin(args, state, control, **kwargs)
            if self.training_bar is not None:
                self.training_bar.set_description(f"training on {training}")

        def on_prediction_step(self, args, state, control, eval_dataloader=None, **kwargs):
            fresh = self.prediction_bar is None
            super().on_prediction_step(
                args, state, control, eval_dataloader=eval_dataloader, **kwargs
            )
            if fresh and self.prediction_bar is not None and evaluation:
                self.prediction_bar.set_description(evaluation)

    return LabelledProgress()


def evaluation_lines(unit: str, say: Callable[[str], None], every_seconds: float = 10.0):
    """A transformers callback saying how far an evaluation has come: after its first
    ``unit``, then at most every ``every_seconds`` seconds, and after its last."""
    from transformers import TrainerCallback

    class EvaluationLines(TrainerCallback):
        def __init__(self) -> None:
            self.done = 0
            self.started = self.said = time.perf_counter()

        def on_train_end(self, args, state, control, **kwargs):
            self.started = time.perf_counter()  # the evaluation after training starts

        def on_prediction_step(self, args, state, control, eval_dataloader=None, **kwargs):
            if not state.is_world_process_zero:
                return
            now = time.perf_counter()
            self.done += 1
            total = len(eval_dataloader) if eval_dataloader is not None else None
            last = total is not None and self.done >= total
            if self.done == 1 or last or now - self.said >= every_seconds:
                self.said = now
                counted = (
                    f"{self.done} of {plural(total, unit)}" if total else plural(self.done, unit)
                )
                say(f"evaluated {counted} ({now - self.started:.0f} s)")

        def on_evaluate(self, args, state, control, **kwargs):
            self.done = 0
            self.started = time.perf_counter()

    return EvaluationLines()


def apply_lora(model, lora_config, *, seed: int | None = None):
    """``model`` with a fresh LoRA adapter (``lora_config`` is a ``peft.LoraConfig``)."""
    from peft import get_peft_model

    if seed is not None:
        from transformers import set_seed

        set_seed(seed)  # the adapter's initial weights are random
    try:
        return get_peft_model(model, copy.deepcopy(lora_config))
    except ValueError as exc:
        raise LeanloopError(
            f"cannot apply the LoRA configuration: {str(exc).splitlines()[0]}",
            hint="check target_modules against the model's module names",
        ) from exc


def _name_adapter_base(directory: Path, base_model: str) -> None:
    """Point a saved adapter at the base model by the name the user gave (a packaged or hub name
    stays a name; PEFT would write the resolved directory, which may be a cache path)."""
    from leanloop.ml.causal import ADAPTER_CONFIG

    path = directory / ADAPTER_CONFIG
    config = json.loads(path.read_text())
    config["base_model_name_or_path"] = base_model
    path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def _checkpointing_field() -> str:
    """transformers 5.x renamed ``gradient_checkpointing`` to ``activation_checkpointing``."""
    import dataclasses

    from transformers import TrainingArguments

    names = {f.name for f in dataclasses.fields(TrainingArguments)}
    return (
        "activation_checkpointing"
        if "activation_checkpointing" in names
        else ("gradient_checkpointing")
    )


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
