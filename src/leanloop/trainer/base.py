"""The curriculum loop every trainer shares: repository by repository, export the merged data of
the repositories seen so far, train on it, and save a checkpoint before moving on."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from leanloop.atomic import write_text_atomic
from leanloop.data.records import Repository
from leanloop.errors import LeanloopError
from leanloop.ml.models import LATEST_FILE


@dataclass(frozen=True)
class CurriculumStep:
    """One repository's turn: its position, the repository, the exported data and where its
    checkpoint goes."""

    index: int
    repository: Repository
    seen: tuple[Repository, ...]
    dataset_dir: Path
    checkpoint_dir: Path


def checkpoint_name(index: int, repository: Repository) -> str:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", repository.name).strip("-") or "repo"
    return f"repo{index:02d}-{slug}-{repository.commit[:8]}"


class CurriculumTrainer(ABC):
    """``train(repos, database, data_path)`` over repositories in the given order.

    Subclasses implement ``train_step`` (train on ``step.dataset_dir`` and save to
    ``step.checkpoint_dir``). After each repository ``output_dir/LATEST`` names the newest
    checkpoint, so a failure later loses nothing already trained.
    """

    output_dir: Path

    def train(self, repos: Sequence[Repository], database, data_path: str | Path) -> list[Path]:
        if not repos:
            raise LeanloopError("no repositories to train on")
        output_dir = Path(self.output_dir)
        output_dir.mkdir(parents=True, exist_ok=True)
        checkpoints: list[Path] = []
        seen: list[Repository] = []
        for index, repository in enumerate(repos):
            seen.append(repository)
            dataset_dir = Path(data_path)
            database.export_merged_data(seen, dataset_dir)
            step = CurriculumStep(
                index=index,
                repository=repository,
                seen=tuple(seen),
                dataset_dir=dataset_dir,
                checkpoint_dir=output_dir / checkpoint_name(index, repository),
            )
            self.train_step(step)
            write_text_atomic(output_dir / LATEST_FILE, step.checkpoint_dir.name + "\n")
            checkpoints.append(step.checkpoint_dir)
        return checkpoints

    @abstractmethod
    def train_step(self, step: CurriculumStep) -> None:
        """Train on the merged data in ``step.dataset_dir``; save to ``step.checkpoint_dir``."""
