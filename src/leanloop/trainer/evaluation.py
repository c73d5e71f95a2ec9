"""How well a tactic generator knows the recorded tactics of a LeanDojo split (a split file, a
dataset directory, or theorems): top-k exact-match accuracy of generated tactics (a hit is the
whole recorded tactic, whitespace collapsed), and the held-out loss of the recorded tactic given
its prompt — the completion-only loss SFT trains on — with its perplexity and token accuracy."""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, computed_field

from leanloop.data import open_dataset
from leanloop.data.prompt import PromptExample, PromptFormat, is_recorded_tactic
from leanloop.data.records import Theorem
from leanloop.errors import LeanloopError
from leanloop.ml.protocols import GeneratedTactic, Generator
from leanloop.words import plural, share

log = logging.getLogger(__name__)


class TacticAccuracy(BaseModel):
    """How often the recorded tactic is the first candidate, and among the first ``k``;
    ``per_step`` (when kept) says it for each step: (first candidate, among the first k)."""

    steps: int
    k: int
    top1_hits: int
    topk_hits: int
    per_step: list[tuple[bool, bool]] | None = Field(
        default=None, description="(top-1 hit, top-k hit) of each step, in order (None: not kept)."
    )

    def first(self, steps: int) -> TacticAccuracy:
        """The accuracy on the first ``steps`` steps only (``per_step`` must be kept).

        Args:
            steps: How many steps to keep.

        Returns:
            The figures of those steps.
        """
        if self.per_step is None:
            raise ValueError("per_step was not kept: the first steps cannot be told apart")
        kept = self.per_step[:steps]
        return TacticAccuracy(
            steps=len(kept),
            k=self.k,
            top1_hits=sum(top1 for top1, _ in kept),
            topk_hits=sum(topk for _, topk in kept),
            per_step=kept,
        )

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
    max_seconds: float | None = None,
    **generate_options: Any,
) -> TacticAccuracy:
    """Generate ``k`` tactics for each step's state and count how often the whole recorded
    tactic (whitespace collapsed) is the first candidate and among the first ``k``.

    With ``max_seconds``, the states are taken a batch at a time (``generate_options``'
    ``batch_size``, else one) and no batch is started once that time has passed: the result
    covers the steps measured (at least one batch), each kept in ``per_step``."""
    if k < 1:
        raise LeanloopError(f"k={k}: evaluate at least one candidate")
    examples = load_examples(source, split=split, prompt_format=prompt_format, max_steps=max_steps)
    if max_seconds is None:
        states = [example.state for example in examples]
        candidates = generator.generate_batch(states, k, **generate_options) if states else []
    else:
        deadline = time.perf_counter() + max_seconds
        size = int(generate_options.get("batch_size") or 1)
        candidates = []
        for start in range(0, len(examples), size):
            if start and time.perf_counter() >= deadline:
                break
            part = [example.state for example in examples[start : start + size]]
            candidates.extend(generator.generate_batch(part, k, **generate_options))
        examples = examples[: len(candidates)]
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
    per_step: list[tuple[bool, bool]] = []
    for example, ranked in zip(examples, candidates, strict=True):
        hits = [match(candidate.tactic, example.tactic) for candidate in ranked[:k]]
        per_step.append((bool(hits and hits[0]), any(hits)))
    return TacticAccuracy(
        steps=len(examples),
        k=k,
        top1_hits=sum(top1 for top1, _ in per_step),
        topk_hits=sum(topk for _, topk in per_step),
        per_step=per_step,
    )


# -- held-out loss of the recorded tactic ----------------------------------------------------


class StepLoss(BaseModel):
    """One step's completion: its tokens, their summed negative log-likelihood (nats) and how
    many of them were the model's most likely next token."""

    tokens: int
    nll: float
    correct: int


