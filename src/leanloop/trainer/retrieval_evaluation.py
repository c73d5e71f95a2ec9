"""How well a premise retriever ranks the premises each tactic of a dataset split used: R@1, R@10
and MRR over the split's steps (or over each repository's steps), every premise of the dataset's
corpus indexed once."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from leanloop.data.records import Repository
from leanloop.errors import LeanloopError
from leanloop.retrieval.corpus import Corpus
from leanloop.retrieval.examples import (
    RetrievalStep,
    load_all_splits,
    retrieval_steps,
    split_file,
)
from leanloop.retrieval.index import Embedder, PremiseIndex, evaluate_index
from leanloop.retrieval.metrics import RetrievalMetrics


def _steps_and_corpus(
    dataset: str | Path, scheme: str, split: str
) -> tuple[list[RetrievalStep], Corpus]:
    split_file(dataset, scheme, split)  # a clear error for a missing split
    theorems = load_all_splits(dataset, scheme)
    corpus = Corpus.from_dataset(dataset, [t for part in theorems.values() for t in part])
    return retrieval_steps(theorems[split], corpus), corpus


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
    steps, corpus = _steps_and_corpus(dataset, scheme, split)
    if not steps:
        raise LeanloopError(
            f"{dataset}/{scheme}/{split}.json has no tactic step using a corpus premise",
            hint="evaluate on another split or a larger export",
        )
    index = PremiseIndex.build(retriever, corpus, batch_size=batch_size)
    return evaluate_index(index, steps, k=k)


def evaluate_retriever_by_repository(
    retriever: Embedder,
    dataset: str | Path,
    repositories: Sequence[Repository],
    *,
    scheme: str = "random",
    split: str = "test",
    k: int = 100,
    batch_size: int = 32,
) -> list[RetrievalMetrics]:
    """``evaluate_retriever`` on the steps of each repository's theorems in turn (the corpus
    indexed once); a repository without a scorable step gets metrics over 0 steps."""
    steps, corpus = _steps_and_corpus(dataset, scheme, split)
    index = PremiseIndex.build(retriever, corpus, batch_size=batch_size)
    results = []
    for repository in repositories:
        own = [s for s in steps if s.belongs_to(repository.url, repository.commit)]
        results.append(evaluate_index(index, own, k=k) if own else RetrievalMetrics(0, 0, 0, 0))
    return results
