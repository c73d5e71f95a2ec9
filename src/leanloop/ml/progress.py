"""The progress scorer: a trained regression model that predicts how many proof steps remain
after a tactic, loaded from ``$LEANPROGRESS_MODEL`` or a path, for the server and the provers."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Sequence
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


def leandojo_v2_text(goal: str, prefix: str | None, tactic: str) -> str:
    """What a progress model trained by LeanDojo-v2 (its ``ProgressTrainer`` or
    ``train_steps_model``) reads: ``Goal:``, ``Prefix:`` and ``Candidate tactic:`` sections, a
    missing prefix empty."""
    return f"Goal:\n{goal}\n\nPrefix:\n{prefix or ''}\n\nCandidate tactic:\n{tactic}"


def _model_directory(model_path: str | os.PathLike | None) -> tuple[Path, bool]:
    """The model's directory, and whether LeanDojo-v2 trained it (a regression head without
    leanloop's target scaling: it predicts steps as they are, from ``leandojo_v2_text``)."""
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
    if data.get("problem_type") != "regression" or len(data.get("id2label") or {0: 0}) != 1:
        raise LeanloopError(
            f"{path} holds a model that is not a progress regressor",
            hint="train one with ProgressTrainer",
        )
    return path, MEAN_KEY not in data


class ProgressScorer:
    """Predicts the number of steps remaining after ``tactic`` is applied to ``goal``, with a
    model trained by ``ProgressTrainer`` or by LeanDojo-v2 (its ``ProgressTrainer`` or
    ``train_steps_model``: read with LeanDojo-v2's text and unscaled output).

    Args:
        model_path: The model's directory (None: ``$LEANPROGRESS_MODEL``).
        device: ``cpu``, ``cuda``...; None or ``auto`` for the accelerator there is.
        batch_size: Texts scored per forward pass.
        max_length: Tokens a text keeps (default: the limit the model was trained with, else
            512).
        model_name: LeanDojo-v2's name for ``model_path`` (give one of the two).
        template: LeanDojo-v2's text template with ``{goal}``, ``{prefix}`` and ``{tactic}``
            (None: the text the model was trained on).

    Raises:
        LeanloopError: No model is given and ``$LEANPROGRESS_MODEL`` is not set, or the
            directory holds no progress regressor.
    """

    def __init__(
        self,
        model_path: str | os.PathLike | None = None,
        *,
        device: str | None = None,
        batch_size: int = 32,
        max_length: int | None = None,
        model_name: str | os.PathLike | None = None,
        template: str | None = None,
    ) -> None:
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        from leanloop.ml.device import detect_hardware
        from leanloop.ml.pretrained import load_pretrained

        if model_name is not None and model_path is not None:
            raise LeanloopError("give model_path or model_name (LeanDojo-v2's name), not both")
        self.path, self.leandojo_v2 = _model_directory(
            model_path if model_name is None else model_name
        )
        self.text: Callable[[str, str | None, str], str]
        if template is not None:
            self.text = _template_text(template)
        elif self.leandojo_v2:  # LeanDojo-v2's scorer strips the text it renders
            self.text = lambda goal, prefix, tactic: leandojo_v2_text(goal, prefix, tactic).strip()
        else:
            self.text = progress_text
        self.tokenizer = load_pretrained(AutoTokenizer, self.path)
        self.model = load_pretrained(AutoModelForSequenceClassification, self.path)
        self.device = torch.device(
            detect_hardware().device if device in (None, "", "auto") else device
        )
        self.model.to(self.device).eval()
        self.mean = float(getattr(self.model.config, MEAN_KEY, 0.0))
        self.std = float(getattr(self.model.config, STD_KEY, 1.0)) or 1.0
        self.batch_size = batch_size
        if max_length is None:
            max_length = int(getattr(self.model.config, MAX_LENGTH_KEY, None) or 512)
        limit = getattr(self.model.config, "max_position_embeddings", None) or max_length
        self.max_length = min(max_length, int(limit))

    def predict(self, goal: str, tactic: str, prefix: str | None = None) -> float:
        """Steps expected to remain after ``tactic`` is applied to ``goal`` (never negative).

        The order is LeanDojo-v2's, ``predict(goal, tactic, prefix)``, so that its positional
        calls read as they were meant; ``predict_batch`` takes ``(goal, prefix, tactic)``
        triples.

        Args:
            goal: The proof state.
            tactic: The candidate tactic.
            prefix: The proof's tactics before it (None or empty: none).

        Returns:
            The predicted steps remaining (``inf`` when the model's output is not a number).
        """
        return self.predict_batch([(goal, prefix, tactic)])[0]

    def predict_batch(self, items: Sequence[tuple[str, str | None, str]]) -> list[float]:
        """``predict`` for many ``(goal, prefix, tactic)`` triples, ``batch_size`` at a time.

        Args:
            items: ``(goal, prefix, tactic)`` triples.

        Returns:
            The predicted steps remaining of each, in order.
        """
        import torch

        texts = [self.text(goal, prefix, tactic) for goal, prefix, tactic in items]
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


def _template_text(template: str) -> Callable[[str, str | None, str], str]:
    """The text function of a LeanDojo-v2 template (``{goal}``, ``{prefix}``, ``{tactic}``)."""

    def text(goal: str, prefix: str | None, tactic: str) -> str:
        return template.format(goal=goal, prefix=prefix or "", tactic=tactic).strip()

    return text


def _steps(value: float) -> float:
    """A prediction as a number of steps: never below 0; a non-finite output (a broken model)
    is infinitely far from done rather than clipped to "done"."""
    return max(0.0, value) if math.isfinite(value) else math.inf
