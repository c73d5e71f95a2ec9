"""What every tactic generator offers, whatever model is behind it: for a batch of proof states,
up to ``k`` tactics each, ranked best first, with their scores (search, whole-proof mode and the
trainers' evaluation all use this one shape)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable


class GeneratedTactic(NamedTuple):
    """A proposed tactic and its score (higher is better; for a language model, the
    log-probability of the reply)."""

    tactic: str
    score: float


@runtime_checkable
class Generator(Protocol):
    """Proposes ranked tactics for proof states (e.g. ``TacticGenerator``)."""

    def generate_batch(
        self, states: Sequence[str], k: int, **options: Any
    ) -> list[list[GeneratedTactic]]:
        """For each state (in order), up to ``k`` distinct tactics, best first. ``options`` are
        the implementation's own settings for this call (e.g. decoding options)."""
        ...
