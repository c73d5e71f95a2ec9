"""transformers callbacks the tactic-generator trainers add to TRL's: a time limit, progress bars
that say what they count, and progress lines of an evaluation."""

from __future__ import annotations

import time
from collections.abc import Callable

from leanloop.words import plural


def time_limit(seconds: float):
    """A transformers callback stopping training after the first optimizer step that ends
    ``seconds`` after training began."""
    from transformers import TrainerCallback

    class TimeLimit(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            self.deadline = time.perf_counter() + seconds

        def on_step_end(self, args, state, control, **kwargs):
            if time.perf_counter() >= self.deadline:
                control.should_training_stop = True

    return TimeLimit()


def labelled_progress(training: str, evaluation: str):
    """transformers' progress bars (a ``ProgressCallback``) with what each one counts written
    on it: the training steps on ``training``, the evaluation after it as ``evaluation``
    says."""
    from transformers import ProgressCallback

    class LabelledProgress(ProgressCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            super().on_train_begin(args, state, control, **kwargs)
            if self.training_bar is not None:
                self.training_bar.set_description(f"training on {training}")

        def on_prediction_step(self, args, state, control, eval_dataloader=None, **kwargs):
            fresh = self.prediction_bar is None
            super().on_prediction_step(
                args, state, control, eval_dataloader=eval_dataloader, **kwargs
            )
            if fresh and self.prediction_bar is not None and evaluation:
                self.prediction_bar.set_description(evaluation)

    return LabelledProgress()


def evaluation_lines(unit: str, say: Callable[[str], None], every_seconds: float = 10.0):
    """A transformers callback saying how far an evaluation has come: after its first
    ``unit``, then at most every ``every_seconds`` seconds, and after its last."""
    from transformers import TrainerCallback

    class EvaluationLines(TrainerCallback):
        def __init__(self) -> None:
            self.done = 0
            self.started = self.said = time.perf_counter()

        def on_train_end(self, args, state, control, **kwargs):
            self.started = time.perf_counter()  # the evaluation after training starts

        def on_prediction_step(self, args, state, control, eval_dataloader=None, **kwargs):
            if not state.is_world_process_zero:
                return
            now = time.perf_counter()
            self.done += 1
            total = len(eval_dataloader) if eval_dataloader is not None else None
            last = total is not None and self.done >= total
            if self.done == 1 or last or now - self.said >= every_seconds:
                self.said = now
                counted = (
                    f"{self.done} of {plural(total, unit)}" if total else plural(self.done, unit)
                )
                say(f"evaluated {counted} ({now - self.started:.0f} s)")

        def on_evaluate(self, args, state, control, **kwargs):
            self.done = 0
            self.started = time.perf_counter()

    return EvaluationLines()
