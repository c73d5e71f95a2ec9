"""``lean_dojo_v2.trainer.grpo_trainer``: ``GRPOTrainer`` is leanloop's
(``leanloop.trainer.grpo.GRPOTrainer``), whose arguments are LeanDojo-v2's:
``GRPOTrainer(model_name, reward_func, output_dir="outputs", epochs_per_repo=1, batch_size=1,
lr=2e-5, lora_config=None)``; ``reward_func(completions, **kwargs)`` returns one reward per
completion (a list or a 1-D tensor)."""

from __future__ import annotations

from leanloop.trainer.grpo import GRPOTrainer

__all__ = ["GRPOTrainer"]
