"""What Lean reports when it elaborates a piece of code, whatever the server: its messages, the
``sorry``s left in it and (with ``allTactics``) each tactic step. Positions are Lean's: 1-based
lines, 0-based columns, in the code as given."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from leanloop.lean.account import ElaboratedCommand
from leanloop.lean.server import LeanMessage


@dataclass(frozen=True)
class SorrySite:
    """A ``sorry`` left in the code: the proof state standing for it (when the server gives one),
    its goal as Lean prints it, and where it is."""

    proof_state: int | None
    goal: str
    line: int | None
    column: int | None


@dataclass(frozen=True)
class TacticStep:
    """A tactic found by elaborating code with ``allTactics``: text, goals before, constants."""

    tactic: str
    goals_before: str
    line: int
    column: int
    end_line: int
    end_column: int
    used_constants: tuple[str, ...]
    proof_state: int


@dataclass(frozen=True)
class Elaboration:
    """What Lean reported on a piece of code, and the environment the server keeps after it."""

    messages: tuple[LeanMessage, ...]
    sorries: tuple[SorrySite, ...]
    tactics: tuple[TacticStep, ...]
    env: int
    #: Lean's account of the top-level commands it elaborated (None: not asked for)
    commands: tuple[ElaboratedCommand, ...] | None = None
    #: the infotree as the REPL sent it, when one was asked for (lines count from the code
    #: the REPL was sent: after the imports, which are elaborated apart)
    infotree: Any = None
