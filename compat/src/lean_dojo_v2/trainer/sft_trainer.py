"""``lean_dojo_v2.trainer.sft_trainer``: ``SFTTrainer`` is leanloop's
(``leanloop.trainer.sft.SFTTrainer``), whose arguments are LeanDojo-v2's:
``SFTTrainer(model_name, output_dir="outputs", epochs_per_repo=1, batch_size=1, lr=2e-5,
lora_config=None)`` and ``train(repos, database, data_path)``."""

from __future__ import annotations

from leanloop.trainer.sft import SFTTrainer

__all__ = ["SFTTrainer"]
