"""Agents that run the whole loop on repositories (``HFAgent``, ``LeanAgent``,
``ExternalAgent`` on ``BaseAgent``), the proving of open sorries with the verified write-back of
proofs into a user's Lean files (``prove_sorries``, ``SorryFiller``), and the evaluation of
trained checkpoints.

Names are loaded on first use, so importing this package does not import torch."""

from __future__ import annotations

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

__getattr__ = lazy_exports(__name__, _EXPORTS)
