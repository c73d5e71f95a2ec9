"""The progress scorer: a trained regression model that predicts how many proof steps remain
after a tactic, loaded from ``$LEANPROGRESS_MODEL`` or a path, for the server and the provers."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from pathlib import Path

from leanloop.errors import LeanloopError

#: Environment variable naming the directory of a trained progress model.
MODEL_ENV = "LEANPROGRESS_MODEL"
#: Config attributes holding how targets were scaled for training: y' = (y - mean) / std.
MEAN_KEY = "leanloop_steps_mean"
STD_KEY = "leanloop_steps_std"
MAX_LENGTH_KEY = "leanloop_max_length"  # the token limit the model was trained with


def progress_text(goal: str, prefix: str | None, tactic: str) -> str:
    """What the regressor reads: the candidate tactic, the goal, then the proof so far (last, so
    that truncation drops it first)."""
    parts = [f"tactic: {tactic.strip()}", f"goal: {goal.strip()}"]
    if prefix and prefix.strip():
        parts.append(f"proof so far: {prefix.strip()}")
    return "\n".join(parts)


def _model_directory(model_path: str | os.PathLike | None) -> Path:
    if model_path is None:
        from leanloop.settings import Settings

        value = Settings.from_env().progress_model
        if value is None:
            raise LeanloopError(
                f"no progress model: ${MODEL_ENV} is not set",
                hint=f"train one with ProgressTrainer and set {MODEL_ENV} to its output directory",
            )
        model_path = value
    path = Path(model_path).expanduser()
    if not path.is_dir():
        raise LeanloopError(
            f"progress model {path} does not exist",
            hint=f"set {MODEL_ENV} to the output directory of ProgressTrainer",
        )
    config = path / "config.json"
    has_weights = any(path.glob("*.safetensors")) or any(path.glob("pytorch_model*.bin"))
    if not config.is_file() or not has_weights:
        raise LeanloopError(
            f"{path} holds no progress model (config.json and weights expected)",
            hint="point to the output directory of ProgressTrainer.train()",
        )
    data = json.loads(config.read_text())
    if data.get("problem_type") != "regression" or MEAN_KEY not in data:
        raise LeanloopError(
            f"{path} holds a model that is not a progress regressor",
            hint="train one with ProgressTrainer",
        )
    return path


class ProgressScorer:
    """Predicts the number of steps remaining after ``tactic`` is applied to ``goal``."""

    def __init__(
        self,
        model_path: str | os.PathLike | None = None,
        *,
        device: str | None = None,
        batch_size: int = 32,
        max_length: int | None = None,
    ) -> None:
        """``max_length`` defaults to the token limit the model was trained with (texts are cut
        as in training), else 512."""
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        from leanloop.ml.device import detect_hardware
        from leanloop.ml.pretrained import load_pretrained

        self.path = _model_directory(model_path)
        self.tokenizer = load_pretrained(AutoTokenizer, self.path)
        self.model = load_pretrained(AutoModelForSequenceClassification, self.path)
        self.device = torch.device(device or detect_hardware().device)
        self.model.to(self.device).eval()
        self.mean = float(getattr(self.model.config, MEAN_KEY, 0.0))
        self.std = float(getattr(self.model.config, STD_KEY, 1.0)) or 1.0
        self.batch_size = batch_size
        if max_length is None:
            max_length = int(getattr(self.model.config, MAX_LENGTH_KEY, None) or 512)
        limit = getattr(self.model.config, "max_position_embeddings", None) or max_length
        self.max_length = min(max_length, int(limit))

    def predict(self, goal: str, prefix: str | None, tactic: str) -> float:
        """Steps expected to remain after ``tactic`` (never negative)."""
        return self.predict_batch([(goal, prefix, tactic)])[0]

    def predict_batch(self, items: Sequence[tuple[str, str | None, str]]) -> list[float]:
        """``predict`` for many ``(goal, prefix, tactic)`` triples, ``batch_size`` at a time."""
        import torch

        texts = [progress_text(goal, prefix, tactic) for goal, prefix, tactic in items]
        results: list[float] = []
        for start in range(0, len(texts), self.batch_size):
            encoded = self.tokenizer(
                texts[start : start + self.batch_size],
                padding=True,
                truncation=True,
                max_length=self.max_length,
                return_tensors="pt",
            ).to(self.device)
            with torch.no_grad():
                scaled = self.model(**encoded).logits.squeeze(-1).float().cpu()
            results.extend(_steps(float(v) * self.std + self.mean) for v in scaled)
        return results


#: LeanDojo-v2's name for the scorer.
LeanProgressScorer = ProgressScorer


def _steps(value: float) -> float:
    """A prediction as a number of steps: never below 0; a non-finite output (a broken model)
    is infinitely far from done rather than clipped to "done"."""
    return max(0.0, value) if math.isfinite(value) else math.inf
