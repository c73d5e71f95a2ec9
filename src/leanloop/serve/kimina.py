"""Kimina Lean Server's API for checking Lean code: ``POST /verify`` (its backward-compatible
shape: ``codes`` with ``custom_id``) and ``POST /api/checks`` / ``POST /api/check`` (``snippets``
with ``id``); each answer carries the REPL's response as Lean gave it (messages, sorries).

Positions are in one convention, the current Kimina Lean Server's (since October 2025): lines
count from the first line of the code as sent, its imports included, though the imports are
elaborated apart (``Convention.WHOLE`` in ``leanloop.lean.kimina_positions``); columns are
Lean's."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field, model_validator

from leanloop.lean.verdict import Verdict, verdict_of
from leanloop.serve.errors import BadRequest
from leanloop.serve.state import ServerState, server_state
from leanloop.serve.verifier import Checked
from leanloop.serve.wire import Text, omitted_when_null

Infotree = Literal["original", "synthetic"]
MAX_CODES = 256


class Code(BaseModel):
    custom_id: Text | int = Field(description="Returned with the result.")
    proof: Text | None = Field(default=None, description="The Lean code to check.")
    code: Text | None = Field(default=None, description="The Lean code, when 'proof' is not given.")

    @model_validator(mode="after")
    def _has_code(self) -> Code:
        if self.proof is None and self.code is None:
            raise ValueError("give the Lean code as 'proof' (or 'code')")
        return self

    @property
    def text(self) -> str:
        return self.proof if self.proof is not None else self.code or ""


class VerifyRequest(BaseModel):
    codes: list[Code] = Field(min_length=1, max_length=MAX_CODES)
    timeout: float = Field(
        default=300, gt=0, description="Seconds per code (at most the server's lean.timeout)."
    )
    infotree_type: Infotree | None = Field(default=None, description="Not supported: leave it out.")
    disable_cache: bool = Field(
        default=False, description="Accepted for compatibility; REPLs are always reused."
    )


class Position(BaseModel):
    line: int
    column: int


class Message(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    severity: str
    pos: Position
    end_pos: Position | None = omitted_when_null(alias="endPos")
    data: str


class Sorry(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    pos: Position | None = omitted_when_null()
    goal: str
    proof_state: int | None = omitted_when_null(alias="proofState")


class ReplResponse(BaseModel):
    """The Lean REPL's answer on the code (lines count from the first line of the code as sent,
    imports included)."""

    model_config = ConfigDict(populate_by_name=True)

    env: int | None = omitted_when_null()
    messages: list[Message] | None = omitted_when_null()
    sorries: list[Sorry] | None = omitted_when_null()
    time: float | None = omitted_when_null()


class VerifyResult(BaseModel):
    custom_id: str
    error: str | None = Field(description="Why the code could not be checked (null if it was).")
    response: ReplResponse | None = None
    verdict: Verdict | None = omitted_when_null(
        description="leanloop's reading of Lean's answer: accepted (no error, no sorry), "
        "rejected, or contains_sorry.",
    )


class VerifyResponse(BaseModel):
    results: list[VerifyResult]


class Snippet(BaseModel):
    id: Text
    code: Text


class _CheckOptions(BaseModel):
    timeout: float = Field(default=30, gt=0, description="Seconds per snippet.")
    debug: bool = Field(default=False, description="Accepted for compatibility; no diagnostics.")
    reuse: bool = Field(default=True, description="Accepted for compatibility; REPLs are reused.")
    infotree: Infotree | None = Field(default=None, description="Not supported: leave it out.")


class ChecksRequest(_CheckOptions):
    snippets: list[Snippet] = Field(min_length=1, max_length=MAX_CODES)

    @model_validator(mode="after")
    def _unique_ids(self) -> ChecksRequest:
        ids = [s.id for s in self.snippets]
        if len(set(ids)) != len(ids):
            raise ValueError("snippet ids must be unique")
        return self


class CheckRequest(_CheckOptions):
    snippet: Snippet


class CheckResponse(BaseModel):
    id: str
    time: float = 0.0
    error: str | None = None
    response: ReplResponse | None = None
    verdict: Verdict | None = omitted_when_null()


def repl_response(checked: Checked, *, with_time: bool) -> ReplResponse | None:
    result = checked.elaboration
    if result is None:
        return None
    messages = [
        Message(
            severity=m.severity,
            pos=Position(line=m.line or 0, column=m.column or 0),
            end_pos=Position(line=m.end_line, column=m.end_column)
            if m.end_line is not None and m.end_column is not None
            else None,
            data=m.text,
        )
        for m in result.messages
    ]
    sorries = [
        Sorry(
            pos=Position(line=s.line, column=s.column)
            if s.line is not None and s.column is not None
            else None,
            goal=s.goal,
            proof_state=s.proof_state,
        )
        for s in result.sorries
    ]
    return ReplResponse(
        env=result.env,
        messages=messages or None,
        sorries=sorries or None,
        time=checked.seconds if with_time else None,
    )


def verdict(checked: Checked) -> Verdict | None:
    result = checked.elaboration
    if result is None:
        return None
    return verdict_of(result.messages, sorries=len(result.sorries))


def _no_infotree(value: Any) -> None:
    if value is not None:
        raise BadRequest("infotree is not supported by this server", hint="leave it out")


router = APIRouter(tags=["Lean"])


@router.post("/verify", response_model=VerifyResponse)
async def verify(request: VerifyRequest, state: ServerState = Depends(server_state)) -> Any:
    """Check Lean code (Kimina Lean Server's request and response)."""
    _no_infotree(request.infotree_type)
    texts = [c.text for c in request.codes]
    checked = await state.verifier.check(texts, request.timeout)
    return VerifyResponse(
        results=[
            VerifyResult(
                custom_id=str(c.custom_id),
                error=outcome.error,
                response=repl_response(outcome, with_time=True),
                verdict=verdict(outcome),
            )
            for c, outcome in zip(request.codes, checked, strict=True)
        ]
    )


@router.post("/api/checks", response_model=list[CheckResponse])
async def checks(request: ChecksRequest, state: ServerState = Depends(server_state)) -> Any:
    """Check several snippets of Lean code (Kimina Lean Server's newer API)."""
    _no_infotree(request.infotree)
    checked = await state.verifier.check([s.code for s in request.snippets], request.timeout)
    return [_check_response(s, c) for s, c in zip(request.snippets, checked, strict=True)]


@router.post("/api/check", response_model=CheckResponse)
async def check(request: CheckRequest, state: ServerState = Depends(server_state)) -> Any:
    """Check one snippet of Lean code (Kimina Lean Server's newer API)."""
    _no_infotree(request.infotree)
    (checked,) = await state.verifier.check([request.snippet.code], request.timeout)
    return _check_response(request.snippet, checked)


def _check_response(snippet: Snippet, checked: Checked) -> CheckResponse:
    return CheckResponse(
        id=snippet.id,
        time=checked.seconds,
        error=checked.error,
        response=repl_response(checked, with_time=False),
        verdict=verdict(checked),
    )
