"""The lifelong-learning record of LeanAgent's retriever: after each repository of the curriculum,
R@10 of the new checkpoint on the test theorems of every repository trained on so far, as a
matrix, with the continual-learning figures computed from it, written as JSON and a heatmap."""

from __future__ import annotations

import json
import logging
import statistics
from pathlib import Path

from pydantic import BaseModel, Field

from leanloop.atomic import write_figure_atomic, write_text_atomic
from leanloop.data.records import Repository
from leanloop.trainer.base import CurriculumStep
from leanloop.trainer.retrieval_config import TrainingConfig

log = logging.getLogger(__name__)

#: Files written next to the checkpoints.
MATRIX_JSON = "lifelong.json"
MATRIX_PNG = "lifelong.png"


class LifelongMatrix(BaseModel):
    """``recall[i][j]``: R@10 on repository ``j``'s test theorems of the checkpoint trained up to
    repository ``i`` (``j <= i``; None where repository ``j`` has no test step using a premise),
    premises ranked among the export's candidate pool (``CandidatePool``). With ``T``
    repositories and ``R = recall``:

    - average accuracy ``A = (1/T) Σ_j R[T-1][j]``: the last checkpoint on every repository;
    - backward transfer ``BWT = (1/(T-1)) Σ_{j<T-1} (R[T-1][j] - R[j][j])`` (Lopez-Paz and
      Ranzato, 2017): negative when learning later repositories hurt earlier ones;
    - forgetting ``F = (1/(T-1)) Σ_{j<T-1} max_{j<=l<T-1} (R[l][j] - R[T-1][j])``: how far each
      earlier repository fell from its best, as Chaudhry et al. define it (Riemannian Walk for
      Incremental Learning, ECCV 2018, eq. 1; also A-GEM, ICLR 2019). It is not clamped at 0: a
      repository whose last value is above every earlier one adds a negative term (the later
      training improved it), as in the paper's definition.

    Cells that are None are left out of the sums (and of the counts). The figures are None when
    nothing is left to average (BWT and F need two repositories).
    """

    repositories: list[str] = Field(default_factory=list, description="In training order.")
    checkpoints: list[str] = Field(default_factory=list, description="One per row.")
    recall: list[list[float | None]] = Field(
        default_factory=list, description="R@10 by (trained up to, evaluated on)."
    )
    steps: list[list[int]] = Field(
        default_factory=list, description="Test steps scored in each cell."
    )

    @property
    def average_accuracy(self) -> float | None:
        if not self.recall:
            return None
        values = [v for v in self.recall[-1] if v is not None]
        return statistics.fmean(values) if values else None

    @property
    def backward_transfer(self) -> float | None:
        last = len(self.recall) - 1
        values = [
            final - first
            for j in range(last)
            if (final := self.recall[last][j]) is not None
            and (first := self.recall[j][j]) is not None
        ]
        return statistics.fmean(values) if values else None

    @property
    def forgetting(self) -> float | None:
        last = len(self.recall) - 1
        values = []
        for j in range(last):
            final = self.recall[last][j]
            earlier = [r for i in range(j, last) if (r := self.recall[i][j]) is not None]
            if final is not None and earlier:
                values.append(max(earlier) - final)
        return statistics.fmean(values) if values else None

    def figures(self) -> dict[str, float | None]:
        return {
            "average_accuracy": self.average_accuracy,
            "backward_transfer": self.backward_transfer,
            "forgetting": self.forgetting,
        }

    def add_row(
        self, repository: str, checkpoint: str, recalls: list[float | None], steps: list[int]
    ) -> None:
        """The row of the checkpoint trained up to ``repository`` (the next in order)."""
        self.repositories.append(repository)
        self.checkpoints.append(checkpoint)
        self.recall.append(list(recalls))
        self.steps.append(list(steps))

    def write(self, directory: str | Path) -> list[Path]:
        """``lifelong.json`` (the matrix and the figures) and ``lifelong.png`` (a heatmap)."""
        directory = Path(directory)
        data = {**self.model_dump(mode="json"), **self.figures()}
        written = [directory / MATRIX_JSON]
        write_text_atomic(written[0], json.dumps(data, indent=1) + "\n")
        try:
            written.append(self.plot(directory / MATRIX_PNG))
        except ImportError:
            log.warning("no lifelong heatmap: matplotlib is not installed (leanloop[train])")
        return written

    def plot(self, path: str | Path) -> Path:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import numpy as np

        path = Path(path)
        size = len(self.repositories)
        grid = np.full((size, size), np.nan)
        for i, row in enumerate(self.recall):
            for j, value in enumerate(row):
                if value is not None:
                    grid[i, j] = value
        figure, axes = plt.subplots(figsize=(2.2 + 1.1 * size, 1.8 + 0.9 * size))
        image = axes.imshow(grid, vmin=0.0, vmax=1.0, cmap="viridis")
        for i in range(size):
            for j in range(size):
                if not np.isnan(grid[i, j]):
                    colour = "white" if grid[i, j] < 0.5 else "black"
                    axes.text(j, i, f"{grid[i, j]:.2f}", ha="center", va="center", color=colour)
        labels = [f"{n + 1}. {name}" for n, name in enumerate(self.repositories)]
        axes.set_xticks(range(size), labels, rotation=30, ha="right")
        axes.set_yticks(range(size), labels)
        axes.set_xlabel("evaluated on (test theorems)")
        axes.set_ylabel("trained up to")
        figure.colorbar(image, ax=axes, label="R@10")
        figures = self.figures()
        shown = ", ".join(
            f"{name.replace('_', ' ')} {value:.3f}"
            for name, value in figures.items()
            if value is not None
        )
        axes.set_title(shown or "R@10", fontsize=9)
        figure.tight_layout()
        write_figure_atomic(path, figure)
        plt.close(figure)
        return path


class LifelongEvaluator:
    """``after_step`` of ``RetrievalTrainer.train``: evaluates each new checkpoint on the test
    split of the export (the repositories trained on so far) and adds its row to ``matrix``,
    written to ``output_dir`` after every repository."""

    def __init__(self, config: TrainingConfig, output_dir: str | Path | None = None) -> None:
        self.config = config
        self.output_dir = Path(output_dir or config.output_dir)
        self.matrix = LifelongMatrix()

    def __call__(self, step: CurriculumStep) -> None:
        from leanloop.ml.device import detect_hardware
        from leanloop.retrieval.model import PremiseRetriever
        from leanloop.trainer.retrieval_evaluation import evaluate_retriever_by_repository

        device = detect_hardware().device if self.config.num_gpus else "cpu"
        model = PremiseRetriever.load(step.checkpoint_dir, device=device, freeze=True)
        metrics = evaluate_retriever_by_repository(
            model,
            step.dataset_dir,
            list(step.seen),
            scheme=self.config.split_scheme,
            split="test",
            k=self.config.num_retrieved,
            batch_size=self.config.eval_batch_size,
        )
        self.matrix.add_row(
            _label(step.repository),
            str(step.checkpoint_dir),
            [m.recall_at_10 if m.steps else None for m in metrics],
            [m.steps for m in metrics],
        )
        self.matrix.write(self.output_dir)
        log.info(
            "after %s: R@10 by repository %s",
            step.repository,
            ["-" if v is None else round(v, 3) for v in self.matrix.recall[-1]],
        )


def _label(repository: Repository) -> str:
    return f"{repository.name}@{repository.commit[:8]}"
