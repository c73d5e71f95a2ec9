"""Kimina Lean Server's API for checking Lean code: ``POST /verify`` (its backward-compatible
shape: ``codes`` with ``custom_id``) and ``POST /api/checks`` / ``POST /api/check`` (``snippets``
with ``id``); each answer carries the REPL's response as Lean gave it (messages, sorries).

Messages and sorries are the Lean REPL's (``leanloop.lean.protocol.repl``'s models, written from
leanloop's by ``repl_response``). Positions are in one convention, the current Kimina Lean
Server's (since October 2025): lines count from the first line of the code as sent, its imports
included, though the imports are elaborated apart (``Convention.WHOLE`` in
``leanloop.lean.kimina_positions``); columns are Lean's. An ``infotree`` asked for comes back as
the REPL gave it, its lines counted from the code after the imports, as Kimina Lean Server
gives it (it never moves them).

What an answer's ``verdict`` means, and does not: ``accepted`` says Lean raised no error and
left no ``sorry`` in the code as a whole. The axioms are not audited and no declaration is
judged on its own (``axioms_audited`` is false in every answer): it is not leanloop's verdict
that a theorem is proved, which needs the audit (``leanloop prove``, the Python API)."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field, model_validator

from leanloop.lean.protocol.repl import Message, Sorry
from leanloop.lean.verdict import Outcome
from leanloop.lean.verification import Verification
from leanloop.serve.state import ServerState, server_state
from leanloop.serve.wire import Text, omitted_when_null

Infotree = Literal["full", "tactics", "original", "substantive"]
#: An answer's ``verdict`` as the API writes it: Lean's ``Outcome`` on the code as a whole, its
#: ``sorry`` written ``contains_sorry`` (the API's value since its first release).
WireVerdict = Literal["accepted", "rejected", "contains_sorry"]
_WIRE: dict[Outcome, WireVerdict] = {
    Outcome.ACCEPTED: "accepted",
    Outcome.REJECTED: "rejected",
    Outcome.SORRY: "contains_sorry",
}
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
    infotree_type: Infotree | None = Field(
        default=None, description="The REPL's infotree of this kind, returned with each answer."
    )
    disable_cache: bool = Field(
        default=False, description="Accepted for compatibility; REPLs are always reused."
    )


class ReplResponse(BaseModel):
    """The Lean REPL's answer on the code (lines count from the first line of the code as sent,
    imports included)."""

    model_config = ConfigDict(populate_by_name=True)

    env: int | None = omitted_when_null()
    messages: list[Message] | None = omitted_when_null()
    sorries: list[Sorry] | None = omitted_when_null()
    time: float | None = omitted_when_null()
    infotree: Any = omitted_when_null(
        description="The REPL's infotree as it gave it (when asked for); its lines count from "
        "the code after the imports."
    )


class VerifyResult(BaseModel):
    custom_id: str
    error: str | None = Field(description="Why the code could not be checked (null if it was).")
    response: ReplResponse | None = None
    verdict: WireVerdict | None = omitted_when_null(
        description="leanloop's reading of Lean's answer on the code as a whole: accepted (no "
        "error, no sorry), rejected, or contains_sorry. Not an axiom audit.",
    )
    axioms_audited: bool = Field(
        default=False,
        description="Always false: 'accepted' does not mean the axioms were audited (a proof "
        "by native_decide or resting on a declared axiom is accepted here).",
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
    infotree: Infotree | None = Field(
        default=None, description="The REPL's infotree of this kind, returned with each answer."
    )


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
    verdict: WireVerdict | None = omitted_when_null()
    axioms_audited: bool = Field(
        default=False, description="Always false: 'verdict' is not an axiom audit."
    )


def repl_response(checked: Verification, *, with_time: bool) -> ReplResponse | None:
    """Lean's answer on one code in the REPL's shape (messages and sorries written by the REPL
    protocol's models from leanloop's), or None when the check gave none."""
    result = checked.result
    if result is None:
        return None
    return ReplResponse(
        env=result.env,
        messages=[Message.of(m) for m in result.messages] or None,
        sorries=[Sorry.of(s) for s in result.sorries] or None,
        time=checked.seconds if with_time else None,
        infotree=result.infotree,
    )


def verdict(checked: Verification) -> WireVerdict | None:
    """The answer's ``verdict``: Lean's verdict on the code as a whole, as the API writes it
    (None when the check gave no answer)."""
    return _WIRE[checked.result.verdict] if checked.result is not None else None


router = APIRouter(tags=["Lean"])


@router.post("/verify", response_model=VerifyResponse)
async def verify(request: VerifyRequest, state: ServerState = Depends(server_state)) -> Any:
    """Check Lean code (Kimina Lean Server's request and response)."""
    texts = [c.text for c in request.codes]
    checked = await state.verifier.check(texts, request.timeout, request.infotree_type)
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
    codes = [s.code for s in request.snippets]
    checked = await state.verifier.check(codes, request.timeout, request.infotree)
    return [_check_response(s, c) for s, c in zip(request.snippets, checked, strict=True)]


@router.post("/api/check", response_model=CheckResponse)
async def check(request: CheckRequest, state: ServerState = Depends(server_state)) -> Any:
    """Check one snippet of Lean code (Kimina Lean Server's newer API)."""
    (checked,) = await state.verifier.check(
        [request.snippet.code], request.timeout, request.infotree
    )
    return _check_response(request.snippet, checked)


def _check_response(snippet: Snippet, checked: Verification) -> CheckResponse:
    return CheckResponse(
        id=snippet.id,
        time=checked.seconds,
        error=checked.error,
        response=repl_response(checked, with_time=False),
        verdict=verdict(checked),
    )
