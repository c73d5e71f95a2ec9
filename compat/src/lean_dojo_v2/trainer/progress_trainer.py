"""``lean_dojo_v2.trainer.progress_trainer``: ``ProgressTrainer`` is leanloop's
(``leanloop.trainer.progress.ProgressTrainer``), whose arguments are LeanDojo-v2's:
``ProgressTrainer(data_path, model_name="bert-base-uncased", output_dir="outputs",
max_length=512, batch_size=8, epochs=3.0, learning_rate=1e-5, eval_ratio=0.2, seed=42)`` on a
JSONL file of ``goal``/``prefix``/``tactic``/``steps_remaining`` rows; ``train()``."""

from __future__ import annotations

from leanloop.trainer.progress import ProgressTrainer

__all__ = ["ProgressTrainer"]
