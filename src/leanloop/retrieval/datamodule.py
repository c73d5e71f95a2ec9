"""The Lightning data module of the premise retriever: one training example per tactic step (its
positives, hard negatives mined with the model itself, premises of the positives' files and random
accessible premises), optional naming examples, and evaluation steps, tokenised into batches."""

from __future__ import annotations

import itertools
import logging
import random
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from leanloop.data.records import Premise
from leanloop.retrieval.corpus import GIVEN_CORPUS, CandidatePool, Corpus, premise_text
from leanloop.retrieval.encoder import tokenize
from leanloop.retrieval.examples import (
    RetrievalStep,
    load_all_splits,
    naming_steps,
    retrieval_steps,
)
from leanloop.words import plural

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainingExample:
    """A query with its positive documents and sampled negatives (document indices: the corpus
    first, then the extra documents of naming examples)."""

    step: RetrievalStep
    positives: tuple[int, ...]
    negatives: tuple[int, ...]


class NegativeSampler:
    """Draws negatives for a step: premises accessible from the theorem that the tactic did not
    use, first from the positive's own file, then from anywhere in the corpus."""

    def __init__(self, corpus: Corpus, rng: random.Random) -> None:
        self.corpus = corpus
        self.rng = rng

    def usable(self, i: int, step: RetrievalStep, taken: set[int]) -> bool:
        """Whether corpus premise ``i`` may be a negative of ``step``."""
        return (
            i not in taken
            and self.corpus[i].full_name not in step.positives
            and self.corpus.is_accessible(i, step.file_path, step.position)
        )

    def _pick(self, pool: Iterable[int], count: int, step: RetrievalStep, taken: set[int]) -> list:
        candidates = [i for i in pool if self.usable(i, step, taken)]
        return self.rng.sample(candidates, min(count, len(candidates)))

    def sample(
        self,
        step: RetrievalStep,
        positive: int | None,
        in_file: int,
        others: int,
        taken: Iterable[int] = (),
    ) -> tuple[int, ...]:
        """``in_file`` negatives from the file of corpus premise ``positive`` (when there is one)
        and random accessible ones up to ``in_file + others``, none of them in ``taken``."""
        taken = set(taken)
        chosen: list[int] = []
        if in_file > 0 and positive is not None and positive < len(self.corpus):
            pool = self.corpus.in_file(self.corpus[positive].file_path)
            chosen += self._pick(pool, in_file, step, taken)
            taken.update(chosen)
        wanted = in_file + others - len(chosen)
        tries = 0
        size = len(self.corpus)
        while wanted > 0 and tries < 20 * (wanted + 1):  # rejection sampling: cheap on big corpora
            tries += 1
            i = self.rng.randrange(size)
            if not self.usable(i, step, taken):
                continue
            taken.add(i)
            chosen.append(i)
            wanted -= 1
        if wanted > 0:  # few accessible premises: enumerate them
            chosen += self._pick(range(size), wanted, step, taken)
        return tuple(chosen)


class TrainingSet(Dataset):
    """One item per query (tactic step or naming example) with every positive it has among the
    documents. Its random negatives are drawn for the item and the epoch: ``dataset[i]`` (epoch
    0) or ``dataset[(epoch, i)]``, as ``EpochSampler`` asks for them, from a generator seeded
    with ``seed``, the epoch and ``i`` — so every epoch sees other negatives, and an epoch sees
    the same ones whichever data-loader worker (or process) reads the item, and again when a
    run resumes. Hard negatives come from ``set_hard_candidates`` (the premises a model ranks
    highest for each item), when set."""

    def __init__(
        self,
        steps: Sequence[RetrievalStep],
        corpus: Corpus,
        *,
        num_negatives: int,
        num_in_file_negatives: int,
        num_hard_negatives: int = 0,
        extra_documents: Sequence[Premise] = (),
        seed: int,
    ) -> None:
        self.corpus = corpus
        self.documents: list[Premise] = list(corpus) + [
            p for p in extra_documents if p.full_name not in corpus
        ]
        index = {p.full_name: i for i, p in enumerate(self.documents)}
        self.items: list[tuple[RetrievalStep, tuple[int, ...]]] = []
        for step in steps:
            positives = tuple(index[name] for name in step.positives if name in index)
            if positives:
                self.items.append((step, positives))
        self.num_negatives = num_negatives
        self.num_in_file_negatives = num_in_file_negatives
        self.num_hard_negatives = num_hard_negatives
        self.seed = seed
        self.sampler = NegativeSampler(corpus, random.Random(seed))
        self.hard_candidates: Sequence[Sequence[int]] | None = None

    def __len__(self) -> int:
        return len(self.items)

    def set_hard_candidates(self, candidates: Sequence[Sequence[int]] | None) -> None:
        """For each item, corpus premises best first (positives and inaccessible premises among
        them are skipped when drawing)."""
        if candidates is not None and len(candidates) != len(self.items):
            raise ValueError(
                f"{plural(len(candidates), 'candidate list')} for {plural(len(self.items), 'item')}"
            )
        self.hard_candidates = candidates

    def _hard(self, i: int, step: RetrievalStep, taken: set[int]) -> list[int]:
        if not self.hard_candidates or self.num_hard_negatives <= 0:
            return []
        chosen: list[int] = []
        for index in self.hard_candidates[i]:
            if len(chosen) >= self.num_hard_negatives:
                break
            if self.sampler.usable(index, step, taken):
                chosen.append(index)
                taken.add(index)
        return chosen

    def negative_sampler(self, epoch: int, i: int) -> NegativeSampler:
        """The sampler of item ``i``'s random negatives in ``epoch``."""
        return NegativeSampler(self.corpus, random.Random(f"{self.seed}:{epoch}:{i}"))

    def __getitem__(self, key: int | tuple[int, int]) -> TrainingExample:
        epoch, i = key if isinstance(key, tuple) else (0, key)
        step, positives = self.items[i]
        taken = set(positives)
        hard = self._hard(i, step, taken)
        sampler = self.negative_sampler(epoch, i)
        anchor = sampler.rng.choice(positives)
        rest = sampler.sample(
            step, anchor, self.num_in_file_negatives, self.num_negatives, taken=taken
        )
        return TrainingExample(step, positives, tuple(hard) + rest)


