"""``lean_dojo_v2.trainer``: the four trainers, leanloop's (loaded on first use, so importing
this package does not import torch)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from leanloop.lazy import lazy_exports

_EXPORTS = {
    "SFTTrainer": "lean_dojo_v2.trainer.sft_trainer",
    "GRPOTrainer": "lean_dojo_v2.trainer.grpo_trainer",
    "RetrievalTrainer": "lean_dojo_v2.trainer.retrieval_trainer",
    "ProgressTrainer": "lean_dojo_v2.trainer.progress_trainer",
}

__all__ = list(_EXPORTS)

if TYPE_CHECKING:
    from lean_dojo_v2.trainer.grpo_trainer import GRPOTrainer as GRPOTrainer
    from lean_dojo_v2.trainer.progress_trainer import ProgressTrainer as ProgressTrainer
    from lean_dojo_v2.trainer.retrieval_trainer import RetrievalTrainer as RetrievalTrainer
    from lean_dojo_v2.trainer.sft_trainer import SFTTrainer as SFTTrainer
else:
    __getattr__ = lazy_exports(__name__, _EXPORTS)
