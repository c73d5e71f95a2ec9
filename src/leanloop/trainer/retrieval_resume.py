"""Resuming the retriever's curriculum after a failure: which repositories an earlier run finished
(their checkpoint is complete, so a re-run skips them), and, within a repository, the Lightning
checkpoints training leaves as it goes (every ``checkpoint_every_n_train_steps`` optimizer steps,
and when an exception stops it) that the next run resumes from with ``ckpt_path``.

Which repositories a run already finished is decided in one place, ``finished_report``, until the
curriculum loop (``trainer.base``) says it for every trainer.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from leanloop.data.records import Repository
from leanloop.trainer.base import CurriculumStep

log = logging.getLogger(__name__)

#: Directory, inside a repository's work directory, of the checkpoints training resumes from.
RESUME_DIR = "resume"
#: Name of the report a finished repository's checkpoint holds.
REPORT_FILE = "metrics.json"


def repository_key(repository: Repository) -> str:
    """How the EWC state and the reports name a repository: ``url@commit``."""
    return f"{repository.url}@{repository.commit}"


def finished_report(step: CurriculumStep, checkpoint_file: str) -> dict[str, Any] | None:
    """The saved report of ``step``'s repository when an earlier run finished it: its checkpoint
    directory holds ``checkpoint_file`` and a report naming the same repository and commit
    (directories are replaced whole, so one that exists is complete). None otherwise."""
    directory = step.checkpoint_dir
    report = directory / REPORT_FILE
    if not (directory / checkpoint_file).is_file() or not report.is_file():
        return None
    try:
        data = json.loads(report.read_text())
    except (OSError, ValueError) as exc:
        log.warning("%s cannot be read (%s): training %s again", report, exc, step.repository)
        return None
    same = data.get("url") == step.repository.url and data.get("commit") == step.repository.commit
    return data if same else None


def resume_checkpoint(work_dir: Path) -> Path | None:
    """The newest checkpoint an interrupted training of the repository left in ``work_dir``
    (None: start afresh)."""
    directory = work_dir / RESUME_DIR
    if not directory.is_dir():
        return None
    found = [p for p in directory.glob("*.ckpt") if p.is_file()]
    return max(found, key=lambda p: p.stat().st_mtime_ns) if found else None


def resume_callbacks(work_dir: Path, every_n_train_steps: int, on_exception: bool) -> list:
    """Lightning callbacks writing full checkpoints (weights, optimizer, loops, EWC state) to
    resume from: the latest one every ``every_n_train_steps`` optimizer steps (0: never), and one
    when an exception stops training (``on_exception``; one process only, since a save is a
    collective call that the other processes of a failed run would never join)."""
    from lightning.pytorch.callbacks import ModelCheckpoint

    callbacks: list = []
    if every_n_train_steps > 0:
        callbacks.append(
            ModelCheckpoint(
                dirpath=work_dir / RESUME_DIR,
                filename="{step}",
                monitor=None,
                save_top_k=1,
                every_n_train_steps=every_n_train_steps,
                save_weights_only=False,
                save_on_train_epoch_end=False,
            )
        )
    if on_exception:
        callbacks.append(_checkpoint_on_exception(work_dir / RESUME_DIR / "on-exception.ckpt"))
    return callbacks


def _checkpoint_on_exception(path: Path):
    """A callback saving the whole training state to ``path`` when an exception stops training
    (Lightning's ``OnExceptionCheckpoint`` does the same, but its presence turns every
    ``fit(ckpt_path=None)`` into a search for a "last" checkpoint, with warnings)."""
    import lightning.pytorch as pl

    class CheckpointOnException(pl.Callback):
        def on_exception(self, trainer, pl_module, exception: BaseException) -> None:
            try:
                trainer.save_checkpoint(path)
            except Exception as error:  # the exception being raised is the one to report
                log.warning("no checkpoint to resume from after %r: %s", exception, error)
            else:
                log.info("training stopped by %r; resumable from %s", exception, path)

    return CheckpointOnException()