class EpochSampler(Sampler):
    """The training order: a permutation of the items drawn from ``seed`` and the epoch, given
    as ``(epoch, index)`` keys so that the dataset draws each item's negatives for the epoch
    (see ``TrainingSet``). Lightning calls ``set_epoch`` before each epoch (also through its
    distributed wrapper); a run resumed in epoch k orders it as the first run did."""

    def __init__(self, size: int, seed: int, epoch: int = 0) -> None:
        self.size = size
        self.seed = seed
        self.epoch = epoch

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.size

    def __iter__(self) -> Iterator[tuple[int, int]]:
        epoch = self.epoch  # read when iteration starts, after set_epoch
        generator = torch.Generator().manual_seed(self.seed * 100_003 + epoch)
        for index in torch.randperm(self.size, generator=generator).tolist():
            yield epoch, index


class TrainingLoader(DataLoader):
    """The training ``DataLoader``, resumable within an epoch: Lightning saves its
    ``state_dict`` with each checkpoint (the batches of the epoch already trained on, which
    ``progress`` reads from the trainer) and gives it back to ``load_state_dict`` when a run
    resumes, and the next pass then starts after those batches, without loading them. With
    ``EpochSampler``'s order (a function of the seed and the epoch) and negatives drawn for the
    epoch, a resumed epoch trains on exactly the batches the interrupted one had left."""

    def __init__(self, *args: Any, progress: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.progress = progress  # () -> batches of the current epoch trained on
        self._skip = 0
        self._skipping = 0

    def state_dict(self) -> dict[str, int]:
        return {"batches": int(self.progress()) if self.progress is not None else 0}

    def load_state_dict(self, state: dict[str, int]) -> None:
        batches = int(state.get("batches", 0))
        self._skip = batches if 0 < batches < len(self) else 0

    def _get_iterator(self):
        # the skip applies to the next pass only, which reads it through _index_sampler
        self._skipping, self._skip = self._skip, 0
        try:
            return super()._get_iterator()
        finally:
            self._skipping = 0

    @property
    def _index_sampler(self):
        sampler = super()._index_sampler
        return _SkipBatches(sampler, self._skipping) if self._skipping else sampler


class _SkipBatches:
    """``batches`` without its first ``skip`` (their indices are drawn, nothing is loaded)."""

    def __init__(self, batches: Any, skip: int) -> None:
        self.batches = batches
        self.skip = skip

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self) -> Iterator:
        return itertools.islice(iter(self.batches), self.skip, None)


class StepSet(Dataset):
    """Evaluation steps, as they are."""

    def __init__(self, steps: Sequence[RetrievalStep]) -> None:
        self.steps = list(steps)

    def __len__(self) -> int:
        return len(self.steps)

    def __getitem__(self, i: int) -> RetrievalStep:
        return self.steps[i]


