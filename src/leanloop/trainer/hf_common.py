"""What the SFT and GRPO trainers share: building their configuration, loading the model
through ``resolve_model`` in the precision that trains (float32 master weights, QLoRA over a
quantized base), LoRA, TRL arguments fitted to the hardware, reading the exported splits into
prompts (with retrieved premises, fitted to the token budget), step checkpoints that a run
started again resumes from, and saving each repository's checkpoint (full model or adapter,
tokenizer, training curves) through the TRL trainer, which gathers sharded weights."""

from __future__ import annotations

import dataclasses
import gc
import json
import logging
import shutil
import time
from abc import abstractmethod
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar, Self

from pydantic import BaseModel, Field

from leanloop.data import open_dataset
from leanloop.data.prompt import PromptExample
from leanloop.data.records import Theorem, TracedTactic
from leanloop.errors import LeanloopError
from leanloop.ml import distributed
from leanloop.ml.device import Hardware, detect_hardware
from leanloop.ml.generation import CHECKPOINT_INFO
from leanloop.ml.loading import LoadOptions, upcast_trainable
from leanloop.trainer.base import CurriculumStep, CurriculumTrainer
from leanloop.trainer.config import config_field, trainer_arguments
from leanloop.trainer.hf_callbacks import evaluation_lines, labelled_progress, time_limit
from leanloop.trainer.hf_checkpoint import (
    CURVES_PNG,
    LOG_HISTORY,
    last_step_checkpoint,
    step_number,
    write_checkpoint,
)
from leanloop.trainer.hf_config import HFTrainerConfig
from leanloop.trainer.hf_data import PremiseSource, traced_steps, with_premises
from leanloop.trainer.hf_model import (
    apply_lora,
    checkpointing_field,
    lora_config_of,
    sharded_engine,
    training_dtype,
)
from leanloop.words import plural

log = logging.getLogger(__name__)

__all__ = [
    "CURVES_PNG",
    "LOG_HISTORY",
    "HFCurriculumTrainer",
    "StepReport",
    "apply_lora",
    "evaluation_lines",
    "labelled_progress",
    "time_limit",
]


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
    resumed_from_step: int | None = Field(
        default=None,
        description="The step checkpoint training resumed from (None: it started afresh).",
    )
    metrics: dict[str, float] = Field(
        default_factory=dict, description="Evaluation and trainer-specific figures."
    )


