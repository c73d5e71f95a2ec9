"""``lean_dojo_v2.prover``: the provers, leanloop's with LeanDojo-v2's ``search`` (loaded on
first use)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from leanloop.lazy import lazy_exports

_EXPORTS = {
    "BaseProver": "lean_dojo_v2.prover.base_prover",
    "SearchResult": "lean_dojo_v2.prover.base_prover",
    "HFProver": "lean_dojo_v2.prover.hf_prover",
    "RetrievalProver": "lean_dojo_v2.prover.retrieval_prover",
    "ExternalProver": "lean_dojo_v2.prover.external_prover",
}

__all__ = list(_EXPORTS)

if TYPE_CHECKING:
    from lean_dojo_v2.prover.base_prover import BaseProver as BaseProver
    from lean_dojo_v2.prover.base_prover import SearchResult as SearchResult
    from lean_dojo_v2.prover.external_prover import ExternalProver as ExternalProver
    from lean_dojo_v2.prover.hf_prover import HFProver as HFProver
    from lean_dojo_v2.prover.retrieval_prover import RetrievalProver as RetrievalProver
else:
    __getattr__ = lazy_exports(__name__, _EXPORTS)
