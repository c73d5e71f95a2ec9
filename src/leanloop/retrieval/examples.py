"""Retrieval examples from a LeanDojo-format split: one per tactic step that uses a premise,
with the proof state as the query and the premises used as the positives; and naming
examples, a theorem's first proof state with the theorem's own name as the premise to find."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from leanloop.data.records import Pos, Premise, Theorem, repository_identity
from leanloop.errors import LeanloopError
from leanloop.retrieval.corpus import Corpus


@dataclass(frozen=True)
class RetrievalStep:
    """A tactic step seen as a retrieval query."""

    context: str  # the proof state before the tactic
    file_path: str  # the theorem's file
    position: Pos  # where the theorem starts (premises must be defined before it)
    positives: tuple[str, ...]  # full names of the premises the tactic used, in the corpus
    theorem: str  # the theorem's full name
    index: int  # the tactic's position in the proof
    url: str = ""
    commit: str = ""

    def belongs_to(self, url: str, commit: str) -> bool:
        return self.commit == commit and repository_identity(self.url) == repository_identity(url)


def retrieval_steps(
    theorems: Iterable[Theorem], corpus: Corpus | None = None
) -> list[RetrievalStep]:
    """Every tactic step using at least one premise, with the premises it used as positives.

    With ``corpus`` (training), only the premises in it: a premise training cannot rank is left
    out, and so is a step left without one. Without (evaluation), every premise the tactic used:
    one that the candidates lack counts as a miss."""
    steps: list[RetrievalStep] = []
    for theorem in theorems:
        for index, tactic in enumerate(theorem.traced_tactics):
            if tactic.is_sorry:
                continue
            positives = tuple(
                dict.fromkeys(
                    p.full_name for p in tactic.premises if corpus is None or p.full_name in corpus
                )
            )
            if not positives:
                continue
            steps.append(
                RetrievalStep(
                    context=tactic.state_before,
                    file_path=theorem.file_path,
                    position=theorem.start,
                    positives=positives,
                    theorem=theorem.full_name,
                    index=index,
                    url=theorem.url,
                    commit=theorem.commit,
                )
            )
    return steps


def naming_steps(theorems: Iterable[Theorem]) -> tuple[list[RetrievalStep], list[Premise]]:
    """For each theorem with a traced tactic: its first proof state (the statement as a goal) as
    a query whose one positive is the theorem itself, and the theorem as a premise.

    Mathlib names a lemma after what it states (``∈`` is ``mem``, ``≤`` is ``le``, ``*`` is
    ``mul``), so these pairs teach the same convention that links proof states to the names of
    the premises they need, from data the training split already holds.
    """
    steps: list[RetrievalStep] = []
    premises: list[Premise] = []
    seen: set[str] = set()
    for theorem in theorems:
        first = next((t for t in theorem.traced_tactics if not t.is_sorry), None)
        if first is None or theorem.full_name in seen:
            continue
        seen.add(theorem.full_name)
        premises.append(
            Premise(
                full_name=theorem.full_name,
                file_path=theorem.file_path,
                start=theorem.start,
                end=theorem.end,
            )
        )
        steps.append(
            RetrievalStep(
                context=first.state_before,
                file_path=theorem.file_path,
                position=theorem.start,
                positives=(theorem.full_name,),
                theorem=theorem.full_name,
                index=-1,
                url=theorem.url,
                commit=theorem.commit,
            )
        )
    return steps, premises


def split_file(dataset_dir: str | Path, scheme: str, split: str) -> Path:
    """``dataset_dir/scheme/split.json``, or a clear error saying what is missing."""
    from leanloop.data.leandojo import SCHEMES, SPLITS

    if scheme not in SCHEMES:
        raise LeanloopError(f"unknown split scheme {scheme!r}", hint=f"use one of {SCHEMES}")
    if split not in SPLITS:
        raise LeanloopError(f"unknown split {split!r}", hint=f"use one of {SPLITS}")
    root = Path(dataset_dir)
    if not root.is_dir():
        raise LeanloopError(
            f"dataset directory {root} does not exist",
            hint="export one with DynamicDatabase.export_merged_data or pass dataset_path",
        )
    path = root / scheme / f"{split}.json"
    if not path.is_file():
        raise LeanloopError(
            f"dataset {root} has no {scheme}/{split}.json",
            hint="point to a LeanDojo-format export (random/{train,val,test}.json)",
        )
    return path


def load_split(dataset_dir: str | Path, scheme: str, split: str) -> list[Theorem]:
    """The theorems of one split of a dataset directory."""
    from leanloop.data import open_dataset

    return list(open_dataset(split_file(dataset_dir, scheme, split)).iter_theorems())


def load_all_splits(dataset_dir: str | Path, scheme: str) -> dict[str, list[Theorem]]:
    """Every split of ``scheme`` that the dataset has (missing ones are empty)."""
    from leanloop.data.leandojo import SPLITS

    root = Path(dataset_dir)
    return {
        split: load_split(root, scheme, split)
        if (root / scheme / f"{split}.json").is_file()
        else []
        for split in SPLITS
    }
