"""What Lean reports when it elaborates a piece of code, whatever the server: its messages, the
``sorry``s left in it, each tactic step (when asked for), its account of the commands it
elaborated (when asked for) — one ``CheckResult`` — and its verdict on the code as a whole,
read from them. Positions are Lean's: 1-based lines, 0-based columns (in characters), in the
code as given."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from leanloop.lean.account import ElaboratedCommand
from leanloop.lean.verdict import Outcome, verdict_of


@dataclass(frozen=True)
class LeanMessage:
    """A message Lean printed: severity, where (1-based line, 0-based column) and the text.

    Attributes:
        severity: ``error``, ``warning`` or ``info``.
        text: The message.
        line: The line it starts on, when Lean says.
        column: The column it starts at.
        end_line: The line it ends on.
        end_column: The column it ends at.
    """

    severity: str
    text: str
    line: int | None = None
    column: int | None = None
    end_line: int | None = None
    end_column: int | None = None

    @property
    def data(self) -> str:  # the field name Lean uses
        """The text, under the name Lean's messages give it."""
        return self.text

    def __str__(self) -> str:
        where = f"{self.line}:{self.column}: " if self.line is not None else ""
        return f"{where}{self.severity}: {self.text}"


@dataclass(frozen=True)
class SorrySite:
    """A ``sorry`` left in the code: the proof state standing for it (when the server gives one),
    its goal as Lean prints it, and where it is (None where the server does not say).

    Attributes:
        proof_state: The server's number for the proof state at the ``sorry``.
        goal: The goal, pretty-printed.
        line: The line of the ``sorry``.
        column: Its column.
    """

    proof_state: int | None
    goal: str
    line: int | None
    column: int | None


@dataclass(frozen=True)
class TacticStep:
    """A tactic found by elaborating code with every tactic asked for: its text, the goals
    before it, where it is and the constants it used."""

    tactic: str
    goals_before: str
    line: int
    column: int
    end_line: int
    end_column: int
    used_constants: tuple[str, ...]
    proof_state: int


@dataclass(frozen=True)
class CheckResult:
    """Lean's answer on a whole piece of code, and its verdict on the code as a whole.

    Attributes:
        messages: Everything Lean printed.
        sorries: The ``sorry``s left in the code, with the goal standing at each.
        commands: Lean's account of the top-level commands it elaborated (None: the server
            gave none, or none was asked for).
        tactics: Every tactic step, when they were asked for.
        env: The environment the server keeps after the code (the REPL's number), if any.
        infotree: The infotree as the server sent it, when one was asked for.
    """

    messages: tuple[LeanMessage, ...] = ()
    sorries: tuple[SorrySite, ...] = ()
    commands: tuple[ElaboratedCommand, ...] | None = None
    tactics: tuple[TacticStep, ...] = ()
    env: int | None = None
    infotree: Any = None

    @property
    def verdict(self) -> Outcome:
        """Lean's verdict on the code as a whole: ``accepted``, ``rejected`` (an error) or
        ``sorry`` (incomplete), read from the messages and the sorries."""
        return verdict_of(self.messages, sorries=len(self.sorries))

    @property
    def accepted(self) -> bool:
        """Whether Lean accepted the code as a whole (no error, no sorry anywhere in it)."""
        return self.verdict is Outcome.ACCEPTED

    @property
    def errors(self) -> list[LeanMessage]:
        """The messages of severity ``error``."""
        return [m for m in self.messages if m.severity == "error"]

    @property
    def sorry_goals(self) -> tuple[str, ...]:
        """The goal standing at each ``sorry``."""
        return tuple(s.goal for s in self.sorries)

    @property
    def sorry_lines(self) -> tuple[int | None, ...]:
        """The line of each ``sorry`` (None where the server gave none)."""
        return tuple(s.line for s in self.sorries)

    def moved(self, lines: int, command_lines: int | None = None) -> CheckResult:
        """The same answer with ``lines`` added to each line (1 or more) of its messages and
        sorries and ``command_lines`` (default ``lines``) to those of its account: for an
        answer whose server counted lines from elsewhere than the code's first line."""
        shift = lines if command_lines is None else command_lines
        if not lines and not shift:
            return self

        def line(value: int | None, by: int) -> int | None:
            return value + by if value is not None and value >= 1 else value

        messages = tuple(
            dataclasses.replace(m, line=line(m.line, lines), end_line=line(m.end_line, lines))
            for m in self.messages
        )
        sorries = tuple(dataclasses.replace(s, line=line(s.line, lines)) for s in self.sorries)
        commands = None
        if self.commands is not None:
            commands = tuple(c.moved(shift) for c in self.commands)
        return dataclasses.replace(self, messages=messages, sorries=sorries, commands=commands)

    @classmethod
    def from_messages(
        cls,
        messages: Sequence[LeanMessage],
        sorry_goals: Sequence[str] = (),
        sorry_lines: Sequence[int | None] = (),
        commands: Sequence[ElaboratedCommand] | None = None,
    ) -> CheckResult:
        """Lean's answer made of its messages and sorries.

        Args:
            messages: What Lean printed.
            sorry_goals: The goal at each ``sorry``.
            sorry_lines: The line of each ``sorry`` (empty: unknown).
            commands: Lean's account of the commands it elaborated, when the server gives it.

        Returns:
            The result, its verdict decided by the errors and the sorries.
        """
        lines = tuple(sorry_lines) or (None,) * len(sorry_goals)
        sorries = tuple(
            SorrySite(None, goal, line, None) for goal, line in zip(sorry_goals, lines, strict=True)
        )
        account = tuple(commands) if commands is not None else None
        return cls(tuple(messages), sorries, account)
