"""Premise retrieval shared by the trainers and the provers: the premise corpus and its
accessibility rules, the bi-encoder, the premise index, the metrics and the training data.

Names are loaded on first use, so importing this package does not import torch or Lightning.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

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

if TYPE_CHECKING:  # what type checkers see; at run time a name loads on first use
    from leanloop.retrieval.corpus import Corpus as Corpus
    from leanloop.retrieval.corpus import premise_text as premise_text
    from leanloop.retrieval.datamodule import RetrievalDataModule as RetrievalDataModule
    from leanloop.retrieval.ewc import EWCState as EWCState
    from leanloop.retrieval.examples import RetrievalStep as RetrievalStep
    from leanloop.retrieval.examples import load_split as load_split
    from leanloop.retrieval.examples import retrieval_steps as retrieval_steps
    from leanloop.retrieval.index import PremiseIndex as PremiseIndex
    from leanloop.retrieval.metrics import RetrievalMetrics as RetrievalMetrics
    from leanloop.retrieval.metrics import evaluate_rankings as evaluate_rankings
    from leanloop.retrieval.model import PremiseRetriever as PremiseRetriever
else:
    __getattr__ = lazy_exports(__name__, _EXPORTS)
