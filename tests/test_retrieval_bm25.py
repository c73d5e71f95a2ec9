"""BM25, the lexical baseline, on the real LeanDojo sample."""

from __future__ import annotations

from leanloop.retrieval.bm25 import bm25_rankings, bm25_words, evaluate_bm25
from leanloop.retrieval.corpus import Corpus
from leanloop.retrieval.examples import retrieval_steps
from tests.helpers import sample_theorems


def test_words_split_on_punctuation_and_case():
    assert bm25_words("Nat.succ_le (h : a ≤ b)") == ["nat", "succ", "le", "h", "a", "b"]


def test_rankings_respect_accessibility_and_find_premises_written_in_the_goal(sample_dir):
    theorems = sample_theorems(sample_dir)
    corpus = Corpus.from_theorems(theorems)
    steps = retrieval_steps(theorems, corpus)
    ranked = bm25_rankings(corpus, steps, k=10)
    assert len(ranked) == len(steps) > 100
    for step, names in zip(steps, ranked, strict=True):
        accessible = corpus.accessible_mask(step.file_path, step.position)
        allowed = {corpus[i].full_name for i in range(len(corpus)) if accessible[i]}
        assert set(names) <= allowed and len(names) <= 10
    metrics = evaluate_bm25(corpus, steps, k=100)
    assert metrics.steps == len(steps)
    assert 0.2 < metrics.recall_at_10 < 0.9  # far from chance among hundreds of premises
    assert metrics.recall_at_1 <= metrics.recall_at_10
