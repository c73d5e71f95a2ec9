from __future__ import annotations

import lightning.pytorch as pl
import pytest
import torch

from leanloop.data.records import Premise
from leanloop.retrieval.corpus import Corpus
from leanloop.retrieval.datamodule import (
    HardNegativeMining,
    RetrievalDataModule,
    TrainingCollator,
    TrainingSet,
)
from leanloop.retrieval.examples import naming_steps, retrieval_steps
from leanloop.retrieval.index import PremiseIndex
from leanloop.retrieval.model import PremiseRetriever
from tests.helpers import sample_theorems, write_dataset


@pytest.fixture(scope="module")
def theorems(sample_dir):
    return sample_theorems(sample_dir)


@pytest.fixture(scope="module")
def corpus(theorems):
    return Corpus.from_theorems(theorems)


@pytest.fixture(scope="module")
def steps(theorems, corpus):
    return retrieval_steps(theorems, corpus)


@pytest.fixture(scope="module")
def tiny(tiny_encoder):
    return tiny_encoder


@pytest.fixture(scope="module")
def dataset(tmp_path_factory, theorems):
    """The real sample as a LeanDojo export: 120 training theorems, the rest for validation."""
    root = tmp_path_factory.mktemp("data")
    return write_dataset(root, {"random/train": theorems[:120], "random/val": theorems[120:]})


def test_naming_steps_pair_the_first_state_with_the_theorem_name(theorems):
    found, documents = naming_steps(theorems)
    with_tactics = [t for t in theorems if any(not s.is_sorry for s in t.traced_tactics)]
    assert len(found) == len(documents) == len(with_tactics) > 40
    for step, document, theorem in zip(found, documents, with_tactics, strict=True):
        assert step.positives == (theorem.full_name,) == (document.full_name,)
        assert step.context == theorem.traced_tactics[0].state_before
        assert (step.file_path, step.position) == (theorem.file_path, theorem.start)
        assert document.file_path == theorem.file_path
    assert naming_steps([t for t in theorems if not t.traced_tactics]) == ([], [])


def test_one_item_per_step_with_every_positive(corpus, steps):
    dataset = TrainingSet(steps, corpus, num_negatives=3, num_in_file_negatives=1, seed=0)
    assert len(dataset) == len(steps)
    many = next(i for i, s in enumerate(steps) if len(s.positives) >= 3)
    example = dataset[many]
    assert [corpus[i].full_name for i in example.positives] == list(steps[many].positives)
    assert len(example.negatives) == 4 and not set(example.negatives) & set(example.positives)


def test_hard_negatives_are_the_first_usable_candidates(corpus, steps):
    dataset = TrainingSet(
        steps, corpus, num_negatives=2, num_in_file_negatives=0, num_hard_negatives=3, seed=0
    )
    step = steps[0]
    positives = [corpus.index_of(n) for n in step.positives]
    usable = [
        i
        for i in range(len(corpus))
        if corpus[i].full_name not in step.positives
        and corpus.is_accessible(i, step.file_path, step.position)
    ]
    # positives first in the ranking must be skipped; the rest is taken in ranking order
    ranking = positives + usable[::-1]
    dataset.set_hard_candidates([ranking] + [[] for _ in steps[1:]])
    example = dataset[0]
    assert example.negatives[:3] == tuple(usable[::-1][:3])
    assert len(example.negatives) == 5 and len(set(example.negatives)) == 5
    assert dataset[1].negatives and len(dataset[1].negatives) == 2  # no candidates: random only
    with pytest.raises(ValueError, match="1 candidate list for"):
        dataset.set_hard_candidates([ranking])


def test_naming_documents_follow_the_corpus_in_batches(corpus, theorems, tiny):
    naming, documents = naming_steps(theorems[:30])
    dataset = TrainingSet(
        naming, corpus, num_negatives=2, num_in_file_negatives=0, extra_documents=documents, seed=1
    )
    assert len(dataset.documents) > len(corpus)
    retriever = PremiseRetriever(model_name=str(tiny), max_seq_len=64)
    collate = TrainingCollator(retriever.tokenizer, dataset.documents, 64)
    examples = [dataset[i] for i in range(4)]
    for example in examples:
        assert len(example.positives) == 1
        index = example.positives[0]
        assert index >= len(corpus) or corpus[index].full_name == example.step.theorem
        assert dataset.documents[index].full_name == example.step.theorem
    batch = collate(examples)
    assert batch["positive_mask"].sum(dim=1).tolist() == [1, 1, 1, 1]
    assert torch.isfinite(retriever.contrastive_loss(batch))


def test_mining_keeps_the_models_best_ranked_non_positives(dataset, tiny):
    torch.manual_seed(0)
    retriever = PremiseRetriever(model_name=str(tiny), max_seq_len=64)
    data = RetrievalDataModule(
        dataset,
        retriever.tokenizer,
        num_negatives=1,
        num_in_file_negatives=0,
        num_hard_negatives=4,
        naming_examples=True,
        max_seq_len=64,
        seed=5,
    )
    data.setup("fit")
    assert data.naming and len(data.train_set) == len(data.train_steps) + len(data.naming)
    assert data.mine_hard_negatives(retriever) == len(data.train_set)
    index = PremiseIndex.build(retriever, data.corpus)
    corpus = data.corpus
    for item in (0, 7, len(data.train_steps) + 2):  # two tactic steps, one naming example
        step, positives = data.train_set.items[item]
        query = retriever.encode_states([step.context])
        ranked = [i for i, _ in index.search(query, [step.file_path], [step.position], 60)[0]]
        expected = [i for i in ranked if corpus[i].full_name not in step.positives][:4]
        example = data.train_set[item]
        assert list(example.negatives[:4]) == expected
        assert not set(example.negatives) & set(positives)


