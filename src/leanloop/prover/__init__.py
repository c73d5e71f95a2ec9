"""Proving: best-first (or depth-first) proof search over a ``LeanServer`` with a tactic
generator, the provers users know (``HFProver``, ``RetrievalProver``, ``ExternalProver``),
whole-proof mode with its screen of candidates, the offline replay environment
(``ReplayServer``, the ``recorded`` diagnostic) and the one engine that runs a prover over many
theorems, in-process or on Ray (``run_proofs``, ``evaluate``).

Heavy dependencies (torch, transformers, openai, ray) load only when a prover first needs them.
"""

from __future__ import annotations

from leanloop.lazy import lazy_exports

_EXPORTS = {
    "BaseProver": "leanloop.prover.base",
    "ChatGenerator": "leanloop.prover.external",
    "EvaluationReport": "leanloop.prover.report",
    "ExternalProver": "leanloop.prover.external",
    "HFProver": "leanloop.prover.hf",
    "ProofMode": "leanloop.prover.config",
    "ProofRun": "leanloop.prover.run",
    "ProofWorker": "leanloop.prover.run",
    "ProverConfig": "leanloop.prover.config",
    "RecordedGenerator": "leanloop.prover.recorded",
    "RecordedProver": "leanloop.prover.recorded",
    "ReplayServer": "leanloop.prover.replay",
    "RetrievalProver": "leanloop.prover.retrieval",
    "SearchResult": "leanloop.prover.result",
    "Target": "leanloop.prover.target",
    "evaluate": "leanloop.prover.run",
    "run_proofs": "leanloop.prover.run",
    "search": "leanloop.prover.proof_search",
}

__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
