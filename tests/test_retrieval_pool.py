"""The candidate pool of a retrieval evaluation: corpus.jsonl where the dataset has one, else the
premises the train split's proofs use (a premise only test proofs use is no candidate and counts
as a miss); the evaluation's result says which pool, and how many premises it holds. The pool is
the same for the retriever's validation, its evaluation and the BM25 baseline."""

from __future__ import annotations

import pytest

from leanloop.agent.evaluation import evaluate_retrieval
from leanloop.retrieval.bm25 import bm25_rankings, evaluate_bm25
from leanloop.retrieval.corpus import (
    CORPUS_JSONL,
    CORPUS_JSONL_AND_TRAIN,
    TRAIN_SPLIT,
    CandidatePool,
)
from leanloop.retrieval.datamodule import RetrievalDataModule
from leanloop.retrieval.examples import retrieval_steps
from leanloop.retrieval.index import PremiseIndex, rank_steps
from leanloop.retrieval.metrics import recall_at_k
from leanloop.retrieval.model import PremiseRetriever
from leanloop.trainer.retrieval_evaluation import evaluate_retriever, evaluation_data
from tests.helpers import corpus_from_theorems, sample_theorems, write_dataset


def used(theorems) -> set[str]:
    return {p.full_name for t in theorems for s in t.traced_tactics for p in s.premises}


@pytest.fixture(scope="module")
def splits(sample_dir):
    """The real sample: its first 120 theorems to train on, the other 57 to test on."""
    theorems = sample_theorems(sample_dir)
    return theorems[:120], theorems[120:]


@pytest.fixture(scope="module")
def test_only(splits) -> set[str]:
    """Premises that only the test proofs use."""
    train, test = splits
    found = used(test) - used(train)
    assert found  # the sample has them
    return found


@pytest.fixture(scope="module")
def no_corpus(tmp_path_factory, splits):
    train, test = splits
    return write_dataset(
        tmp_path_factory.mktemp("no-corpus"), {"random/train": train, "random/test": test}
    )


@pytest.fixture(scope="module")
def retriever(tiny_encoder):
    model = PremiseRetriever.load(tiny_encoder, max_seq_len=64)
    model.freeze()
    return model


def test_without_corpus_jsonl_the_pool_is_the_train_splits_premises(no_corpus, splits, test_only):
    train, test = splits
    steps, pool = evaluation_data(no_corpus, "random", "test")
    assert pool.source == TRAIN_SPLIT
    assert {p.full_name for p in pool.corpus} == used(train)
    assert pool.size == len(used(train))
    assert not test_only & {p.full_name for p in pool.corpus}
    assert "train split's proofs use" in pool.describe() and str(pool.size) in pool.describe()
    # every test step using a premise is scored, with every premise it used as a positive
    assert steps == retrieval_steps(test)
    assert any(set(s.positives) & test_only for s in steps)


def test_a_premise_only_test_proofs_use_is_a_miss(no_corpus, retriever, test_only):
    steps, pool = evaluation_data(no_corpus, "random", "test")
    unreachable = [s for s in steps if set(s.positives) <= test_only]
    assert unreachable
    index = PremiseIndex.build(retriever, pool.corpus)
    ranked = rank_steps(index, steps, k=pool.size)  # the whole pool, in order
    for step, names in zip(steps, ranked, strict=True):
        assert not test_only & set(names)
        if step in unreachable:
            assert recall_at_k(step.positives, names, len(names)) == 0.0
    # BM25 ranks the same pool: a test-only premise is never among its candidates either
    for names in bm25_rankings(pool.corpus, steps, k=pool.size):
        assert not test_only & set(names)
    assert evaluate_bm25(pool.corpus, steps).steps == len(steps)


def test_the_evaluation_names_its_pool(no_corpus, retriever, tiny_encoder, splits):
    metrics = evaluate_retriever(retriever, no_corpus, k=20)
    assert (metrics.pool, metrics.pool_size) == (TRAIN_SPLIT, len(used(splits[0])))
    assert metrics.steps == len(retrieval_steps(splits[1]))
    assert f"among {metrics.pool_size} premises (train split)" in str(metrics)
    result = evaluate_retrieval(tiny_encoder, no_corpus, k=20)
    assert (result.pool, result.pool_premises) == (TRAIN_SPLIT, metrics.pool_size)
    assert result.recall_at_10 == metrics.recall_at_10
    assert f"the {metrics.pool_size} premises that the train split's proofs use" in str(result)
    assert "no corpus.jsonl" in str(result)


def test_with_corpus_jsonl_the_pool_is_the_corpus(tmp_path, splits, retriever, test_only):
    train, test = splits
    rows = corpus_from_theorems(train + test)
    listed = {p["full_name"] for row in rows for p in row["premises"]}
    root = write_dataset(tmp_path / "ds", {"random/train": train, "random/test": test}, corpus=rows)
    steps, pool = evaluation_data(root, "random", "test")
    assert pool.source == CORPUS_JSONL
    assert {p.full_name for p in pool.corpus} == listed
    assert test_only <= listed  # listed by the corpus, so candidates
    assert steps == retrieval_steps(test)
    metrics = evaluate_retriever(retriever, root, k=20)
    assert (metrics.pool, metrics.pool_size) == (CORPUS_JSONL, len(listed))
    # a corpus.jsonl lacking premises that training proofs use is completed with them only
    partial = write_dataset(
        tmp_path / "partial",
        {"random/train": train, "random/test": test},
        corpus=corpus_from_theorems(test[:5]),
    )
    completed = CandidatePool.of_dataset(partial, train)
    assert completed.source == CORPUS_JSONL_AND_TRAIN
    names = {p.full_name for p in completed.corpus}
    assert names == used(test[:5]) | used(train)
    assert not (used(test) - used(test[:5]) - used(train)) & names


def test_the_retrievers_validation_ranks_the_same_pool(tmp_path, retriever, test_only, splits):
    train, test = splits
    root = write_dataset(tmp_path / "ds", {"random/train": train, "random/val": test})
    data = RetrievalDataModule(root, retriever.tokenizer, max_seq_len=64)
    data.setup("fit")
    assert data.pool.source == TRAIN_SPLIT and data.corpus is data.pool.corpus
    assert {p.full_name for p in data.corpus} == used(train)
    # validation keeps the premises the pool lacks (misses); training only has pool premises
    assert data.val_steps == retrieval_steps(test)
    assert any(set(s.positives) & test_only for s in data.val_steps)
    assert all(set(s.positives) <= used(train) for s in data.train_steps)
