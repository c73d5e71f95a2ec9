"""Proving: best-first (or depth-first) proof search over a ``LeanServer`` with a tactic
generator, the provers users know (``HFProver``, ``RetrievalProver``, ``ExternalProver``),
whole-proof mode with its screen of candidates, the offline replay environment
(``ReplayServer``, the ``recorded`` diagnostic) and the one engine that runs a prover over many
theorems, in-process or on Ray (``run_proofs``, ``evaluate``).

Heavy dependencies (torch, transformers, openai, ray) load only when a prover first needs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

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
if TYPE_CHECKING:  # what type checkers see; at run time a name loads on first use
    from leanloop.prover.base import BaseProver as BaseProver
    from leanloop.prover.config import ProofMode as ProofMode
    from leanloop.prover.config import ProverConfig as ProverConfig
    from leanloop.prover.external import ChatGenerator as ChatGenerator
    from leanloop.prover.external import ExternalProver as ExternalProver
    from leanloop.prover.hf import HFProver as HFProver
    from leanloop.prover.proof_search import search as search
    from leanloop.prover.recorded import RecordedGenerator as RecordedGenerator
    from leanloop.prover.recorded import RecordedProver as RecordedProver
    from leanloop.prover.replay import ReplayServer as ReplayServer
    from leanloop.prover.report import EvaluationReport as EvaluationReport
    from leanloop.prover.result import SearchResult as SearchResult
    from leanloop.prover.retrieval import RetrievalProver as RetrievalProver
    from leanloop.prover.run import ProofRun as ProofRun
    from leanloop.prover.run import ProofWorker as ProofWorker
    from leanloop.prover.run import evaluate as evaluate
    from leanloop.prover.run import run_proofs as run_proofs
    from leanloop.prover.target import Target as Target
else:
    __getattr__ = lazy_exports(__name__, _EXPORTS)
