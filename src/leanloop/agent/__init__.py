"""Agents that run the whole loop on repositories, and the verified write-back of proofs into a
user's Lean files.

Names are loaded on first use, so importing this package does not import torch."""

from __future__ import annotations

from leanloop.lazy import lazy_exports

_EXPORTS = {
    "SorryFiller": "leanloop.agent.sorry_filling",
    "FillResult": "leanloop.agent.sorry_filling",
    "FillStatus": "leanloop.agent.sorry_filling",
    "BranchCommitter": "leanloop.agent.git_branch",
}

__all__ = list(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
