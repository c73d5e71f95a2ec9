"""``lean_dojo_v2.lean_agent``: ``DynamicDatabase``, ``TrainingConfig`` and ``ProverConfig``;
``python -m lean_dojo_v2.lean_agent --config FILE`` runs ``LeanAgent`` from a YAML file (see
``lean_dojo_v2.agent.lean_agent.main``)."""

from __future__ import annotations

from lean_dojo_v2.database import DynamicDatabase
from lean_dojo_v2.lean_agent.config import ProverConfig, TrainingConfig

__all__ = ["DynamicDatabase", "ProverConfig", "TrainingConfig"]
