"""leanloop: AI-assisted theorem proving in Lean 4 (trace, remember, train, prove, serve).

Top-level names are loaded on first use, so ``import leanloop`` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

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

if TYPE_CHECKING:  # what type checkers see; at run time a name loads on first use
    from leanloop.agent.base_agent import BaseAgent as BaseAgent
    from leanloop.agent.external_agent import ExternalAgent as ExternalAgent
    from leanloop.agent.hf_agent import HFAgent as HFAgent
    from leanloop.agent.lean_agent import LeanAgent as LeanAgent
    from leanloop.data.leandojo.reader import LeanDojoDataset as LeanDojoDataset
    from leanloop.data.leandojo.writer import LeanDojoWriter as LeanDojoWriter
    from leanloop.data.records import Premise as Premise
    from leanloop.data.records import Repository as Repository
    from leanloop.data.records import SourceFile as SourceFile
    from leanloop.data.records import Theorem as Theorem
    from leanloop.data.records import TheoremStatus as TheoremStatus
    from leanloop.data.records import TracedTactic as TracedTactic
    from leanloop.database.dynamic import DynamicDatabase as DynamicDatabase
    from leanloop.database.generate import generate_benchmark as generate_benchmark
    from leanloop.database.splits import SplitConfig as SplitConfig
    from leanloop.errors import LeanloopError as LeanloopError
    from leanloop.lean.pantograph import PantographServer as PantographServer
    from leanloop.lean.project import open_project as open_project
    from leanloop.lean.repl import ReplServer as ReplServer
    from leanloop.ml.generation import TacticGenerator as TacticGenerator
    from leanloop.prover.base import BaseProver as BaseProver
    from leanloop.prover.config import ProverConfig as ProverConfig
    from leanloop.prover.external import ExternalProver as ExternalProver
    from leanloop.prover.hf import HFProver as HFProver
    from leanloop.prover.replay import ReplayServer as ReplayServer
    from leanloop.prover.retrieval import RetrievalProver as RetrievalProver
    from leanloop.trainer.grpo import GRPOTrainer as GRPOTrainer
    from leanloop.trainer.lean_reward import LeanCheckedReward as LeanCheckedReward
    from leanloop.trainer.progress import ProgressTrainer as ProgressTrainer
    from leanloop.trainer.retrieval import RetrievalTrainer as RetrievalTrainer
    from leanloop.trainer.retrieval_config import TrainingConfig as TrainingConfig
    from leanloop.trainer.sft import SFTTrainer as SFTTrainer
else:
    __getattr__ = lazy_exports(__name__, _EXPORTS)
