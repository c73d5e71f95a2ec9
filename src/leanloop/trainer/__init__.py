"""Trainers that learn from the database's exports, repository by repository.

The classes are loaded on first use, so ``import leanloop.trainer`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

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


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'leanloop.trainer' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
