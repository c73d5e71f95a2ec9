"""``RetrievalTrainer``: trains the premise retriever repository by repository with elastic weight
consolidation, as its ``TrainingConfig`` says, and reports each repository's training."""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from leanloop.atomic import replace_directory
from leanloop.data.records import Repository
from leanloop.errors import LeanloopError
from leanloop.ml import distributed
from leanloop.ml.device import Hardware, detect_hardware
from leanloop.ml.models import latest_checkpoint, require_model
from leanloop.settings import Settings
from leanloop.trainer.base import CurriculumStep, CurriculumTrainer
from leanloop.trainer.config import config_field
from leanloop.trainer.retrieval_config import TrainingConfig
from leanloop.trainer.retrieval_lines import read_metrics_log, training_lines
from leanloop.trainer.retrieval_resume import (
    REPORT_FILE,
    finished_report,
    repository_key,
    resume_callbacks,
    resume_checkpoint,
)

if TYPE_CHECKING:
    from leanloop.database.dynamic import DynamicDatabase

log = logging.getLogger(__name__)


class RetrievalStepReport(BaseModel):
    """What training on one repository produced (also written to its ``metrics.json``)."""

    repository: str = Field(description="The repository trained on.")
    url: str = Field(description="Its URL.")
    commit: str = Field(description="Its commit.")
    started_from: str = Field(description="The checkpoint or model training started from.")
    train_steps: int = Field(description="Tactic steps trained on (merged export).")
    naming_examples: int = Field(description="Naming examples trained on.")
    val_steps: int = Field(description="Tactic steps validated on.")
    corpus_premises: int = Field(description="Premises in the corpus.")
    best_checkpoint_score: float | None = Field(
        description="The monitored metric of the weights kept (None: the last weights)."
    )
    fisher_samples: int = Field(description="Examples the EWC Fisher was computed on.")
    ewc_repositories: int = Field(description="Repositories the EWC state consolidates.")
    ewc_covers: list[str] = Field(
        default_factory=list,
        description="The repositories (url@commit) the EWC state consolidates, in order.",
    )
    resumed_from: str | None = Field(
        default=None,
        description="The checkpoint an interrupted training of this repository resumed from.",
    )
    reused: bool = Field(
        default=False,
        description="True: an earlier run finished this repository; this run skipped it.",
    )
    optimizer_steps: int | None = Field(
        default=None,
        description="Optimizer steps taken (None: in reports written before it was kept).",
    )
    epochs: float | None = Field(
        default=None, description="Passes over the training examples (a fraction when cut short)."
    )
    seconds: float | None = Field(default=None, description="Time spent training.")
    skipped: str | None = Field(
        default=None,
        description="Why the repository was skipped untrained (its checkpoint is the model it "
        "started from), e.g. no tactic step of the export uses a premise; None: trained.",
    )


def _ddp(config):
    """Lightning's DDP for the retriever: the encoder's pooler takes no part in the loss, so
    DDP is told to expect parameters without gradients."""
    from datetime import timedelta

    from lightning.pytorch.strategies import DDPStrategy

    return DDPStrategy(
        timeout=timedelta(seconds=config.timeout_seconds), find_unused_parameters=True
    )


