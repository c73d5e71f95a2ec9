"""How well a premise retriever ranks the premises each tactic of a dataset split used: R@1, R@10
and MRR over the split's steps (or over each repository's steps), among the dataset's candidate
pool (its corpus.jsonl, or the premises of its train split's proofs; see ``CandidatePool``),
indexed once. A premise the pool lacks counts as a miss."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from leanloop.data.records import Repository
from leanloop.errors import LeanloopError
from leanloop.retrieval.corpus import CandidatePool
from leanloop.retrieval.examples import (
    RetrievalStep,
    load_all_splits,
    retrieval_steps,
    split_file,
)
from leanloop.retrieval.index import Embedder, PremiseIndex, evaluate_index
from leanloop.retrieval.metrics import RetrievalMetrics


def evaluation_data(
    dataset: str | Path, scheme: str, split: str
) -> tuple[list[RetrievalStep], CandidatePool]:
    """The steps of ``split`` that use a premise (every premise they used as positives) and the
    candidate pool they are ranked among."""
    split_file(dataset, scheme, split)  # a clear error for a missing split
    theorems = load_all_splits(dataset, scheme)
    pool = CandidatePool.of_dataset(dataset, theorems["train"])
    return retrieval_steps(theorems[split]), pool


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
    step's premises ranked among the ``k`` best of the candidate pool accessible from its
    theorem; the result names the pool."""
    steps, pool = evaluation_data(dataset, scheme, split)
    if not steps:
        raise LeanloopError(
            f"{dataset}/{scheme}/{split}.json has no tactic step using a premise",
            hint="evaluate on another split or a larger export",
        )
    index = _index(retriever, pool, dataset, batch_size)
    return evaluate_index(index, steps, k=k).among(pool.source, pool.size)


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
    """``evaluate_retriever`` on the steps of each repository's theorems in turn (the pool
    indexed once); a repository without a step using a premise gets metrics over 0 steps (all
    of them when no step of the split uses one: nothing is indexed then)."""
    steps, pool = evaluation_data(dataset, scheme, split)
    if not steps:
        return [RetrievalMetrics(0, 0, 0, 0).among(pool.source, pool.size) for _ in repositories]
    index = _index(retriever, pool, dataset, batch_size)
    results = []
    for repository in repositories:
        own = [s for s in steps if s.belongs_to(repository.url, repository.commit)]
        metrics = evaluate_index(index, own, k=k) if own else RetrievalMetrics(0, 0, 0, 0)
        results.append(metrics.among(pool.source, pool.size))
    return results


def _index(
    retriever: Embedder, pool: CandidatePool, dataset: str | Path, batch_size: int
) -> PremiseIndex:
    if pool.size == 0:
        raise LeanloopError(
            f"{dataset}: no candidate premise to rank ({pool.describe()})",
            hint="give a dataset with corpus.jsonl or a train split whose tactics use premises",
        )
    return PremiseIndex.build(retriever, pool.corpus, batch_size=batch_size)
