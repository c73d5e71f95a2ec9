"""Agents that run the whole loop on repositories (``HFAgent``, ``LeanAgent``,
``ExternalAgent`` on ``BaseAgent``), the proving of open sorries with the verified write-back of
proofs into a user's Lean files (``prove_sorries``, ``SorryFiller``), and the evaluation of
trained checkpoints.

Names are loaded on first use, so importing this package does not import torch."""

from __future__ import annotations

from typing import TYPE_CHECKING

from leanloop.lazy import lazy_exports

_EXPORTS = {
    "BaseAgent": "leanloop.agent.base_agent",
    "HFAgent": "leanloop.agent.hf_agent",
    "LeanAgent": "leanloop.agent.lean_agent",
    "LeanAgentConfig": "leanloop.agent.lean_agent",
    "ExternalAgent": "leanloop.agent.external_agent",
    "AgentRepository": "leanloop.agent.repositories",
    "prove_sorries": "leanloop.agent.proving",
    "SorryReport": "leanloop.agent.proving",
    "SorryRow": "leanloop.agent.proving",
    "LifelongMatrix": "leanloop.agent.lifelong",
    "Evaluation": "leanloop.agent.evaluation",
    "TacticEvaluation": "leanloop.agent.evaluation",
    "RetrievalEvaluation": "leanloop.agent.evaluation",
    "ProgressEvaluation": "leanloop.agent.evaluation",
    "SorryFiller": "leanloop.agent.sorry_filling",
    "FillResult": "leanloop.agent.sorry_filling",
    "FillStatus": "leanloop.agent.sorry_filling",
    "BranchWorkspace": "leanloop.agent.git_branch",
    "SorryWriter": "leanloop.agent.proving",
}

__all__ = list(_EXPORTS)

if TYPE_CHECKING:  # what type checkers see; at run time a name loads on first use
    from leanloop.agent.base_agent import BaseAgent as BaseAgent
    from leanloop.agent.evaluation import Evaluation as Evaluation
    from leanloop.agent.evaluation import ProgressEvaluation as ProgressEvaluation
    from leanloop.agent.evaluation import RetrievalEvaluation as RetrievalEvaluation
    from leanloop.agent.evaluation import TacticEvaluation as TacticEvaluation
    from leanloop.agent.external_agent import ExternalAgent as ExternalAgent
    from leanloop.agent.git_branch import BranchWorkspace as BranchWorkspace
    from leanloop.agent.hf_agent import HFAgent as HFAgent
    from leanloop.agent.lean_agent import LeanAgent as LeanAgent
    from leanloop.agent.lean_agent import LeanAgentConfig as LeanAgentConfig
    from leanloop.agent.lifelong import LifelongMatrix as LifelongMatrix
    from leanloop.agent.proving import SorryReport as SorryReport
    from leanloop.agent.proving import SorryRow as SorryRow
    from leanloop.agent.proving import SorryWriter as SorryWriter
    from leanloop.agent.proving import prove_sorries as prove_sorries
    from leanloop.agent.repositories import AgentRepository as AgentRepository
    from leanloop.agent.sorry_filling import FillResult as FillResult
    from leanloop.agent.sorry_filling import FillStatus as FillStatus
    from leanloop.agent.sorry_filling import SorryFiller as SorryFiller
else:
    __getattr__ = lazy_exports(__name__, _EXPORTS)
