"""The configuration of a benchmark evaluation (``BenchmarkConfig``): how many whole proofs per
statement, how they are asked for (``ProofPrompt``: prompt formats as data, chat or completion,
and how the proof is taken from the answer), how they are verified and what counts."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.dataclasses import dataclass

from leanloop.configfile import CONFIG
from leanloop.data.benchmark import BenchmarkProblem
from leanloop.prover.config import SoundnessPolicy

_FENCED = re.compile(r"```[ \t]*(lean4|lean)[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)
_FIELDS = ("header", "informal_prefix", "formal_statement", "name", "goal")


class ProofPrompt(BaseModel):
    """How a whole-proof model is asked for a proof of a benchmark problem, and how the proof is
    read from its answer. ``template`` is filled with the problem's ``{header}``,
    ``{informal_prefix}``, ``{formal_statement}``, ``{name}`` and ``{goal}``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    style: Literal["chat", "completion"] = Field(
        default="completion",
        description="chat: the template is the user's message (after 'system'); completion: "
        "the template is the text the model continues.",
    )
    system: str | None = Field(default=None, description="The system message of a chat prompt.")
    template: str = Field(
        default="Complete the following Lean 4 code:\n\n```lean4\n{header}{informal_prefix}"
        "{formal_statement}",
        description="The prompt, with the problem's fields in braces.",
    )
    extract: Literal["fenced", "completion"] = Field(
        default="completion",
        description="fenced: the proof is the last ```lean4 (or ```lean) block of the answer; "
        "completion: the answer continues the prompt, up to a closing ``` if there is one.",
    )

    @field_validator("template")
    @classmethod
    def _known_fields(cls, template: str) -> str:
        for name in re.findall(r"(?<!\{)\{(\w*)\}(?!\})", template):
            if name not in _FIELDS:
                raise ValueError(
                    f"unknown field {{{name}}} in the template (known: "
                    + ", ".join("{" + f + "}" for f in _FIELDS)
                    + ")"
                )
        return template

    def text(self, problem: BenchmarkProblem) -> str:
        """The prompt's text for a problem.

        Args:
            problem: The benchmark problem.

        Returns:
            The template filled with the problem's fields.
        """
        values = {
            "header": problem.header,
            "informal_prefix": problem.informal_prefix,
            "formal_statement": problem.formal_statement,
            "name": problem.name,
            "goal": problem.goal or "",
        }
        return self.template.format(**values)

    def messages(self, problem: BenchmarkProblem) -> list[dict[str, str]]:
        """The chat messages of a chat prompt.

        Args:
            problem: The benchmark problem.

        Returns:
            The system message (when there is one) and the user's message.
        """
        messages = [{"role": "system", "content": self.system}] if self.system else []
        return [*messages, {"role": "user", "content": self.text(problem)}]

    def candidate(self, answer: str) -> str | None:
        """The candidate in a model's answer.

        Args:
            answer: The model's answer.

        Returns:
            The last fenced Lean block (``fenced``), or the completion itself up to a closing
            fence (``completion``); None when a fenced answer holds no block.
        """
        if self.extract == "fenced":
            blocks = _FENCED.findall(answer)
            return blocks[-1][1] if blocks else None
        end = answer.find("```")
        return answer if end < 0 else answer[:end]


#: Prompt formats by name: ``complete`` (DeepSeek-Prover's "complete the following Lean 4 code",
#: continued by the model) and ``chat`` (the same code in a chat message; the answer's last
#: ``lean4`` block, as Kimina-Prover and Goedel-Prover answer, is the whole file).
PROMPTS: dict[str, ProofPrompt] = {
    "complete": ProofPrompt(),
    "chat": ProofPrompt(
        style="chat",
        system="You are an expert in the Lean 4 theorem prover and Mathlib.",
        template="Complete the following Lean 4 code. Reply with the whole code, with the "
        "proof, in one ```lean4 block.\n\n```lean4\n{header}{informal_prefix}{formal_statement}"
        "\n```",
        extract="fenced",
    ),
}


@dataclass(config=CONFIG)
class BenchmarkConfig(SoundnessPolicy):
    """A benchmark evaluation: ``samples`` whole proofs per statement, asked for in batches of
    ``batch_size``, checked by ``workers`` verification workers fed through a queue of at most
    ``queue_size`` candidates (generation waits when it is full). ``prompt`` is a format's
    fields or the name of one of ``PROMPTS`` (``complete``, ``chat``).

    A proof counts only when Lean accepted the declaration and its axioms are among
    ``allowed_axioms`` (``sorryAx`` never; native code only with ``allow_native``): the
    soundness policy's fields, declared once in ``SoundnessPolicy``.
    """

    samples: int = Field(
        default=1, ge=1, description="Whole proofs sampled per statement (the n of pass@k)."
    )
    batch_size: int = Field(default=4, ge=1, description="Samples asked of the model at once.")
    stop_at_first: bool = Field(
        default=False,
        description="Stop sampling a statement at its first verified proof (saves budget; "
        "only pass@n is reported then).",
    )
    prompt: ProofPrompt = Field(
        default_factory=ProofPrompt,
        description="The prompt format: its fields, or a name (complete, chat).",
    )
    workers: int = Field(default=4, ge=1, description="Verification workers (REPLs of the pool).")
    verify_batch: int = Field(
        default=1,
        ge=1,
        description="Candidates a worker sends the verifier at once (Kimina: batches).",
    )
    queue_size: int = Field(
        default=32, ge=1, description="Candidates waiting for verification at most (back-pressure)."
    )
    timeout: float = Field(default=300.0, gt=0, description="Seconds per Lean check.")
    memory_limit_mb: float | None = Field(
        default=None,
        gt=0,
        description="Memory a REPL of the pool may use (it is restarted past it).",
    )
    max_tokens: int = Field(default=2048, ge=1, description="Tokens per sampled proof at most.")
    temperature: float = Field(default=1.0, ge=0, description="Sampling temperature.")

    @field_validator("prompt", mode="before")
    @classmethod
    def _named_prompt(cls, value: object) -> object:
        if isinstance(value, str):
            if value not in PROMPTS:
                raise ValueError(f"unknown prompt format {value!r} (known: {', '.join(PROMPTS)})")
            return PROMPTS[value]
        return value