class HFCurriculumTrainer(CurriculumTrainer):
    """A Hugging Face causal LM trained repository by repository with a TRL trainer.

    The model is loaded once, in the constructor; each repository continues from the model
    trained so far (the same object, or the same LoRA adapter). Subclasses say how to turn the
    exported theorems into rows (``example_row``), how many tokens a prompt may take
    (``prompt_budget``) and how to build the TRL trainer (``build_trl_trainer``).

    Precision: weights that train are float32 (master weights) and bf16 autocast computes
    where the GPU has it; a LoRA adapter's frozen base loads in bf16 there, its adapter stays
    float32; ``quantization`` loads the base in 4 or 8 bits for QLoRA. Step checkpoints
    (``save_steps``) go to ``output_dir/.<checkpoint>.work``, which a failure leaves in place
    and the next ``train`` resumes from; finished repositories are skipped (see
    ``CurriculumTrainer``).
    """

    config_class: ClassVar[type[HFTrainerConfig]] = HFTrainerConfig
    kind: ClassVar[str] = "hf"
    config: HFTrainerConfig
    model: Any  # the model trained (a PEFT model when an adapter is)
    tokenizer: Any
    base_model: str  # the full model underneath, by the name the user gave
    is_adapter: bool

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
        callbacks: Sequence[Any] = (),
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
        self.callbacks = list(callbacks)
        self.lora_config = self._lora_config(lora_config)
        self.check_arguments()
        self.reports: list[StepReport] = []
        self._fitting = {"examples": 0, "cut": 0, "dropped": 0}
        self._train_fitting = dict(self._fitting)
        self._load_model()

    @classmethod
    def from_config(
        cls, source: str | Path | Mapping[str, Any] | HFTrainerConfig, **kwargs: Any
    ) -> Self:
        """A trainer from a YAML/JSON file, a mapping of fields or a configuration.

        ``kwargs`` naming fields override the file; the others (``reward_func``, ``lora_config``,
        ``hardware``, ``callbacks``) go to the constructor.

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
        return lora_config_of(lora_config, self.config.lora)

    def _load_model(self) -> None:
        from leanloop.ml.models import require_model

        require_model(self.config.model_name, type(self).__name__, "model_name")  # at once
        self._load(self.config.model_name)
        if self.is_adapter and self.lora_config is not None:
            log.warning(
                "%s is a LoRA adapter: training continues it; lora_config is not used",
                self.config.model_name,
            )
        elif not self.is_adapter and self.lora_config is not None:
            self.model = apply_lora(self.model, self.lora_config, seed=self.config.seed)
            self.is_adapter = True

    def _load(self, source: str | Path, *, resumed: bool = False) -> None:
        """Load ``source`` for training in the precision that trains (see the class)."""
        from leanloop.ml.causal import adapter_base, load_causal_lm
        from leanloop.ml.models import resolve_model

        name = type(self).__name__
        options = LoadOptions.of(self.config)
        options.check(self.hardware, where=name, processes=distributed.current().world_size)
        resolved = resolve_model(source)
        adapter = Path(resolved).is_dir() and adapter_base(resolved) is not None
        trains_adapter = adapter or self.lora_config is not None
        if options.quantization is not None and not trains_adapter:
            raise LeanloopError(
                f"{name}: field 'quantization' is {options.quantization!r}, but a quantized "
                "model trains a LoRA adapter only, and no lora is given",
                hint="give lora (QLoRA: 4bit + LoRA), or leave quantization unset",
            )
        compute = self.hardware.torch_dtype
        dtype = training_dtype(
            options, compute, trains_adapter=trains_adapter, sharded=self._sharded, where=name
        )
        loaded = load_causal_lm(
            source,
            dtype=dtype,
            trainable=True,
            options=options,
            compute_dtype=compute,
            gradient_checkpointing=self._gradient_checkpointing,
        )
        self.model = loaded.model
        self.tokenizer = loaded.tokenizer
        if not resumed:
            self.base_model = loaded.base_model
        self.is_adapter = loaded.adapter

    @property
    def _sharded(self) -> bool:
        return sharded_engine(self.config.trl_args)

    @property
    def _gradient_checkpointing(self) -> bool:
        o = self.config
        if o.gradient_checkpointing is not None:
            return o.gradient_checkpointing
        return self.hardware.gradient_checkpointing

    # -- TRL arguments ------------------------------------------------------------------------

    def trl_arguments(self, work_dir: str | Path) -> dict[str, Any]:
        """Keyword arguments for TRL's config: the configuration, fitted to ``self.hardware``.

        TRL turns bf16 and gradient checkpointing on by default; here they follow the hardware
        unless the configuration says otherwise. Step checkpoints go to ``work_dir`` every
        ``save_steps`` steps (the newest kept).
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
            checkpointing_field(): self._gradient_checkpointing,
            "use_cpu": hw.device == "cpu",
            "save_strategy": "steps" if o.save_steps else "no",
            "save_steps": o.save_steps or 500,
            "save_total_limit": 1,
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

    def prompt_budget(self) -> tuple[int | None, bool]:
        """How many tokens an example's prompt may take, and whether its completion counts
        towards them (None: no limit)."""
        return None, False

    def premise_source(self, dataset_dir: Path) -> PremiseSource | None:
        """Where the prompts' premises come from: ``config.retriever`` over the corpus of the
        export (None without a retriever)."""
        if self.config.retriever is None:
            return None
        processes = distributed.current()
        device = "cpu" if self.hardware.device == "cpu" else f"cuda:{processes.local_rank}"
        return PremiseSource(
            self.config.retriever, dataset_dir, self.config.num_retrieved, device=device
        )

    def build_example(
        self, theorem: Theorem, step: TracedTactic, premises: Sequence[str] = ()
    ) -> PromptExample | None:
        """The example of a step with its premises, its prompt fitted to ``prompt_budget``
        inside the user turn (None: a ``sorry`` step, or one that does not fit even so)."""
        fmt = self.config.prompt_format
        example = fmt.example(theorem, step, premises)
        budget, with_completion = self.prompt_budget()
        if example is None or budget is None:
            return example
        fitted = fmt.fit_prompt(
            step.state_before,
            premises,
            tokenizer=self.tokenizer,
            max_tokens=budget,
            completion=example.completion if with_completion else None,
        )
        self._fitting["examples"] += 1
        if fitted is None:
            self._fitting["dropped"] += 1
            return None
        self._fitting["cut"] += fitted.cut
        return dataclasses.replace(example, prompt=fitted.messages)

    def read_examples(
        self,
        path: Path,
        *,
        required: bool,
        limit: int | None = None,
        premises: PremiseSource | None = None,
    ) -> list[dict[str, Any]]:
        """Rows for every usable step of a LeanDojo split file (``sorry`` steps skipped), each
        prompt with the premises ``premises`` retrieves for its state."""
        self._fitting = {"examples": 0, "cut": 0, "dropped": 0}
        if not path.is_file():
            if required:
                raise LeanloopError(
                    f"missing data split file {path}",
                    hint="data_path must hold an export of the database "
                    "(random/train.json, random/val.json)",
                )
            return []
        rows: list[dict[str, Any]] = []
        steps = (
            (theorem, step)
            for theorem, step in traced_steps(open_dataset(path).iter_theorems())
            if not step.is_sorry
        )
        for theorem, step, found in with_premises(steps, premises):
            example = self.build_example(theorem, step, found)
            if example is None:
                continue
            rows.append(self.example_row(example))
            if limit is not None and len(rows) >= limit:
                break
        return rows

    @abstractmethod
    def build_trl_trainer(self, train_dataset, eval_dataset, work_dir: Path):
        """The TRL trainer for one repository, training ``self.model``."""

    # -- one repository -------------------------------------------------------------------------

    def work_dir(self, step: CurriculumStep) -> Path:
        """Where the TRL trainer of ``step`` writes its step checkpoints: beside the
        repository's checkpoint, removed once that is saved, kept when training fails."""
        return step.checkpoint_dir.with_name(f".{step.checkpoint_dir.name}.work")

    def read_step_data(self, step: CurriculumStep) -> tuple[list[dict], list[dict]]:
        """The training and validation rows of ``step``'s export."""
        o = self.config
        train_file = Path(step.dataset_dir) / "random" / "train.json"
        val_file = Path(step.dataset_dir) / "random" / "val.json"
        premises = self.premise_source(Path(step.dataset_dir))
        train_rows = self.read_examples(train_file, required=True, premises=premises)
        fitting = dict(self._fitting)
        if not train_rows:
            if fitting["dropped"]:
                budget, _ = self.prompt_budget()
                raise LeanloopError(
                    f"no training examples left in {train_file}: in all "
                    f"{plural(fitting['dropped'], 'example')} the template, the system prompt "
                    f"and the tactic alone take more than {budget} tokens",
                    hint="raise max_length",
                )
            names = ", ".join(str(r) for r in step.seen)
            raise LeanloopError(
                f"no training examples in {train_file}: the theorems of {names} in the train "
                "split have no traced tactics other than sorry",
                hint="add repositories with traced proofs before training",
            )
        if fitting["cut"] or fitting["dropped"]:
            budget, _ = self.prompt_budget()
            log.info(
                "%s: %d of %d prompts cut to %d tokens inside the user turn, %d examples dropped",
                type(self).__name__,
                fitting["cut"],
                fitting["examples"],
                budget,
                fitting["dropped"],
            )
        val_rows: list[dict] = []
        if o.evaluate:
            val_rows = self.read_examples(
                val_file, required=False, limit=o.eval_max_examples, premises=premises
            )
        self._train_fitting = fitting
        return train_rows, val_rows

    def train_step(self, step: CurriculumStep) -> None:
        from datasets import Dataset

        train_rows, val_rows = self.read_step_data(step)
        log.info(
            "%s: repository %d (%s): %d training and %d validation examples",
            type(self).__name__,
            step.index + 1,
            step.repository,
            len(train_rows),
            len(val_rows),
        )
        processes = distributed.current()
        work_dir = self.work_dir(step)
        resume = last_step_checkpoint(work_dir) if self.resumes() else None
        if processes.is_main:
            if resume is None:
                shutil.rmtree(work_dir, ignore_errors=True)
            work_dir.mkdir(parents=True, exist_ok=True)
        processes.barrier()
        try:
            trl_trainer = self.build_trl_trainer(
                Dataset.from_list(train_rows),
                Dataset.from_list(val_rows) if val_rows else None,
                work_dir,
            )
            upcast_trainable(trl_trainer.model)  # float32 master weights (TRL casts QLoRA's)
            self._add_callbacks(trl_trainer, step, len(val_rows))
            if resume is not None:
                log.info("%s: resuming %s from %s", type(self).__name__, step.repository, resume)
            started = time.perf_counter()
            trl_trainer.train(resume_from_checkpoint=str(resume) if resume else None)
        except BaseException:
            if processes.is_main and last_step_checkpoint(work_dir) is None:
                shutil.rmtree(work_dir, ignore_errors=True)  # nothing in it to resume from
            raise
        seconds = time.perf_counter() - started
        metrics = self._evaluate(trl_trainer, len(val_rows)) if val_rows else {}
        self.model = trl_trainer.model
        report = StepReport(
            index=step.index,
            repository=str(step.repository),
            checkpoint=step.checkpoint_dir,
            train_examples=len(train_rows),
            val_examples=len(val_rows),
            global_steps=int(trl_trainer.state.global_step),
            train_seconds=seconds,
            train_tokens=self.trained_tokens(trl_trainer),
            resumed_from_step=step_number(resume) if resume else None,
            metrics=metrics,
        )
        report.metrics.update(
            {f"prompts_{k}": float(v) for k, v in self._train_fitting.items() if k != "examples"}
        )
        self.after_training(trl_trainer, step, report)
        history = list(trl_trainer.state.log_history)
        self.save_checkpoint(
            step.checkpoint_dir, history=history, step=step, report=report, trl_trainer=trl_trainer
        )
        del trl_trainer
        gc.collect()
        if processes.is_main:
            shutil.rmtree(work_dir, ignore_errors=True)
        self.reports.append(report)

    def _add_callbacks(self, trl_trainer, step: CurriculumStep, val_count: int) -> None:
        o = self.config
        if o.max_seconds is not None:
            trl_trainer.add_callback(time_limit(o.max_seconds))
        for callback in self.callbacks:
            trl_trainer.add_callback(callback)
        if o.progress_bars:
            from transformers import ProgressCallback

            evaluation = self.evaluation_description(val_count) if val_count else ""
            if trl_trainer.pop_callback(ProgressCallback) is not None:
                trl_trainer.add_callback(labelled_progress(str(step.repository), evaluation))
        else:
            from transformers import PrinterCallback

            trl_trainer.remove_callback(PrinterCallback)  # it prints every log line
            if val_count:
                trl_trainer.add_callback(evaluation_lines(self.evaluation_unit, log.info))

    def _evaluate(self, trl_trainer, count: int) -> dict[str, float]:
        log.info("%s: %s", type(self).__name__, self.evaluation_description(count))
        started = time.perf_counter()
        metrics = {k: float(v) for k, v in trl_trainer.evaluate().items() if _is_number(v)}
        log.info(
            "%s: evaluation done in %.0f s", type(self).__name__, time.perf_counter() - started
        )
        return metrics

    # -- resuming -------------------------------------------------------------------------------

    def resumes(self) -> bool:
        return self.config.resume

    def skip_step(self, step: CurriculumStep) -> None:
        """A repository finished earlier: its report, as its checkpoint recorded it."""
        info_path = step.checkpoint_dir / CHECKPOINT_INFO
        try:
            recorded = json.loads(info_path.read_text()).get("report")
        except (OSError, ValueError):
            recorded = None
        if recorded is not None:
            self.reports.append(StepReport.model_validate(recorded))
        log.info(
            "%s: %s finished earlier (%s)",
            type(self).__name__,
            step.repository,
            info_path.parent.name,
        )

    def resume_from(self, checkpoint_dir: Path) -> None:
        """Go on from a finished repository's checkpoint: its weights (or adapter) replace the
        model loaded at the start."""
        del self.model
        gc.collect()
        self._load(checkpoint_dir, resumed=True)

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
        trl_trainer=None,
    ) -> Path:
        """Write the model (or its LoRA adapter), the tokenizer, the log history and the training
        curves to ``directory``; it appears complete or not at all. Among several processes the
        main one writes it and the others wait for it.

        With ``trl_trainer`` the weights are saved by its ``save_model``, on every process (under
        FSDP it gathers the full state dict, under DeepSpeed ZeRO-3 the partitioned weights; the
        main process writes them); without, the main process saves ``self.model``.

        Args:
            directory: The checkpoint directory (replaced when it holds a checkpoint).
            history: The TRL trainer's log history.
            step: The repository it was trained on.
            report: What training produced.
            trl_trainer: The TRL trainer that trained the model.

        Returns:
            ``directory``.
        """
        info: dict[str, Any] = {
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
        title = f"{self.kind.upper()} {step.repository}" if step else self.kind.upper()
        return write_checkpoint(
            Path(directory),
            save_weights=(
                trl_trainer.save_model
                if trl_trainer is not None
                else (lambda path: self.model.save_pretrained(path))
            ),
            collective=trl_trainer is not None,
            tokenizer=self.tokenizer,
            adapter_base=self.base_model if self.is_adapter else None,
            history=history or [],
            curves_title=title if self.config.plot_curves else None,
            info=info,
        )


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
