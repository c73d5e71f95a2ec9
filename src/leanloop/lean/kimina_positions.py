"""Where a Kimina Lean Server's positions point: the line numbers of its answers, read in the
convention of the server that gave them and moved to lines of the code leanloop sent.

A Kimina Lean Server elaborates a code's leading ``import`` lines once per REPL and sends the rest
(the body) to the REPL on its own, so Lean counts lines from the body's first line. Whether the
server adds the cut lines back depends on its version (``project-numina/kimina-lean-server``):

- ``AFTER_IMPORTS``: 1.0.x from 24 April to 13 June 2025. The code is stripped and its leading
  lines starting with ``import`` are cut; a blank line after them is still counted (code without
  an import line is checked whole, nothing cut).
- ``AFTER_HEADER``: 2.0.0 from its rewrite of 24 July 2025 until 24 October 2025 (commit
  e2cdc1f), and ``kimina-ast-server`` 2.1.3 on PyPI. Every leading line that is blank or starts
  with ``import`` is cut (a comment ends the cut). 1.0.x from 14 June 2025 also cut the blank
  lines after the imports; it differs only where the imports are separated by blank lines (it
  could not check those) or where there is no import (it checked the code whole).
- ``WHOLE``: 2.0.0 since commit e2cdc1f (24 October 2025). The cut lines are added back to each
  message's and sorry's ``pos``/``endPos`` line, so lines count from the code's first line; also
  leanloop's own ``/verify``.

Columns are never moved. No endpoint tells these apart: ``/health`` answers ``{"status": "ok"}``
and the OpenAPI version is 2.0.0 both before and after the change. So each answer is read by its
own evidence (``read_positions``): a position past the code's end is impossible; a message that
names something (an unused variable, a deprecated constant, a tactic that does nothing, the
declaration that uses ``sorry``, the constant of an axiom report at its ``#print axioms``) and a
sorry must point at it. Where nothing decides, the convention the same server showed before is
taken (``ServerConvention``), else ``WHOLE``: the convention of the current server and of
leanloop's. One quirk of the current server: an answer with sorries but no message gets its
sorries unmoved; the evidence reads such an answer on its own, and it teaches nothing about the
server."""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from leanloop.lean.elaboration import CheckResult


class Convention(StrEnum):
    """Which lines of the code a Kimina Lean Server's answer counts from (see the module)."""

    WHOLE = "whole"
    AFTER_HEADER = "after_header"
    AFTER_IMPORTS = "after_imports"


#: The order conventions are preferred in when the evidence ties: the current server's first.
PREFERENCE = (Convention.WHOLE, Convention.AFTER_HEADER, Convention.AFTER_IMPORTS)

#: How a reading was decided: ``same`` (every convention counts the same lines of this code),
#: ``evidence`` (messages or sorries that point at what they name), ``bounds`` (only one convention
#: keeps every position inside the code), ``default`` (nothing decided: the server's known or the
#: default convention), ``inconsistent`` (no convention fits every position: the default).
Basis = Literal["same", "evidence", "bounds", "default", "inconsistent"]


def uncounted_lines(code: str, convention: Convention) -> int:
    """How many of ``code``'s first lines a server of ``convention`` does not count."""
    if convention is Convention.WHOLE:
        return 0
    if convention is Convention.AFTER_HEADER:
        lines = code.splitlines()
        cut = 0
        while cut < len(lines) and (
            not lines[cut].strip() or lines[cut].strip().startswith("import ")
        ):
            cut += 1
        return cut
    stripped = code.strip()
    imports = 0
    for line in stripped.splitlines():
        if not line.startswith("import"):
            break
        imports += 1
    if not imports:
        return 0  # checked whole
    lead = code[: len(code) - len(code.lstrip())]
    return lead.count("\n") + imports


@dataclass(frozen=True)
class PositionReading:
    """How one answer's positions are read: in ``convention``, so ``lines`` is added to each of
    its lines to give a line of the code sent; ``basis`` says what decided it, and ``learnable``
    whether the answer shows the server's convention (decided by messages, and no other
    convention counts the same lines of this code)."""

    convention: Convention
    lines: int
    basis: Basis
    learnable: bool = False


def infotree_lines(code: str, reading: PositionReading | None) -> int:
    """The lines to add to the lines of an ``infotree`` in a Kimina answer on ``code``: no
    version of the server moves the infotree's positions (the fix of October 2025 moves only
    messages and sorries), so they always count from the body the REPL was sent — after the
    imports (1.0.x before 14 June 2025) or after the imports and blank lines (since)."""
    older = reading is not None and reading.convention is Convention.AFTER_IMPORTS
    return uncounted_lines(code, Convention.AFTER_IMPORTS if older else Convention.AFTER_HEADER)


_UNUSED = re.compile(r"unused variable `(.+?)`")
_DEPRECATED = re.compile(r"`(.+?)` has been deprecated")
_DOES_NOTHING = re.compile(r"'(.+)' tactic does nothing", re.DOTALL)
_SORRY_WARNING = re.compile(r"declaration uses ['`]sorry['`]")
_AXIOM_REPORT = re.compile(r"'.+' (?:depends on axioms: |does not depend on any axioms)", re.DOTALL)
_DECLARED = re.compile(
    r"\b(?:theorem|lemma|def|abbrev|instance|opaque|structure|inductive|class)\s+$"
)


def _position(line: int | None, column: int | None) -> tuple[int, int] | None:
    """``(line, column)`` when both are known."""
    return (line, column) if line is not None and column is not None else None


