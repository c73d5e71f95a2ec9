"""Where the tactic-generator trainers' examples get their premises: a trained retriever ranks the
premises accessible from each training state's theorem in the corpus of the export, as
``RetrievalProver`` does when it proves (ReProver trains its generator on such prompts)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from pathlib import Path

from leanloop.data.records import Theorem, TracedTactic

log = logging.getLogger(__name__)

#: Training states whose premises are retrieved at once.
RETRIEVAL_CHUNK = 256


class PremiseSource:
    """The ``k`` premises a retriever ranks best for a state among those accessible from its
    theorem, in the corpus of one LeanDojo-format export: its ``corpus.jsonl``, and the premises
    the tactics of its train split use (never val or test proofs) — the corpus
    ``RetrievalProver`` indexes for the same directory.

    Args:
        retriever: A ``RetrievalTrainer`` checkpoint or output directory (its newest
            checkpoint), as ``RetrievalProver``'s ``ret_ckpt_path``.
        dataset_dir: The export whose corpus is searched.
        k: Premises per state.
        device: Where the retriever runs (default: the detected device).
    """

    def __init__(
        self, retriever: str, dataset_dir: Path, k: int, *, device: str | None = None
    ) -> None:
        from leanloop.data.leandojo import LeanDojoDataset
        from leanloop.errors import LeanloopError
        from leanloop.retrieval.corpus import CandidatePool
        from leanloop.retrieval.index import PremiseIndex
        from leanloop.retrieval.model import PremiseRetriever

        self.k = k
        model = PremiseRetriever.load(retriever, device=device, freeze=True)
        dataset = LeanDojoDataset(dataset_dir)
        train = [f for f in dataset.split_files if f.split == "train"]
        if train:
            theorems: Iterable[Theorem] = (
                item.parse() for item in dataset.iter_theorem_items(train)
            )
        else:
            theorems = dataset.iter_theorems()
        corpus = CandidatePool.of_dataset(dataset_dir, theorems).corpus
        if len(corpus) == 0:
            raise LeanloopError(
                f"{dataset_dir}: the corpus has no premise to retrieve for the prompts",
                hint="export repositories with corpus.jsonl or traced tactics using premises, "
                "or train without a retriever",
            )
        self.index = PremiseIndex.build(model, corpus)
        log.info("premises for the prompts: %d in the corpus of %s", len(corpus), dataset_dir)

    def premises(self, steps: Sequence[tuple[Theorem, TracedTactic]]) -> list[list[str]]:
        """For each (theorem, step), the texts of its ``k`` best accessible premises, best
        first."""
        from leanloop.retrieval.corpus import premise_text

        if not steps:
            return []
        found = self.index.retrieve_batch(
            [step.state_before for _, step in steps],
            [theorem.file_path for theorem, _ in steps],
            [theorem.start for theorem, _ in steps],
            self.k,
        )
        return [[premise_text(p) for p, _ in premises] for premises in found]


def traced_steps(theorems: Iterable[Theorem]) -> Iterator[tuple[Theorem, TracedTactic]]:
    """Every traced step of the theorems with its theorem."""
    for theorem in theorems:
        for step in theorem.traced_tactics:
            yield theorem, step


def with_premises(
    steps: Iterable[tuple[Theorem, TracedTactic]], source: PremiseSource | None
) -> Iterator[tuple[Theorem, TracedTactic, list[str]]]:
    """The steps with their retrieved premises (none without a source), retrieved a chunk of
    states at a time."""
    iterator = iter(steps)
    while chunk := list(islice(iterator, RETRIEVAL_CHUNK)):
        lists = source.premises(chunk) if source is not None else [[] for _ in chunk]
        for (theorem, step), premises in zip(chunk, lists, strict=True):
            yield theorem, step, premises
