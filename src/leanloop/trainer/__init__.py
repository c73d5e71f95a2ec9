"""Trainers that learn from the database's exports, repository by repository.

The classes are loaded on first use, so ``import leanloop.trainer`` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

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

if TYPE_CHECKING:  # what type checkers see; at run time a name loads on first use
    from leanloop.trainer.evaluation import TacticAccuracy as TacticAccuracy
    from leanloop.trainer.evaluation import evaluate_tactics as evaluate_tactics
    from leanloop.trainer.grpo import GRPOTrainer as GRPOTrainer
    from leanloop.trainer.grpo_config import GRPOTrainerConfig as GRPOTrainerConfig
    from leanloop.trainer.lean_reward import LeanCheckedReward as LeanCheckedReward
    from leanloop.trainer.progress import ProgressTrainer as ProgressTrainer
    from leanloop.trainer.progress_config import ProgressTrainerConfig as ProgressTrainerConfig
    from leanloop.trainer.retrieval import RetrievalTrainer as RetrievalTrainer
    from leanloop.trainer.retrieval_config import TrainingConfig as TrainingConfig
    from leanloop.trainer.sft import SFTTrainer as SFTTrainer
    from leanloop.trainer.sft_config import SFTTrainerConfig as SFTTrainerConfig
else:
    __getattr__ = lazy_exports(__name__, _EXPORTS)
