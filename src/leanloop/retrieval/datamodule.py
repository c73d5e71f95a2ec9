"""The Lightning data module of the premise retriever: training examples with sampled hard
negatives (premises of the positive's file, then other accessible premises) and evaluation steps,
tokenised into batches."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from torch.utils.data import DataLoader, Dataset

from leanloop.retrieval.corpus import Corpus
from leanloop.retrieval.encoder import tokenize
from leanloop.retrieval.examples import RetrievalStep, load_all_splits, retrieval_steps


@dataclass(frozen=True)
class TrainingExample:
    """A query with one positive premise and sampled negatives (corpus indices)."""

    step: RetrievalStep
    positive: int
    negatives: tuple[int, ...]


class NegativeSampler:
    """Draws negatives for a step: premises accessible from the theorem that the tactic did not
    use, first from the positive's own file, then from anywhere in the corpus."""

    def __init__(self, corpus: Corpus, rng: random.Random) -> None:
        self.corpus = corpus
        self.rng = rng

    def _pick(self, pool: Sequence[int], count: int, step: RetrievalStep, taken: set[int]) -> list:
        candidates = [
            i
            for i in pool
            if i not in taken
            and self.corpus[i].full_name not in step.positives
            and self.corpus.is_accessible(i, step.file_path, step.position)
        ]
        return self.rng.sample(candidates, min(count, len(candidates)))

    def sample(
        self, step: RetrievalStep, positive: int, in_file: int, others: int
    ) -> tuple[int, ...]:
        taken: set[int] = set()
        chosen: list[int] = []
        if in_file > 0:
            pool = self.corpus.in_file(self.corpus[positive].file_path)
            chosen += self._pick(pool, in_file, step, taken)
            taken.update(chosen)
        wanted = in_file + others - len(chosen)
        tries = 0
        size = len(self.corpus)
        while wanted > 0 and tries < 20 * (wanted + 1):  # rejection sampling: cheap on big corpora
            tries += 1
            i = self.rng.randrange(size)
            if (
                i in taken
                or self.corpus[i].full_name in step.positives
                or not self.corpus.is_accessible(i, step.file_path, step.position)
            ):
                continue
            taken.add(i)
            chosen.append(i)
            wanted -= 1
        if wanted > 0:  # few accessible premises: enumerate them
            extra = self._pick(range(size), wanted, step, taken)
            chosen += extra
        return tuple(chosen)


class TrainingSet(Dataset):
    """One item per (step, positive premise); negatives are drawn anew each time an item is
    read, so every epoch sees other ones."""

    def __init__(
        self,
        steps: Sequence[RetrievalStep],
        corpus: Corpus,
        *,
        num_negatives: int,
        num_in_file_negatives: int,
        seed: int,
    ) -> None:
        self.corpus = corpus
        self.items = [
            (step, index)
            for step in steps
            for index in (corpus.index_of(name) for name in step.positives)
            if index is not None
        ]
        self.num_negatives = num_negatives
        self.num_in_file_negatives = num_in_file_negatives
        self.sampler = NegativeSampler(corpus, random.Random(seed))

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> TrainingExample:
        step, positive = self.items[i]
        negatives = self.sampler.sample(
            step, positive, self.num_in_file_negatives, self.num_negatives
        )
        return TrainingExample(step, positive, negatives)


class StepSet(Dataset):
    """Evaluation steps, as they are."""

    def __init__(self, steps: Sequence[RetrievalStep]) -> None:
        self.steps = list(steps)

    def __len__(self) -> int:
        return len(self.steps)

    def __getitem__(self, i: int) -> RetrievalStep:
        return self.steps[i]


class TrainingCollator:
    """Tokenises queries and the union of their positive and negative premises; marks which
    candidate premises are positives of which query (those are left out of each other's
    denominators)."""

    def __init__(self, tokenizer, corpus: Corpus, max_seq_len: int) -> None:
        self.tokenizer = tokenizer
        self.corpus = corpus
        self.texts = corpus.texts()
        self.max_seq_len = max_seq_len

    def _tokenize(self, texts: list[str], keep_end: bool) -> dict[str, torch.Tensor]:
        encoded = tokenize(self.tokenizer, texts, self.max_seq_len, keep_end=keep_end)
        return {"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"]}

    def __call__(self, examples: list[TrainingExample]) -> dict[str, Any]:
        columns: dict[int, int] = {}
        for example in examples:
            for index in (example.positive, *example.negatives):
                columns.setdefault(index, len(columns))
        candidates = list(columns)
        positive_mask = torch.zeros(len(examples), len(candidates), dtype=torch.bool)
        for row, example in enumerate(examples):
            for column, index in enumerate(candidates):
                if self.corpus[index].full_name in example.step.positives:
                    positive_mask[row, column] = True
        context = self._tokenize([e.step.context for e in examples], keep_end=True)
        premise = self._tokenize([self.texts[i] for i in candidates], keep_end=False)
        return {
            "context_ids": context["input_ids"],
            "context_mask": context["attention_mask"],
            "premise_ids": premise["input_ids"],
            "premise_mask": premise["attention_mask"],
            "target": torch.tensor([columns[e.positive] for e in examples], dtype=torch.long),
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
    """Train/val/test data of one split scheme of an exported dataset, and its corpus."""

    def __init__(
        self,
        data_path: str | Path,
        tokenizer,
        *,
        corpus: Corpus | None = None,
        scheme: str = "random",
        num_negatives: int = 3,
        num_in_file_negatives: int = 1,
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
        self.scheme = scheme
        self.num_negatives = num_negatives
        self.num_in_file_negatives = num_in_file_negatives
        self.batch_size = batch_size
        self.eval_batch_size = eval_batch_size
        self.max_seq_len = max_seq_len
        self.num_workers = num_workers
        self.seed = seed
        self.theorems: dict[str, list] = {}
        self.steps: dict[str, list[RetrievalStep]] = {}

    def setup(self, stage: str | None = None) -> None:
        if self.steps:
            return
        self.theorems = load_all_splits(self.data_path, self.scheme)
        if self.corpus is None:
            every = [t for theorems in self.theorems.values() for t in theorems]
            self.corpus = Corpus.from_dataset(self.data_path, every)
        self.steps = {
            split: retrieval_steps(theorems, self.corpus)
            for split, theorems in self.theorems.items()
        }

    @property
    def train_steps(self) -> list[RetrievalStep]:
        return self.steps.get("train", [])

    @property
    def val_steps(self) -> list[RetrievalStep]:
        return self.steps.get("val", [])

    @property
    def test_steps(self) -> list[RetrievalStep]:
        return self.steps.get("test", [])

    def training_set(self, steps: Sequence[RetrievalStep] | None = None, seed: int | None = None):
        return TrainingSet(
            self.train_steps if steps is None else steps,
            self.corpus,
            num_negatives=self.num_negatives,
            num_in_file_negatives=self.num_in_file_negatives,
            seed=self.seed if seed is None else seed,
        )

    def training_collator(self) -> TrainingCollator:
        return TrainingCollator(self.tokenizer, self.corpus, self.max_seq_len)

    def train_dataloader(self) -> DataLoader:
        return DataLoader(
            self.training_set(),
            batch_size=self.batch_size,
            shuffle=True,
            collate_fn=self.training_collator(),
            num_workers=self.num_workers,
            generator=torch.Generator().manual_seed(self.seed),
        )

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