class TrainingCollator:
    """Tokenises queries and the union of their positive and negative documents; marks which
    candidate documents are positives of which query (a query's other positives are left out of
    the denominator of each of its positives, and count as negatives of no one of them)."""

    def __init__(self, tokenizer, documents: Iterable[Premise], max_seq_len: int) -> None:
        self.tokenizer = tokenizer
        self.documents = list(documents)
        self.texts = [premise_text(p) for p in self.documents]
        self.max_seq_len = max_seq_len

    def _tokenize(self, texts: list[str], keep_end: bool) -> dict[str, torch.Tensor]:
        encoded = tokenize(self.tokenizer, texts, self.max_seq_len, keep_end=keep_end)
        return {"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"]}

    def __call__(self, examples: list[TrainingExample]) -> dict[str, Any]:
        columns: dict[int, int] = {}
        for example in examples:
            for index in (*example.positives, *example.negatives):
                columns.setdefault(index, len(columns))
        candidates = list(columns)
        positive_mask = torch.zeros(len(examples), len(candidates), dtype=torch.bool)
        for row, example in enumerate(examples):
            for column, index in enumerate(candidates):
                if self.documents[index].full_name in example.step.positives:
                    positive_mask[row, column] = True
        context = self._tokenize([e.step.context for e in examples], keep_end=True)
        premise = self._tokenize([self.texts[i] for i in candidates], keep_end=False)
        return {
            "context_ids": context["input_ids"],
            "context_mask": context["attention_mask"],
            "premise_ids": premise["input_ids"],
            "premise_mask": premise["attention_mask"],
            "positive_mask": positive_mask,
        }


class StepCollator:
    """Tokenises evaluation queries and keeps what ranking needs (file, position, positives)."""

    def __init__(self, tokenizer, max_seq_len: int) -> None:
        self.tokenizer = tokenizer
        self.max_seq_len = max_seq_len

    def __call__(self, steps: list[RetrievalStep]) -> dict[str, Any]:
        encoded = tokenize(
            self.tokenizer, [s.context for s in steps], self.max_seq_len, keep_end=True
        )
        return {
            "context_ids": encoded["input_ids"],
            "context_mask": encoded["attention_mask"],
            "file_paths": [s.file_path for s in steps],
            "positions": [tuple(s.position) for s in steps],
            "positives": [s.positives for s in steps],
        }


