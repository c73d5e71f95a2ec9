"""Pantograph's REPL protocol (``pantograph-repl``): one model per command payload and result.

The server prints ``ready.`` once, then reads one command a line, ``<command> <json payload>``,
and answers one JSON line each; an error is ``{"error": kind, "desc": text}``. Field names follow
Pantograph's (camelCase aliases). Results accept the fields of both older releases
(``tacticErrors``) and newer ones (``messages``, ``hasSorry``, ``hasUnsafe``).
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError

from leanloop.lean.errors import ProtocolError, excerpt

READY = "ready."


class _Payload(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)
    command: ClassVar[str]

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_none=True)


class GoalStart(_Payload):
    command: ClassVar[str] = "goal.start"
    expr: str | None = None
    copy_from: str | None = Field(default=None, alias="copyFrom")
    levels: list[str] | None = None


class GoalTactic(_Payload):
    command: ClassVar[str] = "goal.tactic"
    state_id: int = Field(alias="stateId")
    goal_id: int | None = Field(default=None, alias="goalId")
    tactic: str | None = None
    expr: str | None = None
    have: str | None = None
    let: str | None = None
    calc: str | None = None
    conv: bool | None = None
    binder_name: str | None = Field(default=None, alias="binderName")


class GoalContinue(_Payload):
    command: ClassVar[str] = "goal.continue"
    target: int
    branch: int | None = None
    goals: list[str] | None = None


class GoalDelete(_Payload):
    command: ClassVar[str] = "goal.delete"
    state_ids: list[int] = Field(alias="stateIds")


class EnvInspect(_Payload):
    command: ClassVar[str] = "env.inspect"
    name: str
    value: bool | None = None
    dependency: bool | None = None
    source: bool | None = None


class OptionsSet(_Payload):
    command: ClassVar[str] = "options.set"
    model_config = ConfigDict(extra="allow", populate_by_name=True, frozen=True)
    automatic_mode: bool | None = Field(default=None, alias="automaticMode")
    timeout: int | None = None
    print_expr_ast: bool | None = Field(default=None, alias="printExprAST")


class FrontendProcess(_Payload):
    command: ClassVar[str] = "frontend.process"
    file: str | None = None
    file_name: str | None = Field(default=None, alias="fileName")
    #: elaborate the file's own imports (false: the file is elaborated in the environment of
    #: the modules the process imported when it started, and holds no import)
    read_header: bool | None = Field(default=None, alias="readHeader")
    inherit_env: bool | None = Field(default=None, alias="inheritEnv")
    #: older releases: whether to report the invocations; newer: the file to write them to
    invocations: bool | str | None = None
    sorrys: bool | None = None
    type_errors_as_goals: bool | None = Field(default=None, alias="typeErrorsAsGoals")
    new_constants: bool | None = Field(default=None, alias="newConstants")


class ExprEcho(_Payload):
    command: ClassVar[str] = "expr.echo"
    expr: str
    type: str | None = None


class _Result(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True, frozen=True)


class Expression(_Result):
    pp: str | None = None
    sexp: str | None = None


class Variable(_Result):
    name: str = ""
    user_name: str = Field(default="", alias="userName")
    is_inaccessible: bool | None = Field(default=None, alias="isInaccessible")
    t: Expression | None = Field(default=None, validation_alias=AliasChoices("t", "type"))
    v: Expression | None = Field(default=None, validation_alias=AliasChoices("v", "value"))


class PantographGoal(_Result):
    name: str = ""
    user_name: str | None = Field(default=None, alias="userName")
    is_conversion: bool = Field(default=False, alias="isConversion")
    target: Expression
    vars: list[Variable] = Field(default_factory=list)

    def pretty(self) -> str:
        """The goal as Lean shows it: ``case`` line, hypotheses, then ``⊢ target``."""
        lines = []
        if self.user_name:
            lines.append(f"case {self.user_name}")
        for var in self.vars:
            label = var.user_name or var.name
            typ = var.t.pp if var.t is not None else "?"
            if var.v is not None and var.v.pp is not None:
                lines.append(f"{label} : {typ} := {var.v.pp}")
            else:
                lines.append(f"{label} : {typ}")
        lines.append(f"⊢ {self.target.pp}")
        return "\n".join(lines)


class PantographMessage(_Result):
    severity: str = "error"
    data: str = ""
    pos: Any = None
    end_pos: Any = Field(default=None, alias="endPos")


class InteractionError(_Result):
    error: str
    desc: str


class GoalStartResult(_Result):
    state_id: int = Field(alias="stateId")
    root: str | None = None


class GoalTacticResult(_Result):
    next_state_id: int | None = Field(default=None, alias="nextStateId")
    goals: list[PantographGoal] | None = None
    messages: list[PantographMessage | str] | None = None
    tactic_errors: list[str] | None = Field(default=None, alias="tacticErrors")
    parse_error: str | None = Field(default=None, alias="parseError")
    has_sorry: bool = Field(default=False, alias="hasSorry")
    has_unsafe: bool = Field(default=False, alias="hasUnsafe")

    def errors(self) -> list[str]:
        """Lean's error messages for a failed tactic; empty when the tactic succeeded."""
        found = []
        if self.parse_error is not None:
            found.append(self.parse_error)
        found.extend(self.tactic_errors or [])
        for message in self.messages or []:
            if isinstance(message, str):
                found.append(message)
            elif message.severity == "error":
                found.append(message.data)
        if not found and (self.next_state_id is None or self.goals is None):
            found.append("the tactic failed (no next state)")
        return found


class EnvInspectResult(_Result):
    type: Expression | None = None
    value: Expression | None = None
    module: str | None = None
    is_unsafe: bool | None = Field(default=None, alias="isUnsafe")


class CompilationUnit(_Result):
    boundary: tuple[int, int] | None = None
    messages: list[PantographMessage | str] = Field(default_factory=list)
    invocations: list[dict[str, Any]] | None = None
    goal_state_id: int | None = Field(default=None, alias="goalStateId")
    goals: list[PantographGoal] | None = None
    new_constants: list[str] | None = Field(default=None, alias="newConstants")


class FrontendProcessResult(_Result):
    units: list[CompilationUnit] = Field(default_factory=list)


class EmptyResult(_Result):
    pass


RESULTS: dict[str, type[_Result]] = {
    GoalStart.command: GoalStartResult,
    GoalTactic.command: GoalTacticResult,
    GoalContinue.command: GoalTacticResult,
    GoalDelete.command: EmptyResult,
    EnvInspect.command: EnvInspectResult,
    OptionsSet.command: EmptyResult,
    FrontendProcess.command: FrontendProcessResult,
    ExprEcho.command: _Result,
}


def encode(payload: _Payload) -> str:
    """The command line sent to Pantograph (without the newline)."""
    import orjson

    return f"{payload.command} {orjson.dumps(payload.to_json()).decode()}"


def parse_result(payload: _Payload, raw: Any) -> _Result:
    """The typed result (or ``InteractionError``) for ``payload``; ``ProtocolError`` otherwise."""
    if isinstance(raw, dict) and "error" in raw and "desc" in raw:
        return InteractionError.model_validate(raw)
    model = RESULTS.get(payload.command, _Result)
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        shown = excerpt(raw)
        raise ProtocolError(
            f"Pantograph sent an answer to {payload.command} this client does not understand: "
            f"{shown} ({exc.errors()[0]['msg']})"
        ) from None
