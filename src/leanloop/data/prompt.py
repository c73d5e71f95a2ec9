"""The one prompt format for tactic generation (system / user / assistant), shared by the SFT and
GRPO trainers and by the provers: the training examples it makes of traced steps, and the parsing
of what a model generates."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, fields
from typing import Any

from pydantic import BaseModel, ConfigDict

from leanloop.data.records import Theorem, is_sorry_tactic, strip_premise_marks

DEFAULT_SYSTEM_PROMPT = (
    "You are an expert in the Lean 4 theorem prover. You are given the current proof state "
    "(hypotheses, then the goal after ⊢). Reply with exactly one Lean 4 tactic that makes "
    "progress on the goal. A tactic that spans several lines (a have with its proof, a calc "
    "block, a match with its cases) keeps its line breaks and indentation. Do not use sorry or "
    "admit. Reply with the tactic only."
)

#: Headings of the two parts of a state with retrieved premises (see state_with_premises).
PREMISES_HEADING = "Premises that may help:"
STATE_HEADING = "Proof state:"

_FENCE = re.compile(r"^```\s*[\w-]*\s*$")


@dataclass(frozen=True, slots=True)
class PromptExample:
    """One traced step as a chat example. Its field names are the dataset's column names: TRL
    reads ``prompt`` and ``completion``, and hands every other column to GRPO reward functions
    as the keyword argument of the same name."""

    prompt: list[dict[str, str]]  # the system and user messages
    completion: list[dict[str, str]]  # the assistant message teaching the tactic
    state: str  # the proof state before the step, as recorded
    tactic: str  # the whole recorded tactic as taught (see tactic_text), line breaks kept
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
        """The assistant message teaching ``tactic``, the whole of it (see :func:`tactic_text`)."""
        return [{"role": "assistant", "content": tactic_text(tactic)}]

    def examples(self, theorems: Iterable[Theorem]) -> Iterator[PromptExample]:
        """An example for every traced step (``sorry`` steps are skipped)."""
        for theorem in theorems:
            for step in theorem.traced_tactics:
                if step.is_sorry:
                    continue
                tactic = tactic_text(step.tactic)
                if not tactic:
                    continue
                yield PromptExample(
                    prompt=self.prompt(step.state_before),
                    completion=self.completion(tactic),
                    state=step.state_before,
                    tactic=tactic,
                    full_name=theorem.full_name,
                )

    def parse(self, generated: str) -> str | None:
        """The tactic in a model's reply, line breaks and relative indentation kept.

        The reply's first code fence holds it when there is one; a leading ``tactic:`` label is
        dropped; the tactic runs from the first line with content to the first blank line (a
        tactic as taught has none, so what follows one is not part of it). None when there is
        no tactic or it uses ``sorry``/``admit``.
        """
        lines = generated.splitlines()
        opening = next((i for i, line in enumerate(lines) if _FENCE.match(line.strip())), None)
        if opening is not None:
            rest = lines[opening + 1 :]
            closing = next((i for i, line in enumerate(rest) if line.strip() == "```"), None)
            lines = rest[:closing]
        while lines and not lines[0].strip():
            lines = lines[1:]
        if lines and lines[0].strip().startswith("tactic:"):
            label, _, after = lines[0].partition("tactic:")
            lines = [" " * len(label) + after.lstrip(), *lines[1:]]
            while lines and not lines[0].strip():  # a bare label: the tactic is on a later line
                lines = lines[1:]
        end = next((i for i, line in enumerate(lines) if not line.strip()), len(lines))
        tactic = tactic_text("\n".join(lines[:end]))
        if not tactic or is_sorry_tactic(tactic):
            return None
        return tactic


def state_with_premises(state: str, premises: Sequence[str]) -> str:
    """What a generator reads for a proof state with retrieved premises (each the text of a
    declaration): the premises, the best one last, nearest the state, then the state. A prompt
    cut to fit a model loses its beginning, so the least useful premises go first."""
    if not premises:
        return state
    listed = "\n\n".join(text.strip() for text in reversed(premises))
    return f"{PREMISES_HEADING}\n{listed}\n\n{STATE_HEADING}\n{state.strip()}"


def tactic_text(tactic: str) -> str:
    """A tactic as it is taught and read back: premise marks stripped, line breaks and relative
    indentation kept (Lean reads indentation), common indentation, trailing spaces and blank
    lines removed."""
    lines = [line.rstrip() for line in strip_premise_marks(tactic).splitlines()]
    return textwrap.dedent("\n".join(line for line in lines if line)).strip()


def collapse_whitespace(text: str) -> str:
    """``text`` on one line, each run of whitespace one space (how tactics are compared)."""
    return " ".join(text.split())


def is_recorded_tactic(proposed: str, tactic: str) -> bool:
    """Whether ``proposed`` is the whole recorded ``tactic``, whitespace collapsed (a multi-line
    tactic's first line alone is not)."""
    return collapse_whitespace(proposed) == collapse_whitespace(tactic)
