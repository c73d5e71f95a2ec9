"""The Lean REPL's JSON protocol (leanprover-community/repl): one model per request and per
answer, with Lean's field names as aliases.

Requests are JSON objects separated by blank lines; each answer is one JSON object followed by a
blank line. Answers keep every field Lean sent (unknown future fields are kept as extras).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from leanloop.lean.errors import ProtocolError, excerpt
from leanloop.words import plural


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_none=True)


class CommandRequest(_Request):
    """Elaborate Lean source: from an empty environment, or continuing environment ``env``."""

    cmd: str
    env: int | None = None
    all_tactics: bool | None = Field(default=None, alias="allTactics")
    root_goals: bool | None = Field(default=None, alias="rootGoals")
    infotree: str | None = None


class FileRequest(_Request):
    """Elaborate a whole ``.lean`` file, as ``cmd`` does with its contents."""

    path: str
    env: int | None = None
    all_tactics: bool | None = Field(default=None, alias="allTactics")
    root_goals: bool | None = Field(default=None, alias="rootGoals")
    infotree: str | None = None


class TacticRequest(_Request):
    """Run a tactic on a proof state."""

    tactic: str
    proof_state: int = Field(alias="proofState")


ReplRequest = CommandRequest | FileRequest | TacticRequest


class _Answer(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True, frozen=True)

    def to_json(self) -> dict[str, Any]:
        """The answer as Lean sent it (fields Lean did not send stay out)."""
        return self.model_dump(by_alias=True, exclude_unset=True)


class Position(_Answer):
    """A position as Lean reports it: 1-based line, 0-based column (in characters)."""

    line: int
    column: int


class Message(_Answer):
    severity: Literal["error", "warning", "info", "information"]
    pos: Position
    end_pos: Position | None = Field(default=None, alias="endPos")
    data: str


class Sorry(_Answer):
    """A ``sorry`` left in the code, with the proof state it stands for."""

    proof_state: int | None = Field(default=None, alias="proofState")
    pos: Position | None = None
    end_pos: Position | None = Field(default=None, alias="endPos")
    goal: str


class TacticInfo(_Answer):
    """One tactic step reported by ``allTactics``: the goals before it and the constants used."""

    tactic: str
    goals: str
    proof_state: int = Field(alias="proofState")
    pos: Position
    end_pos: Position = Field(alias="endPos")
    used_constants: list[str] = Field(default_factory=list, alias="usedConstants")


class CommandResponse(_Answer):
    """Answer to a command or a file."""

    env: int
    messages: list[Message] = Field(default_factory=list)
    sorries: list[Sorry] = Field(default_factory=list)
    tactics: list[TacticInfo] = Field(default_factory=list)
    infotree: Any = None


class ProofStepResponse(_Answer):
    """Answer to a tactic."""

    proof_state: int = Field(alias="proofState")
    goals: list[str] = Field(default_factory=list)
    messages: list[Message] = Field(default_factory=list)
    sorries: list[Sorry] = Field(default_factory=list)
    traces: list[str] = Field(default_factory=list)
    proof_status: str | None = Field(default=None, alias="proofStatus")


class ReplErrorResponse(_Answer):
    """Lean refused the request (unknown environment or proof state, tactic parse error, ...)."""

    message: str


_COMMAND = TypeAdapter(ReplErrorResponse | CommandResponse)
_PROOF_STEP = TypeAdapter(ReplErrorResponse | ProofStepResponse)


def expects_proof_step(request: ReplRequest) -> bool:
    return isinstance(request, TacticRequest)


def parse_answer(
    request: ReplRequest, raw: Any
) -> CommandResponse | ProofStepResponse | ReplErrorResponse:
    """The typed answer to ``request``; ``ProtocolError`` if ``raw`` is not one."""
    if isinstance(raw, dict) and set(raw) == {"message"}:
        return ReplErrorResponse.model_validate(raw)
    adapter = _PROOF_STEP if expects_proof_step(request) else _COMMAND
    try:
        return adapter.validate_python(raw)
    except ValidationError as exc:
        shown = excerpt(raw)
        raise ProtocolError(
            f"the Lean REPL sent an answer this client does not understand: {shown} "
            f"({plural(exc.error_count(), 'problem')}, first: {exc.errors()[0]['msg']})"
        ) from None


def parse_request(raw: dict[str, Any]) -> ReplRequest:
    """Type a request given as a JSON object (used to replay recorded exchanges)."""
    for model in (TacticRequest, CommandRequest, FileRequest):
        try:
            return model.model_validate(raw)
        except ValidationError:
            continue
    raise ProtocolError(f"not a Lean REPL request: {raw}")
