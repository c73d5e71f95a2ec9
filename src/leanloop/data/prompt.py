"""The one prompt format for tactic generation (system / user / assistant), shared by the SFT and
GRPO trainers and by the provers: the training examples it makes of traced steps, and the parsing
of what a model generates."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, fields
from typing import Any

from pydantic import BaseModel, ConfigDict

from leanloop.data.records import Theorem, is_sorry_tactic, strip_premise_marks

DEFAULT_SYSTEM_PROMPT = (
    "You are an expert in the Lean 4 theorem prover. You are given the current proof state "
    "(hypotheses, then the goal after ⊢). Reply with exactly one Lean 4 tactic, on one line, "
    "that makes progress on the goal. Do not use sorry or admit. Reply with the tactic only."
)

_FENCE = re.compile(r"^```\s*[\w-]*\s*$")


@dataclass(frozen=True, slots=True)
class PromptExample:
    """One traced step as a chat example. Its field names are the dataset's column names: TRL
    reads ``prompt`` and ``completion``, and hands every other column to GRPO reward functions
    as the keyword argument of the same name."""

    prompt: list[dict[str, str]]  # the system and user messages
    completion: list[dict[str, str]]  # the assistant message teaching the tactic
    state: str  # the proof state before the step, as recorded
    tactic: str  # the tactic taught
    full_tactic: str  # the whole recorded tactic, whitespace collapsed to one line
    full_name: str  # the theorem's full name

    @classmethod
    def columns(cls) -> tuple[str, ...]:
        """The column names, in order."""
        return tuple(field.name for field in fields(cls))

    def row(self, *, exclude: Collection[str] = ()) -> dict[str, Any]:
        """The example as a dataset row: every column but ``exclude``."""
        unknown = set(exclude) - set(self.columns())
        if unknown:
            raise ValueError(f"PromptExample has no column {', '.join(sorted(unknown))}")
        return {name: getattr(self, name) for name in self.columns() if name not in exclude}


class PromptFormat(BaseModel):
    """How a proof state becomes chat messages and how a reply becomes a tactic."""

    model_config = ConfigDict(frozen=True)

    system: str = DEFAULT_SYSTEM_PROMPT

    def prompt(self, state: str) -> list[dict[str, str]]:
        """The system and user messages for a proof state (premise marks stripped)."""
        return [
            {"role": "system", "content": self.system},
            {"role": "user", "content": strip_premise_marks(state).strip()},
        ]

    def completion(self, tactic: str) -> list[dict[str, str]]:
        """The assistant message teaching ``tactic``: its first line, premise marks stripped."""
        return [{"role": "assistant", "content": first_line(strip_premise_marks(tactic))}]

    def examples(self, theorems: Iterable[Theorem]) -> Iterator[PromptExample]:
        """An example for every traced step (``sorry`` steps are skipped); ``full_tactic``
        differs from ``tactic`` for multi-line tactics."""
        for theorem in theorems:
            for step in theorem.traced_tactics:
                if step.is_sorry:
                    continue
                tactic = first_line(strip_premise_marks(step.tactic))
                if not tactic:
                    continue
                yield PromptExample(
                    prompt=self.prompt(step.state_before),
                    completion=self.completion(tactic),
                    state=step.state_before,
                    tactic=tactic,
                    full_tactic=collapse_whitespace(strip_premise_marks(step.tactic)),
                    full_name=theorem.full_name,
                )

    def parse(self, generated: str) -> str | None:
        """The tactic in a model's reply: the first line with content, outside code fences;
        None when there is none or it is ``sorry``/``admit``."""
        for line in generated.splitlines():
            text = line.strip()
            if not text or _FENCE.match(text):
                continue
            text = text.removeprefix("tactic:").strip()
            if not text:  # a bare "tactic:" label: the tactic, if any, is on a later line
                continue
            if is_sorry_tactic(text):
                return None
            return text
        return None


def collapse_whitespace(text: str) -> str:
    """``text`` on one line, each run of whitespace one space (how tactics are compared)."""
    return " ".join(text.split())


def first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""
