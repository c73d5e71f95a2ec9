"""A tactic generator's checkpoint on disk: written whole or not at all, its weights saved by the
TRL trainer on every process (which gathers sharded weights), and the step checkpoints within a
repository that a run started again resumes from."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from leanloop.atomic import replace_directory
from leanloop.ml import distributed
from leanloop.ml.generation import CHECKPOINT_INFO
from leanloop.trainer.plots import plot_curves

log = logging.getLogger(__name__)

#: Files written into every checkpoint directory besides the model, the tokenizer and
#: ``CHECKPOINT_INFO``.
CURVES_PNG = "training_curves.png"
LOG_HISTORY = "log_history.json"


def write_checkpoint(
    directory: Path,
    *,
    save_weights: Callable[[str], Any],
    collective: bool,
    tokenizer,
    adapter_base: str | None,
    history: list[dict[str, Any]],
    curves_title: str | None,
    info: dict[str, Any],
) -> Path:
    """Write a checkpoint to ``directory`` through a staging directory renamed into place.

    Args:
        directory: Where the checkpoint goes (a checkpoint there is replaced).
        save_weights: Saves the model into the directory it is given.
        collective: Whether every process calls ``save_weights`` (a TRL trainer's
            ``save_model``: FSDP and ZeRO-3 gather the weights on all processes, the main one
            writes them); otherwise only the main process does.
        tokenizer: Saved with the weights.
        adapter_base: The base model a saved LoRA adapter names (None: a full model).
        history: The log history, saved as ``log_history.json``.
        curves_title: The title of ``training_curves.png`` (None: no curves).
        info: What ``CHECKPOINT_INFO`` holds.

    Returns:
        ``directory``.
    """
    processes = distributed.current()
    if not processes.is_main:
        if collective:
            save_weights(_shared_path(None))  # joins the gathering; the main process writes
        processes.barrier()
        return directory
    with replace_directory(
        directory, may_replace=lambda path: (path / CHECKPOINT_INFO).is_file()
    ) as staging:
        save_weights(_shared_path(str(staging)) if collective else str(staging))
        (staging / "training_args.bin").unlink(missing_ok=True)  # the TRL trainer's pickle
        if adapter_base is not None:
            _name_adapter_base(staging, adapter_base)
        tokenizer.save_pretrained(staging)
        (staging / LOG_HISTORY).write_text(json.dumps(history, indent=1, default=str))
        if curves_title is not None:
            plot_curves(history, staging / CURVES_PNG, title=curves_title)
        (staging / CHECKPOINT_INFO).write_text(json.dumps(info, indent=1))
    log.info("saved %s", directory)
    processes.barrier()
    return directory


def _shared_path(path: str | None) -> str:
    """The main process's ``path``, on every process of a run (one process: ``path``)."""
    if not distributed.current().distributed:
        assert path is not None
        return path
    from accelerate.utils import broadcast_object_list

    shared = broadcast_object_list([path], from_process=0)
    return str(shared[0])


def last_step_checkpoint(work_dir: Path) -> Path | None:
    """The newest complete step checkpoint (``checkpoint-<step>`` with its trainer state) the
    TRL trainer left in ``work_dir`` (None when there is none)."""
    if not work_dir.is_dir():
        return None
    complete = [
        entry
        for entry in work_dir.iterdir()
        if entry.name.startswith("checkpoint-")
        and entry.name.removeprefix("checkpoint-").isdigit()
        and (entry / "trainer_state.json").is_file()
    ]
    return max(complete, key=step_number, default=None)


def step_number(checkpoint: Path) -> int:
    """The optimizer step a ``checkpoint-<step>`` directory was saved at."""
    return int(checkpoint.name.removeprefix("checkpoint-"))


def _name_adapter_base(directory: Path, base_model: str) -> None:
    """Point a saved adapter at the base model by the name the user gave (a packaged or hub name
    stays a name; PEFT would write the resolved directory, which may be a cache path)."""
    from leanloop.ml.causal import ADAPTER_CONFIG

    path = directory / ADAPTER_CONFIG
    config = json.loads(path.read_text())
    config["base_model_name_or_path"] = base_model
    path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
