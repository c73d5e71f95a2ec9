"""BM25, the lexical baseline of premise retrieval: premises ranked by the words they share with
the proof state (rank-bm25's Okapi BM25 over the same premise documents the dense retriever
reads, among the premises accessible from the theorem)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from leanloop.retrieval.corpus import Corpus
from leanloop.retrieval.examples import RetrievalStep
from leanloop.retrieval.metrics import RetrievalMetrics, evaluate_rankings

_WORD = re.compile(r"[^\W_]+")


def bm25_words(text: str) -> list[str]:
    """The words BM25 compares: runs of letters and digits (dots, underscores and other
    punctuation split them), in lower case."""
    return _WORD.findall(text.lower())


def bm25_rankings(
    corpus: Corpus,
    steps: Sequence[RetrievalStep],
    k: int,
    query: Callable[[str], str] = lambda text: text,
) -> list[list[str]]:
    """For each step, the names of the ``k`` accessible premises BM25 ranks highest; ``query``
    rewrites a proof state before it is split into words."""
    import numpy as np
    from rank_bm25 import BM25Okapi

    bm25 = BM25Okapi([bm25_words(text) for text in corpus.texts()])
    ranked = []
    for step in steps:
        scores = bm25.get_scores(bm25_words(query(step.context)))
        scores = np.where(corpus.accessible_mask(step.file_path, step.position), scores, -np.inf)
        order = np.argsort(-scores, kind="stable")[:k]
        ranked.append([corpus[int(i)].full_name for i in order if np.isfinite(scores[i])])
    return ranked


def evaluate_bm25(corpus: Corpus, steps: Sequence[RetrievalStep], k: int = 100) -> RetrievalMetrics:
    """R@1, R@10 and MRR of BM25 on ``steps``."""
    ranked = bm25_rankings(corpus, steps, k)
    return evaluate_rankings((s.positives, r) for s, r in zip(steps, ranked, strict=True))
