"""The curriculum loop every trainer shares: repository by repository, export the merged data of
the repositories seen so far, train on it, and save a checkpoint before moving on; a record of
the repositories finished, so that a run started again skips them and goes on from the last
one."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from leanloop.atomic import write_text_atomic
from leanloop.data.records import Repository
from leanloop.errors import DataFormatError, LeanloopError
from leanloop.ml import distributed
from leanloop.ml.models import LATEST_FILE

if TYPE_CHECKING:
    from leanloop.database.dynamic import DynamicDatabase

log = logging.getLogger(__name__)


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

#: The record, in a trainer's output directory, of the repositories it finished (see
#: ``CurriculumTrainer.finished_repositories``).
CURRICULUM_RECORD = "curriculum.json"


@dataclass(frozen=True)
class FinishedRepository:
    """A repository a trainer finished: its position in the curriculum, the repository and
    the checkpoint saved after it."""

    index: int
    repository: Repository
    checkpoint: Path


def read_curriculum_record(output_dir: str | Path) -> tuple[str, list[FinishedRepository]]:
    """The trainer that wrote ``output_dir``'s curriculum record and the repositories it
    finished, in curriculum order (``("", [])`` when there is no record).

    Raises:
        DataFormatError: The record is not what a trainer writes.
    """
    path = Path(output_dir) / CURRICULUM_RECORD
    if not path.is_file():
        return "", []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        finished = [
            FinishedRepository(
                index=int(entry["index"]),
                repository=Repository(url=entry["url"], commit=entry["commit"]),
                checkpoint=Path(output_dir) / entry["checkpoint"],
            )
            for entry in data["finished"]
        ]
        return str(data.get("trainer", "")), finished
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DataFormatError(path, f"not a curriculum record ({exc})") from None


def write_curriculum_record(
    output_dir: Path, trainer: str, finished: Sequence[FinishedRepository]
) -> None:
    """Replace ``output_dir``'s curriculum record (atomically)."""
    entries: list[dict[str, Any]] = [
        {
            "index": item.index,
            "url": item.repository.url,
            "commit": item.repository.commit,
            "checkpoint": item.checkpoint.name,
        }
        for item in finished
    ]
    record = {
        "trainer": trainer,
        "updated": datetime.now(UTC).isoformat(timespec="seconds"),
        "finished": entries,
    }
    write_text_atomic(output_dir / CURRICULUM_RECORD, json.dumps(record, indent=1) + "\n")


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

    **A run started again goes on where the last one stopped.** Each finished repository is
    recorded in ``output_dir/curriculum.json`` (written atomically, by the main process, before
    ``LATEST`` moves). ``train`` skips the repositories at the start of ``repos`` that the record
    holds in the same places (same repository, same commit, same position, checkpoint still
    there), calls ``skip_step(step)`` for each, then ``resume_from(checkpoint)`` with the last
    one's checkpoint (also when all were finished), and trains the rest; a trainer whose
    ``resumes()`` says False (``resume: false`` in the tactic trainers' configuration) trains
    them all again.
    ``finished_repositories()`` and ``is_finished(repository)`` read the record: a subclass asks
    them before doing what must happen once per repository (the retriever's EWC consolidation
    folds each repository's Fisher in once; a skipped repository's ``train_step`` is never
    called, and a repository is recorded only after its checkpoint, consolidated state
    included, is in place).

    Run as several processes (``torchrun``, ``accelerate launch``, ``leanloop train --nproc``),
    every process walks the same repositories in the same order and trains; the main process
    alone exports the data, saves the checkpoint, writes the record, moves ``LATEST`` and calls
    ``after_step``, and the others wait for it at a barrier before they read what it wrote.
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
                process only; not for repositories skipped as finished).

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
        finished = self._finished_prefix(repos) if self.resumes() else []
        skipped = len(finished)
        if finished:
            log.info(
                "%s: %d of %d repositories finished earlier in %s; going on from %s",
                type(self).__name__,
                len(finished),
                len(repos),
                output_dir,
                finished[-1].checkpoint.name,
            )
            if processes.is_main:  # a run stopped between the record and LATEST: repair it
                self._publish(finished[-1].checkpoint)
            processes.barrier()
        checkpoints: list[Path] = []
        seen: list[Repository] = []
        for index, repository in enumerate(repos):
            seen.append(repository)
            dataset_dir = Path(data_path)
            step = CurriculumStep(
                index=index,
                repository=repository,
                seen=tuple(seen),
                dataset_dir=dataset_dir,
                checkpoint_dir=output_dir / checkpoint_name(index, repository),
            )
            if index < skipped:
                self.skip_step(step)
                checkpoints.append(step.checkpoint_dir)
                continue
            if skipped and index == skipped:
                self.resume_from(checkpoints[-1])
            if processes.is_main:
                database.export_merged_data(seen, dataset_dir)
            processes.barrier()  # the others read the export the main process wrote
            self.train_step(step)  # every process; the main one saves the checkpoint
            if processes.is_main:
                done = FinishedRepository(index, repository, step.checkpoint_dir)
                finished = [*finished[:index], done]
                write_curriculum_record(output_dir, type(self).__name__, finished)
                self._publish(step.checkpoint_dir)
                if after_step is not None:
                    after_step(step)
            checkpoints.append(step.checkpoint_dir)
            processes.barrier()  # the next export waits for this step to be complete
        if skipped and skipped == len(repos):
            self.resume_from(checkpoints[-1])  # all were finished: go on with the last model
        return checkpoints

    def resumes(self) -> bool:
        """Whether ``train`` skips the repositories an earlier run into ``output_dir`` finished
        (True unless a subclass says otherwise)."""
        return True

    def finished_repositories(self) -> list[FinishedRepository]:
        """The repositories finished in ``output_dir`` by a trainer of this class, in
        curriculum order, each with its checkpoint (as recorded; empty when none is).

        A subclass asks this (or ``is_finished``) before doing what must happen once per
        repository, such as folding its EWC Fisher into the retriever's state.

        Returns:
            The finished repositories.
        """
        trainer, finished = read_curriculum_record(self.output_dir)
        return finished if trainer == type(self).__name__ else []

    def is_finished(self, repository: Repository) -> bool:
        """Whether ``repository`` (at its commit) is recorded as finished in ``output_dir``.

        Args:
            repository: The repository.

        Returns:
            True once its checkpoint is in place and recorded.
        """
        return any(
            item.repository.url == repository.url and item.repository.commit == repository.commit
            for item in self.finished_repositories()
        )

    def _finished_prefix(self, repos: Sequence[Repository]) -> list[FinishedRepository]:
        """The record's repositories that ``repos`` starts with, in the same places, whose
        checkpoints are still there."""
        prefix: list[FinishedRepository] = []
        for item, repository in zip(self.finished_repositories(), repos, strict=False):
            same = (
                item.index == len(prefix)
                and item.repository.url == repository.url
                and item.repository.commit == repository.commit
                and item.checkpoint.is_dir()
            )
            if not same:
                break
            prefix.append(item)
        return prefix

    def _publish(self, checkpoint_dir: Path) -> None:
        """Point ``LATEST`` at ``checkpoint_dir`` and mirror its files on top."""
        output_dir = Path(self.output_dir)
        latest = output_dir / LATEST_FILE
        if not latest.is_file() or latest.read_text().strip() != checkpoint_dir.name:
            write_text_atomic(latest, checkpoint_dir.name + "\n")
        mirror_checkpoint(checkpoint_dir, output_dir)

    def skip_step(self, step: CurriculumStep) -> None:  # noqa: B027 - a hook
        """Called, on every process, for each repository skipped as finished by an earlier run
        (its checkpoint is ``step.checkpoint_dir``); nothing by default.

        Args:
            step: The finished repository's step.
        """

    def resume_from(self, checkpoint_dir: Path) -> None:  # noqa: B027 - a hook
        """Called, on every process, before the first repository not yet finished when earlier
        ones were skipped: training goes on from ``checkpoint_dir``, the last finished one's
        checkpoint (a subclass loads it); nothing by default.

        Args:
            checkpoint_dir: The checkpoint to continue from.
        """

    @abstractmethod
    def train_step(self, step: CurriculumStep) -> None:
        """Train on the merged data in ``step.dataset_dir``; save to ``step.checkpoint_dir``.

        Args:
            step: The repository, the ones seen so far, the directory of their export and
                where to save the checkpoint.
        """
