"""The curriculum loop every trainer shares: repository by repository, export the merged data of
the repositories seen so far, train on it, and save a checkpoint before moving on."""

from __future__ import annotations

import os
import re
import shutil
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from leanloop.atomic import write_text_atomic
from leanloop.data.records import Repository
from leanloop.errors import LeanloopError
from leanloop.ml import distributed
from leanloop.ml.models import LATEST_FILE

if TYPE_CHECKING:
    from leanloop.database.dynamic import DynamicDatabase


@dataclass(frozen=True)
class CurriculumStep:
    """One repository's turn: its position, the repository, the exported data and where its
    checkpoint goes."""

    index: int
    repository: Repository
    seen: tuple[Repository, ...]
    dataset_dir: Path
    checkpoint_dir: Path


#: Names the files ``mirror_checkpoint`` placed in an output directory.
MIRROR_FILE = ".leanloop-mirrored"


def checkpoint_name(index: int, repository: Repository) -> str:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", repository.name).strip("-") or "repo"
    return f"repo{index:02d}-{slug}-{repository.commit[:8]}"


def mirror_checkpoint(checkpoint_dir: Path, output_dir: Path) -> None:
    """Make ``output_dir`` itself load as the newest checkpoint, as LeanDojo-v2's trainers left
    it (``from_pretrained(output_dir)``): each file at the top of ``checkpoint_dir`` is linked
    into ``output_dir`` (copied where links are not possible), each replaced atomically; files
    mirrored from an older checkpoint that the new one lacks are removed."""
    manifest = output_dir / MIRROR_FILE
    before = set(manifest.read_text().split("\n")) if manifest.is_file() else set()
    names = sorted(p.name for p in checkpoint_dir.iterdir() if p.is_file())
    for name in names:
        target = output_dir / name
        if target.is_dir():
            continue
        temporary = output_dir / f".{name}.mirror"
        temporary.unlink(missing_ok=True)
        try:
            os.link(checkpoint_dir / name, temporary)
        except OSError:
            shutil.copy2(checkpoint_dir / name, temporary)
        os.replace(temporary, target)
    for stale in before - set(names) - {""}:
        path = output_dir / stale
        if path.is_file() and stale != LATEST_FILE:
            path.unlink()
    write_text_atomic(manifest, "\n".join(names) + "\n")


class CurriculumTrainer(ABC):
    """``train(repos, database, data_path)`` over repositories in the given order.

    Subclasses implement ``train_step`` (train on ``step.dataset_dir`` and save to
    ``step.checkpoint_dir``). After each repository ``output_dir/LATEST`` names the newest
    checkpoint, so a failure later loses nothing already trained, and the newest checkpoint's
    files are also mirrored at the top of ``output_dir`` (see ``mirror_checkpoint``); then
    ``after_step(step)`` is called, when given (e.g. to evaluate the new checkpoint on every
    repository seen so far while ``step.dataset_dir`` still holds their export).

    Run as several processes (``torchrun``, ``accelerate launch``, ``leanloop train --nproc``),
    every process walks the same repositories in the same order and trains; the main process
    alone exports the data, saves the checkpoint, moves ``LATEST`` and calls ``after_step``,
    and the others wait for it at a barrier before they read what it wrote.
    """

    output_dir: Path

    def train(
        self,
        repos: Sequence[Repository],
        database: DynamicDatabase,
        data_path: str | Path,
        *,
        after_step: Callable[[CurriculumStep], None] | None = None,
    ) -> list[Path]:
        """Train on the repositories in turn, each on the merged export of all seen so far.

        Args:
            repos: The repositories, in the order to train on them (e.g.
                ``DynamicDatabase.sort_repositories_by_difficulty()``).
            database: The database they are stored in.
            data_path: Where each step's merged LeanDojo-format export is written.
            after_step: Called with each step once its checkpoint is saved (by the main
                process only).

        Returns:
            The checkpoint directory of each repository, in order.

        Raises:
            LeanloopError: No repositories are given, or one is not in the database.
        """
        if not repos:
            raise LeanloopError("no repositories to train on")
        processes = distributed.current()
        output_dir = Path(self.output_dir)
        if processes.is_main:
            output_dir.mkdir(parents=True, exist_ok=True)
        checkpoints: list[Path] = []
        seen: list[Repository] = []
        for index, repository in enumerate(repos):
            seen.append(repository)
            dataset_dir = Path(data_path)
            if processes.is_main:
                database.export_merged_data(seen, dataset_dir)
            processes.barrier()  # the others read the export the main process wrote
            step = CurriculumStep(
                index=index,
                repository=repository,
                seen=tuple(seen),
                dataset_dir=dataset_dir,
                checkpoint_dir=output_dir / checkpoint_name(index, repository),
            )
            self.train_step(step)  # every process; the main one saves the checkpoint
            if processes.is_main:
                write_text_atomic(output_dir / LATEST_FILE, step.checkpoint_dir.name + "\n")
                mirror_checkpoint(step.checkpoint_dir, output_dir)
                if after_step is not None:
                    after_step(step)
            checkpoints.append(step.checkpoint_dir)
            processes.barrier()  # the next export waits for this step to be complete
        return checkpoints

    @abstractmethod
    def train_step(self, step: CurriculumStep) -> None:
        """Train on the merged data in ``step.dataset_dir``; save to ``step.checkpoint_dir``.

        Args:
            step: The repository, the ones seen so far, the directory of their export and
                where to save the checkpoint.
        """
