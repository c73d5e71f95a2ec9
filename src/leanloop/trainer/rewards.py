"""Reward functions for GRPO on tactics (format, length, exact match with the recorded tactic)
and a weighted combinator, all called the way TRL calls them: ``f(completions, **columns)``.

A completion is either a string or, for chat prompts, a list of messages whose last one is the
reply; :func:`completion_text` reads both. Dataset columns arrive as keyword arguments, one value
per completion: ``state`` (the proof state before the step), ``tactic`` (the recorded tactic) and
``full_name`` (the theorem), the columns of ``PromptExample``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from leanloop.data.prompt import PromptFormat, is_recorded_tactic, tactic_text
from leanloop.errors import LeanloopError
from leanloop.words import plural

RewardFunc = Callable[..., Any]

_FORMAT = PromptFormat()


def completion_text(completion: Any) -> str:
    """The text of one completion: a string, a message, or a list of messages (the last)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        return str(completion.get("content", ""))
    if isinstance(completion, list | tuple):
        return completion_text(completion[-1]) if completion else ""
    raise LeanloopError(
        f"cannot read a completion of type {type(completion).__name__}",
        hint="completions are strings or lists of chat messages",
    )


def reply_tactic(completion: Any, prompt_format: PromptFormat = _FORMAT) -> str | None:
    """The tactic a completion proposes (None when it has none, or it is sorry/admit)."""
    return prompt_format.parse(completion_text(completion))


def format_reward(completions: Sequence[Any], **kwargs: Any) -> list[float]:
    """1.0 for a reply that is a tactic and nothing else, as taught (one line or several, no code
    fence, label or text around it, no ``sorry``/``admit``); 0.0 otherwise."""
    rewards = []
    for completion in completions:
        text = completion_text(completion)
        tactic = _FORMAT.parse(text)
        rewards.append(1.0 if tactic is not None and tactic == tactic_text(text) else 0.0)
    return rewards


class LengthPenalty:
    """0 for replies up to ``free_chars`` characters, falling linearly to -1 at ``max_chars``."""

    def __init__(self, free_chars: int = 40, max_chars: int = 200) -> None:
        if not 0 <= free_chars < max_chars:
            raise LeanloopError(
                f"LengthPenalty: need 0 <= free_chars < max_chars, got {free_chars}, {max_chars}"
            )
        self.free_chars = free_chars
        self.max_chars = max_chars
        self.__name__ = "length_penalty"

    def __call__(self, completions: Sequence[Any], **kwargs: Any) -> list[float]:
        span = self.max_chars - self.free_chars
        return [
            -min(1.0, max(0, len(completion_text(c).strip()) - self.free_chars) / span)
            for c in completions
        ]


#: The length penalty with its default limits (40 characters free, -1 from 200 on).
length_penalty = LengthPenalty()


def exact_match_reward(
    completions: Sequence[Any], tactic: Sequence[str] | None = None, **kwargs: Any
) -> list[float]:
    """1.0 when the reply's tactic is the whole recorded ``tactic`` (whitespace collapsed)."""
    if tactic is None:
        raise LeanloopError(
            "exact_match_reward needs the 'tactic' column",
            hint="train on rows built by PromptFormat.examples, which carry it",
        )
    if len(tactic) != len(completions):
        raise LeanloopError(
            f"exact_match_reward: {plural(len(completions), 'completion')} but "
            f"{plural(len(tactic), 'tactic')}"
        )
    rewards = []
    for completion, recorded in zip(completions, tactic, strict=True):
        proposed = reply_tactic(completion)
        match = proposed is not None and is_recorded_tactic(proposed, recorded)
        rewards.append(1.0 if match else 0.0)
    return rewards


def combine(
    *funcs: RewardFunc, weights: Sequence[float] | None = None, name: str = "combined"
) -> RewardFunc:
    """One reward function: the weighted sum of ``funcs`` (weights default to 1).

    A function may return None for a completion; the sum skips it, and is None when every
    function did.
    """
    if not funcs:
        raise LeanloopError("combine: give at least one reward function")
    for index, func in enumerate(funcs):
        if not callable(func):
            raise LeanloopError(f"combine: reward function #{index} is not callable: {func!r}")
    weights = [1.0] * len(funcs) if weights is None else [float(w) for w in weights]
    if len(weights) != len(funcs):
        raise LeanloopError(f"combine: {len(funcs)} reward functions but {len(weights)} weights")

    def combined(completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        totals: list[float | None] = [None] * len(completions)
        for func, weight in zip(funcs, weights, strict=True):
            values = as_reward_list(func(completions=completions, **kwargs), len(completions))
            for i, value in enumerate(values):
                if value is not None:
                    totals[i] = (totals[i] or 0.0) + weight * value
        return totals

    combined.__name__ = name
    return combined


def as_reward_list(output: Any, expected: int, name: str = "reward function") -> list[float | None]:
    """A reward function's output as a list of floats (None kept): a list, a tuple, a 1-D tensor
    or array; anything else, or the wrong length, is an error naming the function."""
    if hasattr(output, "detach"):
        output = output.detach().cpu()
    if hasattr(output, "ndim") and hasattr(output, "tolist"):
        if output.ndim != 1:
            raise LeanloopError(
                f"{name} returned an array of shape {tuple(output.shape)}",
                hint="return one reward per completion: a list or a 1-D tensor",
            )
        output = output.tolist()
    if not isinstance(output, list | tuple):
        raise LeanloopError(
            f"{name} returned {type(output).__name__}",
            hint="return one reward per completion: a list of floats or a 1-D tensor",
        )
    if len(output) != expected:
        raise LeanloopError(f"{name} returned {len(output)} rewards for {expected} completions")
    values: list[float | None] = []
    for value in output:
        if value is None:
            values.append(None)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            values.append(float(value))
        elif isinstance(value, bool):
            values.append(1.0 if value else 0.0)
        else:
            raise LeanloopError(f"{name} returned a reward of type {type(value).__name__}")
    return values
