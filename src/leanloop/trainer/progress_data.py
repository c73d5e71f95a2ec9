"""The progress regressor's data: a ``ProgressRow`` per step of every traced proof of the train
split of the database's theorems (goal, proof so far, tactic, steps remaining), written and read
as JSON lines, and split into training and validation rows by theorem."""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from leanloop.atomic import write_text_atomic
from leanloop.data.jsonstream import iter_jsonl
from leanloop.data.records import Theorem
from leanloop.errors import DataFormatError, LeanloopError

if TYPE_CHECKING:
    from leanloop.database.dynamic import DynamicDatabase, RepositoryLike


class ProgressRow(BaseModel):
    """One step of a proof: the goal before it, the tactics before it (one a line), the tactic,
    and how many steps the proof has after it."""

    model_config = ConfigDict(frozen=True, extra="ignore", strict=True)

    goal: str = Field(description="The proof state before the tactic.")
    prefix: str | None = Field(default=None, description="The proof's tactics before this one.")
    tactic: str = Field(description="The tactic of this step.")
    steps_remaining: int | float = Field(
        description="Steps the proof has after this one (0 for the step that closes it)."
    )
    theorem: str | None = Field(
        default=None,
        description="The theorem's key; rows of one theorem stay on one side of a split.",
    )

    @field_validator("steps_remaining", mode="before")
    @classmethod
    def _count(cls, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
            raise ValueError("expected a number >= 0")
        return value


def build_progress_dataset(
    database: DynamicDatabase,
    output_path: str | Path,
    repositories: Iterable[RepositoryLike] | None = None,
    *,
    scheme: str = "random",
    split: str = "train",
) -> int:
    """Write a ``ProgressRow`` as one JSON line per step of every proven theorem with a traced
    proof in ``split`` (default: train) of ``scheme``, of ``repositories`` (or of all); a proof
    of n steps gives n - 1, ..., 1, 0 steps remaining. Returns the count.

    The splits are the database's own, fixed once and forever by an export (they are assigned
    here when the theorems have none yet): the progress regressor never trains on a theorem of
    the val or test split that evaluations measure it on. The merged export of the repositories
    is written beside ``output_path`` while the rows are read, then removed.

    Raises:
        LeanloopError: ``scheme`` or ``split`` is not one of the export's, or a repository is
            not in the database.
    """
    import shutil

    from leanloop.data import open_dataset
    from leanloop.data.leandojo import SCHEMES, SPLITS

    if scheme not in SCHEMES:
        raise LeanloopError(
            f"unknown split scheme {scheme!r}", hint=f"one of: {', '.join(SCHEMES)}"
        )
    if split not in SPLITS:
        raise LeanloopError(f"unknown split {split!r}", hint=f"one of: {', '.join(SPLITS)}")
    output_path = Path(output_path)
    chosen = list(database.get_repositories() if repositories is None else repositories)
    lines: list[str] = []
    if chosen:
        export = output_path.with_name(f".{output_path.name}.export")
        try:
            database.export_merged_data(chosen, export)
            for theorem in open_dataset(export / scheme / f"{split}.json").iter_theorems():
                lines.extend(row.model_dump_json() for row in progress_rows(theorem))
        finally:
            shutil.rmtree(export, ignore_errors=True)
    write_text_atomic(output_path, "".join(line + "\n" for line in lines))
    return len(lines)


def progress_rows(theorem: Theorem) -> list[ProgressRow]:
    """A ``ProgressRow`` per step of the theorem's traced proof (none when it has no traced
    tactic or a ``sorry`` step)."""
    tactics = [t.tactic for t in theorem.traced_tactics]
    if not tactics or any(t.is_sorry for t in theorem.traced_tactics):
        return []
    return [
        ProgressRow(
            goal=step.state_before,
            prefix="\n".join(tactics[:index]),
            tactic=step.tactic,
            steps_remaining=len(tactics) - 1 - index,
            theorem=str(theorem.key),
        )
        for index, step in enumerate(theorem.traced_tactics)
    ]


def read_progress_rows(path: str | Path) -> list[ProgressRow]:
    """The rows of a progress JSONL file; a bad row is an error naming its line and field."""
    path = Path(path)
    if not path.is_file():
        raise LeanloopError(
            f"progress data file {path} does not exist",
            hint="write one with build_progress_dataset(database, path)",
        )
    rows: list[ProgressRow] = []
    for item in iter_jsonl(path):
        try:
            rows.append(ProgressRow.model_validate(item.value))
        except ValidationError as exc:
            error = exc.errors()[0]
            field = str(error["loc"][0]) if error["loc"] else None
            problem = "missing" if error["type"] == "missing" else error["msg"]
            if field is None:
                problem = "expected a JSON object"
            raise DataFormatError(
                path, problem.removeprefix("Value error, "), line=item.line, field=field
            ) from None
    if not rows:
        raise LeanloopError(
            f"progress data file {path} is empty",
            hint="build it from a database holding traced proofs",
        )
    return rows


def split_rows(
    rows: Sequence[ProgressRow], eval_ratio: float, seed: int
) -> tuple[list[ProgressRow], list[ProgressRow]]:
    """Train and validation rows. Rows carrying a ``theorem`` are split by theorem, so that no
    proof is on both sides; other rows are split one by one. Seeded."""
    groups: dict[str, list[ProgressRow]] = {}
    for number, row in enumerate(rows):
        groups.setdefault(row.theorem or f"#row{number}", []).append(row)
    keys = sorted(groups)
    random.Random(seed).shuffle(keys)
    count = len(keys)
    n_eval = min(count - 1, max(1, round(count * eval_ratio)))
    if n_eval < 1:
        raise LeanloopError(
            f"cannot split {count} proof(s) into training and validation data",
            hint="add more rows (at least two theorems) to the progress data",
        )
    evaluation = [row for key in keys[:n_eval] for row in groups[key]]
    training = [row for key in keys[n_eval:] for row in groups[key]]
    return training, evaluation
