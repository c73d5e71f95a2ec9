"""One file as Lean elaborated it (its source, Lean's messages, tactic steps and sorries), and the
JSON form in which it is cached."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from functools import cached_property

from leanloop.lean.elaboration import SorrySite, TacticStep
from leanloop.lean.scanner import SourceScan, scan
from leanloop.lean.server import LeanMessage

#: Changes whenever what is cached for a file changes.
TRACE_FORMAT = 1


@dataclass(frozen=True)
class FileTrace:
    """One file as Lean elaborated it: its source, Lean's messages, tactic steps and sorries."""

    path: str  # relative to the project root
    source: str = field(repr=False)
    messages: tuple[LeanMessage, ...]
    tactics: tuple[TacticStep, ...]
    sorries: tuple[SorrySite, ...]

    @cached_property
    def scan(self) -> SourceScan:
        return scan(self.source)

    @property
    def errors(self) -> list[LeanMessage]:
        return [m for m in self.messages if m.severity == "error"]

    def to_json(self) -> dict:
        return {
            "format": TRACE_FORMAT,
            "path": self.path,
            "messages": [dataclasses.asdict(m) for m in self.messages],
            "tactics": [dataclasses.asdict(t) for t in self.tactics],
            "sorries": [[s.proof_state, s.goal, s.line, s.column] for s in self.sorries],
        }

    @classmethod
    def from_json(cls, data: dict, source: str) -> FileTrace:
        return cls(
            path=data["path"],
            source=source,
            messages=tuple(LeanMessage(**m) for m in data["messages"]),
            tactics=tuple(
                TacticStep(**{**t, "used_constants": tuple(t["used_constants"])})
                for t in data["tactics"]
            ),
            sorries=tuple(
                SorrySite(proof_state=state, goal=goal, line=line, column=column)
                for state, goal, line, column in data["sorries"]
            ),
        )
