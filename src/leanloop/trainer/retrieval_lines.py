"""The retriever trainer's progress lines: a Lightning callback that says how training goes, one
line at a time, when Lightning's progress bar is off; and the lines Lightning's CSV logger wrote,
read back for the training curves."""

from __future__ import annotations

import csv
import time
from collections.abc import Callable
from pathlib import Path

from leanloop.words import percent, plural


def training_lines(
    say: Callable[[str], None],
    every_seconds: float = 30.0,
    label: str = "retriever",
    max_seconds: float | None = None,
):
    """A Lightning callback saying how training goes, one line at a time: what it will do when
    it starts, the epoch, step and training loss at most every ``every_seconds`` seconds and
    after each epoch (with R@10 on the val split when it was measured), and where it ended
    (``max_seconds``: the time limit, to say up front). The retriever trainer uses it when
    Lightning's progress bar is off."""
    import lightning.pytorch as pl

    def number(value) -> float | None:
        try:
            return float(value)
        except (TypeError, ValueError):
            return None

    class TrainingLines(pl.Callback):
        def __init__(self) -> None:
            self.started = self.said = 0.0
            self.loss: float | None = None

        def on_train_start(self, trainer, pl_module) -> None:
            self.started = self.said = time.perf_counter()
            batches = trainer.num_training_batches
            limits = []
            if trainer.max_epochs and trainer.max_epochs > 0:
                limits.append(f"at most {plural(trainer.max_epochs, 'epoch')}")
            if trainer.max_steps and trainer.max_steps > 0:
                limits.append(f"at most {plural(trainer.max_steps, 'step')}")
            if max_seconds is not None:
                limits.append(f"{max_seconds:.0f} s at most")
            per_epoch = (
                f"{plural(batches, 'batch')} per epoch"
                if isinstance(batches, int)
                else "batches per epoch unknown"
            )
            say(f"{label}: training, {per_epoch}" + (f" ({', '.join(limits)})" if limits else ""))

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
            loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
            self.loss = number(loss) if loss is not None else self.loss
            now = time.perf_counter()
            if now - self.said >= every_seconds:
                self.said = now
                say(f"{label}: {self._where(trainer)}, {now - self.started:.0f} s")

        def on_train_epoch_end(self, trainer, pl_module) -> None:
            self.said = time.perf_counter()
            recall = number(trainer.callback_metrics.get("Recall@10_val"))
            measured = "" if recall is None else f", R@10 on val {percent(recall)}"
            say(
                f"{label}: epoch {trainer.current_epoch + 1} ended at step {trainer.global_step}"
                f"{self._loss()}{measured}, {self.said - self.started:.0f} s"
            )

        def on_train_end(self, trainer, pl_module) -> None:
            say(
                f"{label}: training ended after {plural(trainer.global_step, 'step')} in "
                f"{time.perf_counter() - self.started:.0f} s"
            )

        def _loss(self) -> str:
            return "" if self.loss is None else f", loss {self.loss:.3f}"

        def _where(self, trainer) -> str:
            return f"epoch {trainer.current_epoch + 1}, step {trainer.global_step}{self._loss()}"

    return TrainingLines()


def read_metrics_log(path: Path) -> list[dict[str, float]]:
    """Rows of a Lightning ``metrics.csv`` as dicts holding only the values they have."""
    if not path.is_file():
        return []
    rows = []
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            entry: dict[str, float] = {}
            for key, value in row.items():
                if value not in (None, ""):
                    try:
                        entry[key] = float(value)
                    except ValueError:
                        continue
            if "step" in entry:
                rows.append(entry)
    return rows
