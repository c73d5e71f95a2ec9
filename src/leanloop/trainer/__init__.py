"""Trainers that learn from the database's exports, repository by repository.

The classes are loaded on first use, so ``import leanloop.trainer`` stays cheap.
"""

from __future__ import annotations

from leanloop.lazy import lazy_exports

_EXPORTS = {
    "SFTTrainer": "leanloop.trainer.sft",
    "GRPOTrainer": "leanloop.trainer.grpo",
    "LeanCheckedReward": "leanloop.trainer.lean_reward",
    "RetrievalTrainer": "leanloop.trainer.retrieval",
    "TrainingConfig": "leanloop.trainer.retrieval",
    "ProgressTrainer": "leanloop.trainer.progress",
    "evaluate_tactics": "leanloop.trainer.evaluation",
    "TacticAccuracy": "leanloop.trainer.evaluation",
}

__all__ = list(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