class RetrievalDataModule(pl.LightningDataModule):
    """Train/val/test data of one split scheme of an exported dataset, and its corpus: ``corpus``
    if given, else the dataset's candidate pool (``CandidatePool.of_dataset``: corpus.jsonl, or
    the premises of the train split's proofs), which training draws negatives from and
    validation ranks. Validation and test steps keep every premise their tactic used (one the
    corpus lacks counts as a miss); training steps keep those of the corpus.

    With ``naming_examples`` the training theorems also give naming examples (see
    ``naming_steps``); with ``num_hard_negatives`` > 0 each training example gets that many of
    the accessible premises that the model (at the last ``mine_hard_negatives``) ranks highest
    among those its tactic did not use.
    """

    def __init__(
        self,
        data_path: str | Path,
        tokenizer,
        *,
        corpus: Corpus | None = None,
        scheme: str = "random",
        num_negatives: int = 3,
        num_in_file_negatives: int = 1,
        num_hard_negatives: int = 0,
        naming_examples: bool = False,
        batch_size: int = 8,
        eval_batch_size: int = 32,
        max_seq_len: int = 256,
        num_workers: int = 0,
        seed: int = 3407,
    ) -> None:
        super().__init__()
        self.data_path = Path(data_path)
        self.tokenizer = tokenizer
        self.corpus = corpus
        self.pool: CandidatePool | None = None
        self.scheme = scheme
        self.num_negatives = num_negatives
        self.num_in_file_negatives = num_in_file_negatives
        self.num_hard_negatives = num_hard_negatives
        self.naming_examples = naming_examples
        self.batch_size = batch_size
        self.eval_batch_size = eval_batch_size
        self.max_seq_len = max_seq_len
        self.num_workers = num_workers
        self.seed = seed
        self.theorems: dict[str, list] = {}
        self.steps: dict[str, list[RetrievalStep]] = {}
        self.naming: list[RetrievalStep] = []
        self.extra_documents: list[Premise] = []
        self._train_set: TrainingSet | None = None

    def setup(self, stage: str | None = None) -> None:
        if self.steps:
            return
        self.theorems = load_all_splits(self.data_path, self.scheme)
        if self.corpus is None:
            self.pool = CandidatePool.of_dataset(self.data_path, self.theorems.get("train", []))
            self.corpus = self.pool.corpus
        else:
            self.pool = CandidatePool(self.corpus, GIVEN_CORPUS)
        self.steps = {
            split: retrieval_steps(theorems, self.corpus if split == "train" else None)
            for split, theorems in self.theorems.items()
        }
        if self.naming_examples:
            self.naming, named = naming_steps(self.theorems.get("train", []))
            # a theorem that is also a premise of the corpus is found as that premise
            self.extra_documents = [p for p in named if p.full_name not in self.corpus]

    @property
    def train_steps(self) -> list[RetrievalStep]:
        return self.steps.get("train", [])

    @property
    def val_steps(self) -> list[RetrievalStep]:
        return self.steps.get("val", [])

    @property
    def test_steps(self) -> list[RetrievalStep]:
        return self.steps.get("test", [])

    def training_set(
        self, steps: Sequence[RetrievalStep] | None = None, seed: int | None = None
    ) -> TrainingSet:
        """A training set of ``steps`` (default: the training steps and naming examples)."""
        assert self.corpus is not None  # set up
        return TrainingSet(
            self.train_steps + self.naming if steps is None else steps,
            self.corpus,
            num_negatives=self.num_negatives,
            num_in_file_negatives=self.num_in_file_negatives,
            num_hard_negatives=self.num_hard_negatives,
            extra_documents=self.extra_documents,
            seed=self.seed if seed is None else seed,
        )

    @property
    def train_set(self) -> TrainingSet:
        """The training set the training loader reads (made once, so mined negatives stay)."""
        if self._train_set is None:
            self._train_set = self.training_set()
        return self._train_set

    def training_collator(self) -> TrainingCollator:
        assert self.corpus is not None  # set up
        return TrainingCollator(
            self.tokenizer, [*self.corpus, *self.extra_documents], self.max_seq_len
        )

    @torch.no_grad()
    def mine_hard_negatives(self, model) -> int:
        """Rank the corpus for every training item with ``model`` (a ``PremiseRetriever``) and
        keep each item's best-ranked premises as its hard negatives; returns the item count."""
        dataset = self.train_set
        if self.num_hard_negatives <= 0 or not len(dataset):
            return 0
        corpus = self.corpus
        assert corpus is not None  # set up, as the training set is
        documents = model.encode_premises(corpus.texts(), batch_size=self.eval_batch_size)
        keep = min(len(corpus), self.num_hard_negatives + 32)
        candidates: list[list[int]] = []
        steps = [step for step, _ in dataset.items]
        for start in range(0, len(steps), self.eval_batch_size):
            part = steps[start : start + self.eval_batch_size]
            queries = model.encode_states([s.context for s in part], self.eval_batch_size)
            scores = queries @ documents.T
            for row, step in enumerate(part):
                mask = torch.from_numpy(corpus.accessible_mask(step.file_path, step.position))
                ranked = scores[row].masked_fill(~mask.to(scores.device), float("-inf"))
                candidates.append(torch.topk(ranked, keep).indices.tolist())
        dataset.set_hard_candidates(candidates)
        return len(candidates)

    def train_dataloader(self) -> DataLoader:
        """Training batches in ``EpochSampler``'s order, starting at the trainer's current epoch
        (the one a resumed run restarts in), resumable within it (``TrainingLoader``)."""
        trainer = getattr(self, "trainer", None)
        epoch = int(trainer.current_epoch) if trainer is not None else 0
        return TrainingLoader(
            self.train_set,
            batch_size=self.batch_size,
            sampler=EpochSampler(len(self.train_set), self.seed, epoch),
            collate_fn=self.training_collator(),
            num_workers=self.num_workers,
            progress=self._batches_trained,
        )

    def _batches_trained(self) -> int:
        """Batches of the current epoch the trainer has trained on (0 outside training)."""
        trainer = getattr(self, "trainer", None)
        if trainer is None:
            return 0
        return int(trainer.fit_loop.epoch_loop.batch_progress.current.processed)

    def _steps_loader(self, steps: list[RetrievalStep]) -> DataLoader:
        return DataLoader(
            StepSet(steps),
            batch_size=self.eval_batch_size,
            shuffle=False,
            collate_fn=StepCollator(self.tokenizer, self.max_seq_len),
            num_workers=self.num_workers,
        )

    def val_dataloader(self) -> DataLoader:
        return self._steps_loader(self.val_steps)

    def test_dataloader(self) -> DataLoader:
        return self._steps_loader(self.test_steps)


class HardNegativeMining(pl.Callback):
    """Mines hard negatives with the model being trained: before the first epoch and after
    every epoch but the last, so each epoch trains against what the model currently confuses."""

    def on_fit_start(self, trainer: pl.Trainer, pl_module) -> None:
        self._mine(trainer, pl_module)

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module) -> None:
        if trainer.max_epochs is None or trainer.current_epoch + 1 < trainer.max_epochs:
            self._mine(trainer, pl_module)

    @staticmethod
    def _mine(trainer: pl.Trainer, pl_module) -> None:
        data = trainer.datamodule
        if isinstance(data, RetrievalDataModule):
            count = data.mine_hard_negatives(pl_module)
            log.info("hard negatives mined for %d training items", count)