def test_mining_runs_before_training_and_after_each_epoch_but_the_last(dataset, tiny):
    mined: list[int] = []

    class Counting(RetrievalDataModule):
        def mine_hard_negatives(self, model) -> int:
            mined.append(model.trainer.current_epoch)
            return super().mine_hard_negatives(model)

    torch.manual_seed(0)
    retriever = PremiseRetriever(model_name=str(tiny), max_seq_len=48, lr=1e-3)
    data = Counting(
        dataset,
        retriever.tokenizer,
        num_negatives=1,
        num_in_file_negatives=0,
        num_hard_negatives=2,
        max_seq_len=48,
        batch_size=16,
    )
    data.setup("fit")
    trainer = pl.Trainer(
        max_epochs=2,
        limit_train_batches=2,
        limit_val_batches=0,
        callbacks=[HardNegativeMining()],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(retriever, datamodule=data)
    assert mined == [0, 0]  # before epoch 0 and at the end of epoch 0; not after the last
    assert data.train_set.hard_candidates is not None


def test_a_theorem_that_is_a_premise_is_found_as_that_premise(dataset, theorems, tiny):
    from leanloop.data.records import SourceFile

    named = next(t for t in theorems[:120] if t.traced_tactics)
    as_premise = Premise(
        full_name=named.full_name, file_path="Other.lean", start=(1, 1), end=(2, 1)
    )
    corpus = Corpus.from_theorems(theorems, [SourceFile(path="Other.lean", premises=(as_premise,))])
    retriever = PremiseRetriever(model_name=str(tiny), max_seq_len=48)
    data = RetrievalDataModule(
        dataset, retriever.tokenizer, corpus=corpus, naming_examples=True, max_seq_len=48
    )
    data.setup("fit")
    assert named.full_name not in {p.full_name for p in data.extra_documents}
    naming = {s.theorem: p for s, p in data.train_set.items if s.index == -1}
    assert naming[named.full_name] == (corpus.index_of(named.full_name),)
    assert all(len(p) == 1 for p in naming.values()) and len(naming) == len(data.naming)
    collate = data.training_collator()
    assert [p.full_name for p in collate.documents] == [
        p.full_name for p in data.train_set.documents
    ]


def _negatives_by_query(examples) -> list[tuple[str, tuple[int, ...]]]:
    """Collates a batch into (query, negatives) pairs: what a test needs to see of it."""
    return [(example.step.context, example.negatives) for example in examples]


class SeenNegatives(RetrievalDataModule):
    """The training loader as it is, its batches given as (query, negatives) pairs."""

    def training_collator(self):
        return _negatives_by_query


def _epoch(loader, epoch: int) -> dict[str, tuple[int, ...]]:
    loader.sampler.set_epoch(epoch)  # as Lightning does before each epoch
    return {query: negatives for batch in loader for query, negatives in batch}


def test_negatives_differ_between_epochs_with_worker_processes(dataset, tiny):
    """Each epoch draws other random negatives, also when worker processes read the items (each
    worker used to start every epoch from the same copy of the generator, so every epoch saw
    the same negatives); an epoch's negatives do not depend on the number of workers."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny)
    seen = {}
    for workers in (2, 0):
        data = SeenNegatives(
            dataset,
            tokenizer,
            num_negatives=3,
            num_in_file_negatives=1,
            batch_size=8,
            num_workers=workers,
            seed=7,
        )
        data.setup("fit")
        loader = data.train_dataloader()
        assert loader.num_workers == workers
        seen[workers] = [_epoch(loader, epoch) for epoch in range(3)]
    epochs = seen[2]
    queries = set(epochs[0])
    assert len(queries) > 40 and all(set(e) == queries for e in epochs)  # every item, each epoch
    for earlier, later in ((0, 1), (1, 2), (0, 2)):
        changed = [q for q in queries if epochs[earlier][q] != epochs[later][q]]
        assert len(changed) > 0.8 * len(queries), (earlier, later, len(changed))
    assert seen[0] == seen[2]  # the same with or without worker processes


def test_an_epoch_keeps_its_order_when_training_resumes_in_it():
    from leanloop.retrieval.datamodule import EpochSampler

    sampler = EpochSampler(50, seed=3)
    orders = []
    for epoch in range(3):
        sampler.set_epoch(epoch)
        orders.append(list(sampler))
    assert all(len({i for _, i in order}) == 50 for order in orders)
    assert orders[0] != orders[1] != orders[2]
    assert [e for e, _ in orders[2]] == [2] * 50  # the items are read for their epoch
    resumed = EpochSampler(50, seed=3, epoch=2)  # a run resumed in epoch 2
    assert list(resumed) == orders[2]
