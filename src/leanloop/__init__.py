"""leanloop: AI-assisted theorem proving in Lean 4 (trace, remember, train, prove, serve).

Top-level names are loaded on first use, so ``import leanloop`` stays cheap.
"""

from __future__ import annotations

from leanloop.lazy import lazy_exports

__version__ = "0.1.0"

_EXPORTS = {
    "DynamicDatabase": "leanloop.database.dynamic",
    "SplitConfig": "leanloop.database.splits",
    "generate_benchmark": "leanloop.database.generate",
    "LeanDojoDataset": "leanloop.data.leandojo.reader",
    "LeanDojoWriter": "leanloop.data.leandojo.writer",
    "Repository": "leanloop.data.records",
    "Theorem": "leanloop.data.records",
    "TracedTactic": "leanloop.data.records",
    "Premise": "leanloop.data.records",
    "SourceFile": "leanloop.data.records",
    "TheoremStatus": "leanloop.data.records",
    "LeanloopError": "leanloop.errors",
    "SFTTrainer": "leanloop.trainer.sft",
    "GRPOTrainer": "leanloop.trainer.grpo",
    "RetrievalTrainer": "leanloop.trainer.retrieval",
    "TrainingConfig": "leanloop.trainer.retrieval_config",
    "ProgressTrainer": "leanloop.trainer.progress",
    "LeanCheckedReward": "leanloop.trainer.lean_reward",
    "TacticGenerator": "leanloop.ml.generation",
    "ReplServer": "leanloop.lean.repl",
    "PantographServer": "leanloop.lean.pantograph",
    "open_project": "leanloop.lean.project",
    "BaseProver": "leanloop.prover.base",
    "HFProver": "leanloop.prover.hf",
    "RetrievalProver": "leanloop.prover.retrieval",
    "ExternalProver": "leanloop.prover.external",
    "ProverConfig": "leanloop.prover.config",
    "ReplayServer": "leanloop.prover.replay",
    "BaseAgent": "leanloop.agent.base_agent",
    "HFAgent": "leanloop.agent.hf_agent",
    "LeanAgent": "leanloop.agent.lean_agent",
    "ExternalAgent": "leanloop.agent.external_agent",
}

__all__ = ["__version__", *_EXPORTS]

__getattr__ = lazy_exports(__name__, _EXPORTS)
