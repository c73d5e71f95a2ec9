"""``lean_dojo_v2.agent``: ``BaseAgent``, ``HFAgent``, ``LeanAgent`` and ``ExternalAgent``,
leanloop's with LeanDojo-v2's defaults (loaded on first use)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from leanloop.lazy import lazy_exports

_EXPORTS = {
    "BaseAgent": "lean_dojo_v2.agent.base_agent",
    "HFAgent": "lean_dojo_v2.agent.hf_agent",
    "LeanAgent": "lean_dojo_v2.agent.lean_agent",
    "ExternalAgent": "lean_dojo_v2.agent.external_agent",
}

__all__ = list(_EXPORTS)

if TYPE_CHECKING:
    from lean_dojo_v2.agent.base_agent import BaseAgent as BaseAgent
    from lean_dojo_v2.agent.external_agent import ExternalAgent as ExternalAgent
    from lean_dojo_v2.agent.hf_agent import HFAgent as HFAgent
    from lean_dojo_v2.agent.lean_agent import LeanAgent as LeanAgent
else:
    __getattr__ = lazy_exports(__name__, _EXPORTS)