class RetrievalTrainer(CurriculumTrainer):
    """Train the premise retriever on repositories in order, each continuing from the
    checkpoint of the one before, with EWC against forgetting.

    ``train(repos, database, data_path, model_checkpoint_path=None)`` starts from
    ``model_checkpoint_path`` when given, else from the newest checkpoint in
    ``config.output_dir`` (a previous run), else from ``config.model_name``; ``after_step`` is
    called after each repository's checkpoint (see ``CurriculumTrainer``). Each repository's
    checkpoint directory holds ``retriever.ckpt`` (weights, hyper-parameters, the EWC Fisher
    and anchor weights), the encoder and tokenizer in Hugging Face format, ``metrics.csv``,
    ``metrics.json`` and ``training_curves.png``. ``callbacks`` are extra Lightning callbacks.

    Run again on the same ``output_dir`` (after a failure, or with more repositories), training
    skips the repositories whose checkpoint an earlier run completed and continues from the
    last of them; a repository whose training was interrupted resumes from the newest
    checkpoint it left (written every ``checkpoint_every_n_train_steps`` optimizer steps and when
    an exception stops training) with its optimizer, schedule, epoch and step. The EWC state
    names the repositories it covers and never consolidates one twice. A fresh ``output_dir``
    starts afresh.

    Progress shows on Lightning's progress bar (``enable_progress_bar``); with the bar off,
    a line every 30 seconds and after each epoch (epoch, step, loss) goes to ``progress``
    (default: this module's logger, at INFO).

    Args:
        config: The training configuration (default ``TrainingConfig()``); see
            [TrainingConfig][leanloop.trainer.retrieval_config.TrainingConfig].
        callbacks: Extra Lightning callbacks.
        hardware: The device and precision (default: detected; ``config.num_gpus=0`` keeps
            training on the CPU).
        progress: Called with each progress line when Lightning's bar is off (default: the
            log, at INFO).
    """

    def __init__(
        self,
        config: TrainingConfig | None = None,
        *,
        callbacks: Sequence = (),
        hardware: Hardware | None = None,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        self.config = config or TrainingConfig()
        self.hardware = hardware
        self.callbacks = list(callbacks)
        self.progress = progress
        self.data_path: Path | None = None
        self.reports: list[RetrievalStepReport] = []
        self._start: str | None = None
        self._run = (0, 0)
        self._check_models()

    def _check_models(self) -> None:
        """Refuse at once an encoder that cannot load (``ml.models.model_problem``), unless
        ``output_dir`` holds a checkpoint to continue from."""
        if latest_checkpoint(self.output_dir) is None:
            require_model(self.config.model_name, type(self).__name__, "model_name")

    output_dir = config_field("output_dir")

    # -- training --------------------------------------------------------------------------------

    def train(
        self,
        repos: Sequence[Repository],
        database: DynamicDatabase,
        data_path: str | Path | None = None,
        model_checkpoint_path: str | Path | None = None,
        *,
        after_step: Callable[[CurriculumStep], None] | None = None,
    ) -> list[Path]:
        """Train the retriever on the repositories in turn, each on the merged export of all
        seen so far, continuing from the checkpoint before.

        Args:
            repos: The repositories, in the order to train on them.
            database: The database they are stored in.
            data_path: Where each step's merged LeanDojo-format export is written (also what
                ``evaluate`` reads by default); None: ``<output_dir>/data``, as the agents and
                the command line write it.
            model_checkpoint_path: Start from this checkpoint (default: the newest in
                ``output_dir``, else ``config.model_name``).
            after_step: Called with each step once its checkpoint is saved.

        Returns:
            The checkpoint directory of each repository, in order.

        Raises:
            LeanloopError: ``model_checkpoint_path`` does not exist, or no repositories are
                given.
        """
        if model_checkpoint_path is not None and not Path(model_checkpoint_path).exists():
            raise LeanloopError(
                f"model_checkpoint_path {model_checkpoint_path} does not exist",
                hint="give a checkpoint directory written by RetrievalTrainer, or leave it out",
            )
        previous = latest_checkpoint(self.output_dir)
        self._start = str(model_checkpoint_path or previous or self.config.model_name)
        self.data_path = Path(data_path) if data_path is not None else self.output_dir / "data"
        self._join_processes()
        self._run = (len(self.reports), len(repos))  # where this run's reports start; its size
        return super().train(repos, database, self.data_path, after_step=after_step)

    def _join_processes(self) -> None:
        """Under a launcher, set up the process group as Lightning's DDP would (NCCL on GPUs,
        gloo on CPUs, ``timeout_seconds``) before the curriculum's first barrier does: that
        one would be ``accelerate``'s, with the default timeout and a backend Lightning does
        not recognise as gloo (so that it asks gloo for an average it cannot take, when
        validation figures are synchronised)."""
        if not distributed.current().distributed:
            return
        from datetime import timedelta

        import torch.distributed as dist

        if dist.is_available() and not dist.is_initialized():
            backend = "nccl" if self._hardware().device == "cuda" else "gloo"
            dist.init_process_group(
                backend=backend, timeout=timedelta(seconds=self.config.timeout_seconds)
            )

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
        processes = distributed.current()
        if processes.distributed:  # started by torchrun / leanloop train --nproc: join them
            given = Settings.variable("LOCAL_WORLD_SIZE") or ""
            local = int(given) if given.isdigit() else processes.world_size
            return {
                "accelerator": hardware.lightning_accelerator,
                "devices": local,
                "num_nodes": max(1, processes.world_size // local),
                "strategy": _ddp(config),
                "precision": config.precision or hardware.lightning_precision,
            }
        if hardware.device == "cuda" and config.num_gpus > 1:
            # Lightning would start the other processes itself, each running the whole
            # curriculum loop again: the processes are started by the launcher instead
            raise LeanloopError(
                f"num_gpus={config.num_gpus}: the retriever trains on several GPUs as one "
                "process per GPU",
                hint=f"start it with 'leanloop train retrieval --nproc {config.num_gpus}' (or "
                f"torchrun --nproc_per_node {config.num_gpus} -m leanloop train retrieval ...)",
            )
        return {
            "accelerator": hardware.lightning_accelerator,
            "devices": devices,
            "strategy": strategy,
            "precision": config.precision or hardware.lightning_precision,
        }

    def lightning_trainer(self, work_dir: Path, has_val: bool):
        """The Lightning trainer of one repository: device and precision by hardware (see
        ``device_arguments``), checkpoint and early-stopping callbacks on the configured monitors
        (validation monitors only when there is validation data), CSV logs in ``work_dir``."""
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
                    # a validation metric exists only after a validation: save there, never at
                    # the end of a training epoch that max_steps or max_time cut short before it
                    # (no checkpoint then: the last weights are kept)
                    save_on_train_epoch_end=False if monitors_val else None,
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
        if not config.enable_progress_bar:
            callbacks.append(
                training_lines(self.progress or log.info, max_seconds=config.max_seconds())
            )
        callbacks.extend(
            resume_callbacks(
                work_dir,
                config.checkpoint_every_n_train_steps,
                on_exception=not distributed.current().distributed,
            )
        )
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

    def skip_step(self, step: CurriculumStep) -> None:
        """Report a repository the curriculum record holds as finished as reused; training goes
        on from its checkpoint."""
        finished = self.finished(step)
        if finished is not None:
            self.reports.append(finished.model_copy(update={"reused": True}))
        self._start = str(step.checkpoint_dir)

    def resume_from(self, checkpoint_dir: Path) -> None:
        """Go on from ``checkpoint_dir``, the last finished repository's checkpoint."""
        self._start = str(checkpoint_dir)

    def train_step(self, step: CurriculumStep) -> None:
        """Train on ``step``'s repository and save its checkpoint; a repository an earlier run
        finished is skipped (its checkpoint is where the next one starts), and an interrupted
        one resumes from the last checkpoint its training left (see ``retrieval_resume``)."""
        import lightning.pytorch as pl

        from leanloop.retrieval.model import CHECKPOINT_FILE

        config = self.config
        finished = self.finished(step)
        if finished is not None:
            log.info("repository %s: finished by an earlier run, skipped", step.repository)
            self.reports.append(finished.model_copy(update={"reused": True}))
            self._start = str(step.checkpoint_dir)
            return
        pl.seed_everything(config.seed, verbose=False)
        assert self._start is not None  # train() chose it
        model = self.load_model(self._start)
        data = self.data_module(step.dataset_dir, model)
        if not data.train_steps:
            first, count = self._run
            if step.index == count - 1 and all(r.skipped for r in self.reports[first:]):
                raise LeanloopError(
                    f"no training examples in {step.dataset_dir}/{config.split_scheme}/"
                    "train.json: no tactic step uses a premise of the corpus",
                    hint="add repositories with traced tactics that use premises",
                )
            self._skip_untrainable(step, model, data)
            return
        work_dir = step.checkpoint_dir.with_name(f".{step.checkpoint_dir.name}.work")
        resume = resume_checkpoint(work_dir)  # every process reads the same directory
        processes = distributed.current()
        if processes.is_main and resume is None:
            shutil.rmtree(work_dir, ignore_errors=True)
        processes.barrier()
        if resume is not None:
            log.info("repository %s: resuming from %s", step.repository, resume)
        else:
            log.info("repository %s: starting from %s", step.repository, self._start)
        trainer = self.lightning_trainer(work_dir, has_val=bool(data.val_steps))
        model.train()  # pretrained encoders load in eval mode (dropout off)
        started = time.perf_counter()
        trainer.fit(model, datamodule=data, ckpt_path=resume)
        seconds = time.perf_counter() - started

        best = self._best_checkpoint(trainer)
        if best is not None:
            import torch

            state = torch.load(best, map_location="cpu", weights_only=False)["state_dict"]
            model.load_state_dict(state)
        fisher_samples = 0
        if config.get_lambda_value() > 0:
            fisher_samples = self._consolidate(model, data, step.repository)
        report = RetrievalStepReport(
            repository=str(step.repository),
            url=step.repository.url,
            commit=step.repository.commit,
            started_from=str(self._start),
            resumed_from=None if resume is None else str(resume),
            train_steps=len(data.train_steps),
            naming_examples=len(data.naming),
            val_steps=len(data.val_steps),
            corpus_premises=len(data.corpus),
            best_checkpoint_score=_score_of(trainer),
            fisher_samples=fisher_samples,
            ewc_repositories=model.ewc.repositories,
            ewc_covers=list(model.ewc.covered),
            optimizer_steps=trainer.global_step,
            epochs=_epochs_of(trainer),
            seconds=seconds,
        )
        # every process takes part: the strategy gathers weights it shards (FSDP) and the main
        # process writes the file
        final = work_dir / "final.ckpt"
        trainer.save_checkpoint(final, weights_only=True)
        if trainer.is_global_zero:  # one process writes the checkpoint; the others wait
            self._save(step, model, final, work_dir, report, CHECKPOINT_FILE)
        trainer.strategy.barrier("leanloop-checkpoint")
        self.reports.append(report)
        self.model = model  # the last repository's retriever, as this process trained it
        self._start = str(step.checkpoint_dir)

    def _skip_untrainable(self, step: CurriculumStep, model, data) -> None:
        """A repository whose merged export has no training example (no tactic step uses a
        premise of the corpus): said in one warning and recorded as skipped; its checkpoint is
        the model it started from, so the curriculum goes on from there (when no repository of
        the run has any, ``train_step`` fails instead: there is nothing to train at all)."""
        reason = (
            f"no tactic step in {step.dataset_dir}/{self.config.split_scheme}/train.json uses "
            "a premise of the corpus"
        )
        log.warning("repository %s: nothing to train on (%s): skipped", step.repository, reason)
        report = RetrievalStepReport(
            repository=str(step.repository),
            url=step.repository.url,
            commit=step.repository.commit,
            started_from=str(self._start),
            train_steps=0,
            naming_examples=len(data.naming),
            val_steps=len(data.val_steps),
            corpus_premises=len(data.corpus),
            best_checkpoint_score=None,
            fisher_samples=0,
            ewc_repositories=model.ewc.repositories,
            ewc_covers=list(model.ewc.covered),
            optimizer_steps=0,
            epochs=0.0,
            seconds=0.0,
            skipped=reason,
        )
        processes = distributed.current()
        if processes.is_main:
            from leanloop.retrieval.model import CHECKPOINT_FILE

            with replace_directory(
                step.checkpoint_dir, may_replace=lambda p: (p / CHECKPOINT_FILE).is_file()
            ) as staging:
                model.save_retriever(staging)
                (staging / REPORT_FILE).write_text(report.model_dump_json(indent=2) + "\n")
        processes.barrier()
        self.reports.append(report)
        self.model = model
        self._start = str(step.checkpoint_dir)

    def finished(self, step: CurriculumStep) -> RetrievalStepReport | None:
        """The report of ``step``'s repository when an earlier run in ``output_dir`` finished
        it (its checkpoint is complete), else None. The one place that decides which
        repositories a re-run skips."""
        from leanloop.retrieval.model import CHECKPOINT_FILE

        saved = finished_report(step, CHECKPOINT_FILE)
        if saved is None:
            return None
        try:
            return RetrievalStepReport.model_validate(saved)
        except ValueError as exc:
            log.warning("the report of %s cannot be read (%s): training it again", step, exc)
            return None

    def _save(self, step, model, final: Path, work_dir: Path, report, checkpoint_file) -> None:
        """Write the repository's checkpoint directory (replaced whole) from the Lightning
        checkpoint ``final``, with the logs, curves and report; then drop the work directory."""
        from leanloop.trainer.plots import plot_curves

        with replace_directory(
            step.checkpoint_dir, may_replace=lambda p: (p / checkpoint_file).is_file()
        ) as staging:
            model.save_retriever(staging, final)
            log_file = work_dir / "logs" / "metrics.csv"
            if log_file.is_file():
                shutil.copy(log_file, staging / "metrics.csv")
            history = read_metrics_log(log_file)
            plot_curves(history, staging / "training_curves.png", title=str(step.repository))
            (staging / REPORT_FILE).write_text(report.model_dump_json(indent=2) + "\n")
        shutil.rmtree(work_dir, ignore_errors=True)

    @staticmethod
    def _best_checkpoint(trainer) -> str | None:
        callback = _best_callback(trainer)
        path = getattr(callback, "best_model_path", "") if callback is not None else ""
        return path or None

    def _consolidate(self, model, data, repository: Repository) -> int:
        """The Fisher of ``repository``'s training examples (all of them when the export holds
        none of its own), folded into the model's EWC state; 0 when the state covers the
        repository already (it is never counted twice)."""
        import random

        key = repository_key(repository)
        if model.ewc.covers(key):
            log.warning("the EWC state covers %s already: not consolidated again", repository)
            return 0
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
        count = model.consolidate(batches, self.config.fisher_max_samples, key)
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
        """Measure a trained retriever on a split of a dataset; the figures are also written
        to ``evaluation-<scheme>-<split>.json`` in the checkpoint directory.

        Args:
            dataset_path: A LeanDojo-format dataset (default: the data of the last ``train``).
            split: ``train``, ``val`` or ``test`` of ``config.split_scheme``.
            checkpoint: The checkpoint to measure (default: the newest in ``output_dir``).

        Returns:
            ``R@1``, ``R@10`` and ``MRR`` as fractions, and ``steps``: the proof steps
            measured.

        Raises:
            LeanloopError: No dataset or no trained retriever is found, or the dataset has no
                such split.
        """
        from leanloop.retrieval.examples import split_file
        from leanloop.trainer.retrieval_evaluation import evaluate_retriever

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
        model = self.load_model(chosen).to(self._hardware().device)
        model.freeze()
        metrics = evaluate_retriever(
            model,
            dataset,
            scheme=scheme,
            split=split,
            k=self.config.num_retrieved,
            batch_size=self.config.eval_batch_size,
        )
        result = metrics.as_dict()
        log.info("%s on %s/%s: %s", chosen.name, scheme, split, metrics)
        if chosen.is_dir():
            (chosen / f"evaluation-{scheme}-{split}.json").write_text(
                json.dumps({"dataset": str(dataset), **result}, indent=2) + "\n"
            )
        return result


def _epochs_of(trainer) -> float | None:
    """Passes over the training batches (a fraction when training stopped within an epoch)."""
    batches = trainer.num_training_batches
    if not isinstance(batches, int) or batches <= 0:
        return None
    return round(trainer.global_step * trainer.accumulate_grad_batches / batches, 2)


def _best_callback(trainer):
    """The callback keeping the best weights by the monitored metric (None: there is none)."""
    from lightning.pytorch.callbacks import ModelCheckpoint

    for callback in trainer.callbacks:
        if isinstance(callback, ModelCheckpoint) and callback.monitor is not None:
            return callback
    return None


def _score_of(trainer) -> float | None:
    callback = _best_callback(trainer)
    score = getattr(callback, "best_model_score", None) if callback is not None else None
    return None if score is None else float(score)
