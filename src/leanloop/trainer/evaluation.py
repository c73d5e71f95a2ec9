"""Top-k exact-match accuracy of generated tactics against the recorded ones on a LeanDojo split
(a split file, a dataset directory, or theorems): a hit is the whole recorded tactic, whitespace
collapsed."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, computed_field

from leanloop.data import open_dataset
from leanloop.data.prompt import PromptExample, PromptFormat, is_recorded_tactic
from leanloop.data.records import Theorem
from leanloop.errors import LeanloopError
from leanloop.ml.protocols import GeneratedTactic, Generator
from leanloop.words import share

log = logging.getLogger(__name__)


class TacticAccuracy(BaseModel):
    """How often the recorded tactic is the first candidate, and among the first ``k``."""

    steps: int
    k: int
    top1_hits: int
    topk_hits: int

    @computed_field  # type: ignore[prop-decorator]
    @property
    def top1(self) -> float:
        return self.top1_hits / self.steps if self.steps else 0.0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def topk(self) -> float:
        return self.topk_hits / self.steps if self.steps else 0.0

    def __str__(self) -> str:
        return (
            f"top-1 {share(self.top1_hits, self.steps, 'step')}, "
            f"top-{self.k} {share(self.topk_hits, self.steps)}"
        )


def load_steps(
    source: str | os.PathLike | Iterable[Theorem],
    *,
    split: str = "random/test",
    prompt_format: PromptFormat | None = None,
    max_steps: int | None = None,
) -> list[tuple[str, str]]:
    """``(state, tactic taught)`` for every usable step (``sorry`` steps skipped) of a split
    file, of ``split`` in a dataset directory, or of theorems."""
    return [
        (example.state, example.tactic)
        for example in load_examples(
            source, split=split, prompt_format=prompt_format, max_steps=max_steps
        )
    ]


def load_examples(
    source: str | os.PathLike | Iterable[Theorem],
    *,
    split: str = "random/test",
    prompt_format: PromptFormat | None = None,
    max_steps: int | None = None,
) -> list[PromptExample]:
    """The examples of ``load_steps``' steps."""
    prompt_format = prompt_format or PromptFormat()
    if isinstance(source, str | os.PathLike):
        path = Path(source)
        if path.is_dir():
            path = path / f"{split}.json"
        if not path.is_file():
            raise LeanloopError(
                f"missing data split file {path}",
                hint="give a LeanDojo split file (e.g. random/test.json) or a dataset directory",
            )
        theorems: Iterable[Theorem] = open_dataset(path).iter_theorems()
    else:
        theorems = source
    examples = []
    for example in prompt_format.examples(theorems):
        examples.append(example)
        if max_steps is not None and len(examples) >= max_steps:
            break
    return examples


def evaluate_tactics(
    generator: Generator,
    source: str | os.PathLike | Iterable[Theorem],
    *,
    k: int = 8,
    split: str = "random/test",
    prompt_format: PromptFormat | None = None,
    max_steps: int | None = None,
    **generate_options: Any,
) -> TacticAccuracy:
    """Generate ``k`` tactics for each step's state and count how often the whole recorded
    tactic (whitespace collapsed) is the first candidate and among the first ``k``."""
    if k < 1:
        raise LeanloopError(f"k={k}: evaluate at least one candidate")
    examples = load_examples(source, split=split, prompt_format=prompt_format, max_steps=max_steps)
    states = [example.state for example in examples]
    candidates = generator.generate_batch(states, k, **generate_options) if states else []
    result = tactic_accuracy(examples, candidates, k)
    log.info("tactic accuracy: %s", result)
    return result


def same_first_line(proposed: str, recorded: str) -> bool:
    """Whether the first lines of two tactics are the same tactic (the looser match, for
    reporting beside the whole-tactic one)."""
    return is_recorded_tactic(proposed.splitlines()[0], recorded.splitlines()[0])


def tactic_accuracy(
    examples: Sequence[PromptExample],
    candidates: Sequence[Sequence[GeneratedTactic]],
    k: int,
    *,
    match: Callable[[str, str], bool] = is_recorded_tactic,
) -> TacticAccuracy:
    """Top-1 and top-``k`` hits of each example's ranked candidates; ``match(proposed,
    recorded)`` says whether a candidate is the example's tactic (by default: the whole of it,
    whitespace collapsed)."""
    top1 = topk = 0
    for example, ranked in zip(examples, candidates, strict=True):
        hits = [match(candidate.tactic, example.tactic) for candidate in ranked[:k]]
        top1 += bool(hits and hits[0])
        topk += any(hits)
    return TacticAccuracy(steps=len(examples), k=k, top1_hits=top1, topk_hits=topk)