class CompletionLoss(BaseModel):
    """The loss of the recorded tactic given its prompt over test steps: the completion-only
    loss SFT trains on (mean negative log-likelihood per completion token, in nats; the
    completion is the assistant turn, its end-of-turn token included), its perplexity, and the
    token accuracy (the share of completion tokens that are the model's most likely next
    token), each step kept in ``per_step``."""

    per_step: list[StepLoss]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def steps(self) -> int:
        return len(self.per_step)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def tokens(self) -> int:
        return sum(step.tokens for step in self.per_step)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def loss(self) -> float:
        """Nats per completion token (0 when there is none)."""
        tokens = self.tokens
        return sum(step.nll for step in self.per_step) / tokens if tokens else 0.0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def perplexity(self) -> float:
        return math.exp(self.loss)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def token_accuracy(self) -> float:
        tokens = self.tokens
        return sum(step.correct for step in self.per_step) / tokens if tokens else 0.0

    def first(self, steps: int) -> CompletionLoss:
        """The figures of the first ``steps`` steps only.

        Args:
            steps: How many steps to keep.

        Returns:
            The loss of those steps.
        """
        return CompletionLoss(per_step=self.per_step[:steps])

    def __str__(self) -> str:
        return (
            f"loss {self.loss:.2f} nats/token (perplexity {self.perplexity:.1f}), token "
            f"accuracy {100 * self.token_accuracy:.1f} % on {plural(self.steps, 'step')} "
            f"({plural(self.tokens, 'token')})"
        )


def completion_tokens(tokenizer, example: PromptExample) -> tuple[list[int], int]:
    """The token ids of the prompt followed by the completion, and where the completion
    starts, as TRL's SFT makes them for completion-only loss: both rendered with the chat
    template, the completion starting where the two tokenizations part."""
    prompt = _chat_ids(tokenizer, example.prompt, add_generation_prompt=True)
    whole = _chat_ids(tokenizer, example.prompt + example.completion)
    start = 0
    for token, other in zip(prompt, whole, strict=False):
        if token != other:
            break
        start += 1
    return whole, start


def _chat_ids(tokenizer, messages: list[dict[str, str]], **options: Any) -> list[int]:
    encoded = tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True, **options)
    return list(encoded["input_ids"])


def completion_loss(
    model,
    tokenizer,
    examples: Sequence[PromptExample],
    *,
    max_seconds: float | None = None,
    min_steps: int = 1,
) -> CompletionLoss:
    """The held-out loss of each example's completion given its prompt (see
    ``CompletionLoss``), one step at a time, in order, without gradients.

    Args:
        model (PreTrainedModel): A causal language model (a PEFT model too).
        tokenizer (PreTrainedTokenizerBase): Its tokenizer, with the chat template it was
            trained with.
        examples: The steps, as training examples (prompt and completion).
        max_seconds: No step is started once this time has passed (but the first
            ``min_steps`` are measured); None: all.
        min_steps: The steps measured whatever the time.

    Returns:
        The loss, perplexity and token accuracy, with each step's figures.
    """
    import torch

    deadline = None if max_seconds is None else time.perf_counter() + max_seconds
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    per_step: list[StepLoss] = []
    try:
        with torch.inference_mode():
            for example in examples:
                late = deadline is not None and time.perf_counter() >= deadline
                if late and len(per_step) >= min_steps:
                    break
                ids, start = completion_tokens(tokenizer, example)
                start = max(start, 1)  # the first token is never predicted
                targets = torch.tensor(ids[start:], device=device)
                if not len(targets):
                    per_step.append(StepLoss(tokens=0, nll=0.0, correct=0))
                    continue
                # only the positions that predict a completion token need logits
                logits = (
                    model(
                        input_ids=torch.tensor([ids], device=device),
                        logits_to_keep=len(targets) + 1,
                    )
                    .logits[0, :-1]
                    .float()
                )
                nll = torch.nn.functional.cross_entropy(logits, targets, reduction="sum")
                per_step.append(
                    StepLoss(
                        tokens=len(targets),
                        nll=float(nll),
                        correct=int((logits.argmax(dim=-1) == targets).sum()),
                    )
                )
    finally:
        model.train(was_training)
    result = CompletionLoss(per_step=per_step)
    log.info("held-out %s", result)
    return result
