"""Premise retrieval shared by the trainers and the provers: the premise corpus and its
accessibility rules, the bi-encoder, the premise index, the metrics and the training data.

Names are loaded on first use, so importing this package does not import torch or Lightning.
"""

from __future__ import annotations

from leanloop.lazy import lazy_exports

_EXPORTS = {
    "Corpus": "leanloop.retrieval.corpus",
    "premise_text": "leanloop.retrieval.corpus",
    "RetrievalStep": "leanloop.retrieval.examples",
    "retrieval_steps": "leanloop.retrieval.examples",
    "load_split": "leanloop.retrieval.examples",
    "RetrievalMetrics": "leanloop.retrieval.metrics",
    "evaluate_rankings": "leanloop.retrieval.metrics",
    "PremiseRetriever": "leanloop.retrieval.model",
    "EWCState": "leanloop.retrieval.ewc",
    "PremiseIndex": "leanloop.retrieval.index",
    "RetrievalDataModule": "leanloop.retrieval.datamodule",
}

__all__ = list(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
