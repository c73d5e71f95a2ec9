"""How well a premise retriever ranks the premises each tactic of a dataset split used: R@1, R@10
and MRR over the split's steps, every premise of the dataset's corpus indexed once."""

from __future__ import annotations

from pathlib import Path

from leanloop.errors import LeanloopError
from leanloop.retrieval.corpus import Corpus
from leanloop.retrieval.examples import load_all_splits, retrieval_steps, split_file
from leanloop.retrieval.index import Embedder, PremiseIndex, evaluate_index
from leanloop.retrieval.metrics import RetrievalMetrics


def evaluate_retriever(
    retriever: Embedder,
    dataset: str | Path,
    *,
    scheme: str = "random",
    split: str = "test",
    k: int = 100,
    batch_size: int = 32,
) -> RetrievalMetrics:
    """R@1, R@10 and MRR of ``retriever`` on ``split`` of the LeanDojo export ``dataset``, each
    step's premises ranked among the ``k`` best of the corpus accessible from its theorem."""
    split_file(dataset, scheme, split)  # a clear error for a missing split
    theorems = load_all_splits(dataset, scheme)
    corpus = Corpus.from_dataset(dataset, [t for part in theorems.values() for t in part])
    steps = retrieval_steps(theorems[split], corpus)
    if not steps:
        raise LeanloopError(
            f"{dataset}/{scheme}/{split}.json has no tactic step using a corpus premise",
            hint="evaluate on another split or a larger export",
        )
    index = PremiseIndex.build(retriever, corpus, batch_size=batch_size)
    return evaluate_index(index, steps, k=k)
