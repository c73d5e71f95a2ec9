"""The Lean REPL's JSON protocol (leanprover-community/repl): one model per request and per
answer, with Lean's field names as aliases.

Requests are JSON objects separated by blank lines; each answer is one JSON object followed by a
blank line. Answers keep every field Lean sent (unknown future fields are kept as extras).

This is the one reading of the REPL's JSON: ``Message.lean`` and ``Sorry.site`` turn its
messages and sorries into leanloop's ``LeanMessage`` and ``SorrySite``, and ``Message.of`` /
``Sorry.of`` write them back in the REPL's shape (the model server's ``/verify`` answers in it).
Optional positions left out are left out when written (never ``null``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from leanloop.lean.elaboration import LeanMessage, SorrySite
from leanloop.lean.errors import ProtocolError, excerpt
from leanloop.words import plural


def _null(value: Any) -> bool:
    return value is None


def _optional(alias: str | None = None) -> Any:
    """An optional field, left out of what is written when it is None."""
    return Field(default=None, alias=alias, exclude_if=_null)


def _moved(line: int, line_offset: int) -> int:
    """A line of Lean's moved by ``line_offset`` (0, Lean's "no line", stays)."""
    return line + line_offset if line > 0 else line


class _ReplRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_none=True)


class CommandRequest(_ReplRequest):
    """Elaborate Lean source: from an empty environment, or continuing environment ``env``."""

    cmd: str
    env: int | None = None
    all_tactics: bool | None = Field(default=None, alias="allTactics")
    root_goals: bool | None = Field(default=None, alias="rootGoals")
    infotree: str | None = None


class FileRequest(_ReplRequest):
    """Elaborate a whole ``.lean`` file, as ``cmd`` does with its contents."""

    path: str
    env: int | None = None
    all_tactics: bool | None = Field(default=None, alias="allTactics")
    root_goals: bool | None = Field(default=None, alias="rootGoals")
    infotree: str | None = None


class TacticRequest(_ReplRequest):
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
    """A message Lean printed, in the REPL's shape."""

    severity: Literal["error", "warning", "info", "information"]
    pos: Position
    end_pos: Position | None = _optional("endPos")
    data: str

    def lean(self, line_offset: int = 0) -> LeanMessage:
        """leanloop's message, its lines moved by ``line_offset`` (the lines not sent)."""
        return LeanMessage(
            severity="info" if self.severity == "information" else self.severity,
            text=self.data,
            line=_moved(self.pos.line, line_offset),
            column=self.pos.column,
            end_line=_moved(self.end_pos.line, line_offset) if self.end_pos else None,
            end_column=self.end_pos.column if self.end_pos else None,
        )

    @classmethod
    def of(cls, message: LeanMessage) -> Message:
        """The REPL's shape of leanloop's ``message`` (line 0, column 0 where it has none)."""
        end = None
        if message.end_line is not None and message.end_column is not None:
            end = Position(line=message.end_line, column=message.end_column)
        return cls(
            severity=message.severity,  # Lean's own severities
            pos=Position(line=message.line or 0, column=message.column or 0),
            end_pos=end,
            data=message.text,
        )


class Sorry(_Answer):
    """A ``sorry`` left in the code, with the proof state it stands for."""

    proof_state: int | None = _optional("proofState")
    pos: Position | None = _optional()
    end_pos: Position | None = _optional("endPos")
    goal: str

    def site(self, line_offset: int = 0) -> SorrySite:
        """leanloop's sorry, its line moved by ``line_offset``."""
        line = _moved(self.pos.line, line_offset) if self.pos else None
        return SorrySite(self.proof_state, self.goal, line, self.pos.column if self.pos else None)

    @classmethod
    def of(cls, sorry: SorrySite) -> Sorry:
        """The REPL's shape of leanloop's ``sorry``."""
        pos = None
        if sorry.line is not None and sorry.column is not None:
            pos = Position(line=sorry.line, column=sorry.column)
        return cls(pos=pos, goal=sorry.goal, proof_state=sorry.proof_state)


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
    """Type a request given as a JSON object (used to answer from transcripts of exchanges)."""
    for model in (TacticRequest, CommandRequest, FileRequest):
        try:
            return model.model_validate(raw)
        except ValidationError:
            continue
    raise ProtocolError(f"not a Lean REPL request: {raw}")
