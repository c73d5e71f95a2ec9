"""The ``recorded`` diagnostic, ``RecordedGenerator`` and its ``RecordedProver``: for a state,
the tactics recorded from it among others drawn (seeded) from other steps, with random scores,
so that a search over the replay environment must find every recorded proof (a check of the data
and the search together)."""

from __future__ import annotations

import math
import os
import random
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from leanloop.data.prompt import collapse_whitespace
from leanloop.data.records import Theorem
from leanloop.errors import LeanloopError
from leanloop.ml.protocols import GeneratedTactic, Generator
from leanloop.prover.base import BaseProver
from leanloop.prover.config import ProverConfig
from leanloop.prover.replay import StepIndex, goals_of, recorded_steps


class RecordedGenerator:
    """Proposes, for each state, every tactic recorded from it (in any of ``theorems``) among
    ``k`` candidates; the others are tactics of other steps. Scores are random log-probabilities
    drawn from a generator seeded by ``seed`` and the state, so a state gets the same candidates
    in every process and on every call."""

    def __init__(self, theorems: Iterable[Theorem], *, seed: int = 0) -> None:
        self.seed = seed
        self.index = StepIndex()
        pool: dict[str, str] = {}
        for theorem in theorems:
            for step in recorded_steps(theorem):
                self.index.add(step)
                pool.setdefault(step.key, step.tactic)
        self._pool = sorted(pool.items())  # (tactic whitespace collapsed, tactic)

    @classmethod
    def from_dataset(cls, path: str | os.PathLike, *, seed: int = 0) -> RecordedGenerator:
        from leanloop.data.formats import open_dataset

        return cls(open_dataset(Path(path)).iter_theorems(), seed=seed)

    def recorded(self, state: str) -> list[str]:
        """The tactics recorded from ``state`` (each once)."""
        found: dict[str, str] = {}
        for step in self.index.applicable(goals_of(state)):
            found.setdefault(step.key, step.tactic)
        return list(found.values())

    def generate_batch(
        self, states: Sequence[str], k: int, *, seed: int | None = None, **_: Any
    ) -> list[list[GeneratedTactic]]:
        return [self._candidates(state, k, self.seed if seed is None else seed) for state in states]

    def _candidates(self, state: str, k: int, seed: int) -> list[GeneratedTactic]:
        rng = random.Random(f"{seed}\0{state}")
        tactics = self.recorded(state)[:k]
        chosen = {collapse_whitespace(t) for t in tactics}
        wanted = k - len(tactics)
        if wanted > 0 and self._pool:
            picks = rng.sample(range(len(self._pool)), min(len(self._pool), wanted + len(chosen)))
            for i in picks:
                key, tactic = self._pool[i]
                if len(tactics) >= k:
                    break
                if key not in chosen:
                    tactics.append(tactic)
        scored = [GeneratedTactic(t, math.log(1.0 - rng.random())) for t in tactics]
        scored.sort(key=lambda g: -g.score)
        return scored


class RecordedProver(BaseProver):
    """The prover of the ``recorded`` diagnostic: ``RecordedGenerator`` over the theorems of a
    LeanDojo-format dataset (its attempt ``i`` draws with seed ``config.seed + i``)."""

    def __init__(
        self,
        dataset: str | os.PathLike,
        *,
        config: ProverConfig | Mapping[str, Any] | str | os.PathLike | None = None,
    ) -> None:
        super().__init__(config)
        self.dataset = Path(dataset).expanduser()
        if not self.dataset.exists():
            raise LeanloopError(f"dataset {self.dataset}: no such file or directory")

    @property
    def name(self) -> str:
        return "recorded"

    def load_generator(self) -> Generator:
        return RecordedGenerator.from_dataset(self.dataset, seed=self.config.seed)

    def generator_options(self, attempt: int) -> dict[str, Any]:
        return {"seed": self.config.seed + attempt}
