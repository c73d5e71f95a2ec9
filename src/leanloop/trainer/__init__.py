"""Trainers that learn from the database's exports, repository by repository.

The classes are loaded on first use, so ``import leanloop.trainer`` stays cheap.
"""

from __future__ import annotations

from leanloop.lazy import lazy_exports

_EXPORTS = {
    "SFTTrainer": "leanloop.trainer.sft",
    "SFTTrainerConfig": "leanloop.trainer.sft_config",
    "GRPOTrainer": "leanloop.trainer.grpo",
    "GRPOTrainerConfig": "leanloop.trainer.grpo_config",
    "LeanCheckedReward": "leanloop.trainer.lean_reward",
    "RetrievalTrainer": "leanloop.trainer.retrieval",
    "TrainingConfig": "leanloop.trainer.retrieval_config",
    "ProgressTrainer": "leanloop.trainer.progress",
    "ProgressTrainerConfig": "leanloop.trainer.progress_config",
    "evaluate_tactics": "leanloop.trainer.evaluation",
    "TacticAccuracy": "leanloop.trainer.evaluation",
}

__all__ = list(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