class _Code:
    """The code sent, with its lines (as Lean counts them, 1-based) and spans of text."""

    def __init__(self, text: str) -> None:
        self.lines = text.split("\n")

    def holds(self, position: tuple[int, int]) -> bool:
        line, column = position
        return 1 <= line <= len(self.lines) and 0 <= column <= len(self.lines[line - 1])

    def span(self, start: tuple[int, int], end: tuple[int, int] | None) -> str:
        """The text from ``start`` to ``end`` (to the end of ``start``'s line without one)."""
        line, column = start
        if end is None or end < start:
            return self.lines[line - 1][column:]
        if end[0] == line:
            return self.lines[line - 1][column : end[1]]
        middle = self.lines[line : end[0] - 1]
        return "\n".join([self.lines[line - 1][column:], *middle, self.lines[end[0] - 1][: end[1]]])


def _names(text: str, start: tuple[int, int], end: tuple[int, int] | None, code: _Code) -> bool:
    """Whether a message ``text`` at ``start``–``end`` points at what it names in ``code``."""
    span = code.span(start, end).strip("«»")
    if match := _UNUSED.match(text):
        return span == match.group(1).strip("«»")
    if match := _DEPRECATED.match(text):
        name = match.group(1)
        last = name.rsplit(".", 1)[-1]
        return bool(span) and (span == name or name.endswith("." + span) or span.endswith(last))
    if match := _DOES_NOTHING.match(text):
        return " ".join(span.split()) == " ".join(match.group(1).split())
    if _SORRY_WARNING.match(text):
        before = code.lines[start[0] - 1][: start[1]]
        return span in ("example", "instance") or (
            bool(span) and _DECLARED.search(before) is not None
        )
    if _AXIOM_REPORT.match(text):
        return "#print axioms" in code.lines[start[0] - 1][start[1] :]
    return False


def _fits(result: CheckResult, code: _Code, lines: int) -> tuple[bool, int]:
    """Whether every position of ``result`` moved by ``lines`` lies in ``code``, and how many
    of its messages and sorries then point at what they name."""
    confirmed = 0
    items: list[tuple[tuple[int, int] | None, tuple[int, int] | None, str | None]] = [
        (_position(m.line, m.column), _position(m.end_line, m.end_column), m.text)
        for m in result.messages
    ]
    items += [(_position(s.line, s.column), None, None) for s in result.sorries]
    for start, end, text in items:
        start = (start[0] + lines, start[1]) if start and start[0] >= 1 else None
        end = (end[0] + lines, end[1]) if end and end[0] >= 1 else None
        if (start and not code.holds(start)) or (end and not code.holds(end)):
            return False, 0
        if start is None:
            continue
        if text is None:  # a sorry
            confirmed += code.span(start, None).startswith("sorry")
        else:
            confirmed += _names(text, start, end, code)
    return True, confirmed


def read_positions(
    code: str, response: CheckResult, default: Convention = Convention.WHOLE
) -> PositionReading:
    """How the positions of Kimina's answer ``response`` on ``code`` (read by
    ``leanloop.lean.verification.check_result_of``, its lines as the server gave them) are to
    be read (see the module): each convention's reading is tried, and the one whose positions
    all lie in the code and point at what the most messages name wins; ``default`` where that
    decides nothing."""
    counted = {convention: uncounted_lines(code, convention) for convention in PREFERENCE}
    order = (default, *(c for c in PREFERENCE if c is not default))
    if len(set(counted.values())) == 1:
        return PositionReading(default, counted[default], "same")
    text = _Code(code)
    fits = {lines: _fits(response, text, lines) for lines in dict.fromkeys(counted.values())}
    possible = {lines: confirmed for lines, (ok, confirmed) in fits.items() if ok}

    def reading(lines: int, basis: Basis) -> PositionReading:
        conventions = [c for c in order if counted[c] == lines]
        learnable = (
            basis in ("evidence", "bounds") and len(conventions) == 1 and bool(response.messages)
        )
        return PositionReading(conventions[0], lines, basis, learnable)

    if not possible:
        return reading(counted[default], "inconsistent")
    best = max(possible.values())
    winners = [lines for lines, confirmed in possible.items() if confirmed == best]
    if best > 0 and len(winners) == 1:
        return reading(winners[0], "evidence")
    if len(possible) == 1:
        return reading(winners[0], "bounds")
    chosen = next(counted[c] for c in order if counted[c] in winners)
    return reading(chosen, "default")


class ServerConvention:
    """The convention of one server (or of one file of its recorded answers), learned from the
    answers that show it and used for those that do not: ``default`` until one shows it, then
    the convention most answers of the latest batch that showed one were read in. Thread-safe."""

    def __init__(self, default: Convention = Convention.WHOLE) -> None:
        self.default = default
        self.learned: Convention | None = None
        self._lock = threading.Lock()

    @property
    def convention(self) -> Convention:
        """The convention taken where an answer decides nothing."""
        return self.learned or self.default

    def read(
        self, answers: Sequence[tuple[str, CheckResult | None]]
    ) -> list[PositionReading | None]:
        """The reading of each ``(code, response)`` of one batch (None where there is no
        response); the batch's decided answers teach the convention its undecided ones take."""
        known = self.convention
        readings = [
            read_positions(code, response, known) if response is not None else None
            for code, response in answers
        ]
        shown = Counter(r.convention for r in readings if r is not None and r.learnable)
        with self._lock:
            if shown:
                self.learned = shown.most_common(1)[0][0]
            now = self.convention
        if now is known:
            return readings
        return [
            _again(code, response, reading, now)
            for (code, response), reading in zip(answers, readings, strict=True)
        ]


def _again(
    code: str,
    response: CheckResult | None,
    reading: PositionReading | None,
    convention: Convention,
) -> PositionReading | None:
    """``reading`` again with ``convention`` as the default, where the default had decided it."""
    if reading is None or response is None or reading.basis in ("evidence", "bounds"):
        return reading
    return read_positions(code, response, convention)
