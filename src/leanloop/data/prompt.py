"""The one prompt format for tactic generation (system / user / assistant), shared by the SFT and
GRPO trainers and by the provers: the training examples it makes of traced steps, and the parsing
of what a model generates."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, fields
from typing import Any

from pydantic import BaseModel, ConfigDict

from leanloop.data.records import Theorem, TracedTactic, is_sorry_tactic, strip_premise_marks

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

    def user_content(self, state: str, premises: Sequence[str] = ()) -> str:
        """What the user turn says for a proof state: the state (premise marks stripped), after
        the retrieved ``premises`` when there are any (see :func:`state_with_premises`)."""
        return state_with_premises(
            strip_premise_marks(state).strip(), [strip_premise_marks(p) for p in premises]
        )

    def prompt(self, state: str, premises: Sequence[str] = ()) -> list[dict[str, str]]:
        """The system and user messages for a proof state (premise marks stripped), with the
        retrieved ``premises`` (each a declaration's text, best first) before it.

        The one builder of prompts: the trainers build their examples with it and the provers
        their prompts (``RetrievalProver`` hands the generator ``user_content(state,
        premises)``, which this method turns into the same messages).
        """
        return [
            {"role": "system", "content": self.system},
            {"role": "user", "content": self.user_content(state, premises)},
        ]

    def completion(self, tactic: str) -> list[dict[str, str]]:
        """The assistant message teaching ``tactic``, the whole of it (see :func:`tactic_text`)."""
        return [{"role": "assistant", "content": tactic_text(tactic)}]

    def example(
        self, theorem: Theorem, step: TracedTactic, premises: Sequence[str] = ()
    ) -> PromptExample | None:
        """The example of one traced step (None for a ``sorry`` step or an empty tactic), its
        prompt with ``premises`` when given."""
        if step.is_sorry:
            return None
        tactic = tactic_text(step.tactic)
        if not tactic:
            return None
        return PromptExample(
            prompt=self.prompt(step.state_before, premises),
            completion=self.completion(tactic),
            state=step.state_before,
            tactic=tactic,
            full_name=theorem.full_name,
        )

    def examples(self, theorems: Iterable[Theorem]) -> Iterator[PromptExample]:
        """An example for every traced step (``sorry`` steps are skipped)."""
        for theorem in theorems:
            for step in theorem.traced_tactics:
                example = self.example(theorem, step)
                if example is not None:
                    yield example

    def fit_prompt(
        self,
        state: str,
        premises: Sequence[str] = (),
        *,
        tokenizer: Any,
        max_tokens: int,
        completion: list[dict[str, str]] | None = None,
    ) -> FittedPrompt | None:
        """The prompt for a state, cut inside the user turn to fit ``max_tokens`` tokens once the
        tokenizer's chat template is applied (with ``completion`` after it when given, as a
        trainer sees it; else with the generation prompt, as a generator does).

        What goes first: the least useful premises (the first listed), one at a time; then the
        state's first lines (hypotheses before the goal, which comes last); then the first
        characters of what is left. The system prompt, the chat template and the completion
        stay whole.

        Args:
            state: The proof state.
            premises: Retrieved premises, best first.
            tokenizer: A Hugging Face tokenizer with a chat template.
            max_tokens: The tokens the rendered prompt (and completion) may take.
            completion: The assistant messages, when training.

        Returns:
            The messages and their token count, or None when even an empty state does not fit
            (the template, the system prompt and the completion take all of it).
        """

        def measure(content: str) -> FittedPrompt:
            messages = [
                {"role": "system", "content": self.system},
                {"role": "user", "content": content},
            ]
            if completion is None:
                text = tokenizer.apply_chat_template(
                    messages, tokenize=False, add_generation_prompt=True
                )
            else:
                text = tokenizer.apply_chat_template(messages + completion, tokenize=False)
            count = len(tokenizer(text, add_special_tokens=False)["input_ids"])
            return FittedPrompt(messages, count, cut=content != whole)

        state = strip_premise_marks(state).strip()
        premises = [strip_premise_marks(p) for p in premises]
        whole = self.user_content(state, premises)
        fitted = measure(whole)
        if fitted.tokens <= max_tokens:
            return fitted
        lines = state.splitlines()
        last = lines[-1] if lines else ""

        def fewer_premises(n: int) -> str:  # the least useful go first, the state kept whole
            return state_with_premises(state, premises[: len(premises) - n])

        def later_lines(n: int) -> str:  # the state's first lines go, the goal stays
            return "\n".join(lines[n:]).strip()

        def end_of_last_line(n: int) -> str:
            return last[n:].strip()

        stages: list[tuple[Callable[[int], str], int]] = [
            (fewer_premises, len(premises)),
            (later_lines, len(lines) - 1),
            (end_of_last_line, len(last)),
        ]
        for build, most in stages:

            def fits(n: int, build: Callable[[int], str] = build) -> bool:
                return measure(build(n)).tokens <= max_tokens

            best = _smallest(fits, most)
            if best is not None:
                return measure(build(best))
        return None

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


@dataclass(frozen=True, slots=True)
class FittedPrompt:
    """A prompt fitted to a token budget: its messages, the tokens they take once rendered (with
    the completion, when one was given) and whether anything was cut."""

    messages: list[dict[str, str]]
    tokens: int
    cut: bool


def _smallest(fits: Callable[[int], bool], most: int) -> int | None:
    """The smallest ``n`` in ``1..most`` for which ``fits(n)`` holds, ``fits`` being monotone
    (None when ``fits(most)`` does not)."""
    if most < 1 or not fits(most):
        return None
    low, high = 1, most
    while low < high:
        middle = (low + high) // 2
        if fits(middle):
            high = middle
        else:
            low = middle + 1
    return low


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
