"""Lean's own account of what it elaborated: the top-level commands of a piece of code, each with
its syntax kind, the elaborator Lean ran on it and where it is — read from the REPL's infotree
(``commands_from_infotree``) or from any backend that reports command boundaries.

The account is what decides whether a check can count (``lean.audit.judge``): the code leanloop
sends holds trusted text (a file's prefix, a benchmark's header and statement), one declaration
whose proof is untrusted model output, and leanloop's own audit commands. Whatever a Python
reading of Lean's syntax misses — a string that is not one, a comment Lean does not see — Lean's
parser decides where commands start, and the account lists them: a command that starts inside
the declaration's text, an audit command Lean did not elaborate with its own ``#print axioms``
elaborator (a ``macro_rules`` or ``elab_rules`` on it), or an audit command that is missing is
seen here, whatever the screen read."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: Syntax kinds and Lean's own elaborators of the commands leanloop writes itself.
DECLARATION = ("Lean.Parser.Command.declaration", "Lean.Elab.Command.elabDeclaration")
PRINT_AXIOMS = ("Lean.Parser.Command.printAxioms", "Lean.Elab.Command.elabPrintAxioms")
END = ("Lean.Parser.Command.end", "Lean.Elab.Command.elabEnd")
SET_OPTION = ("Lean.Parser.Command.set_option", "Lean.Elab.Command.elabSetOption")
END_OF_INPUT = ("Lean.Parser.Command.eoi", "Lean.Elab.Command.elabEoi")

_COMMAND_INFO = "CommandInfo"


@dataclass(frozen=True)
class ElaboratedCommand:
    """One top-level command Lean elaborated: its syntax kind and elaborator (None where the
    backend reports only boundaries), where it starts and ends (1-based lines, 0-based columns
    in characters, in the code as sent), and the commands it expanded to (a macro such as
    ``set_option ... in``, or ``lemma``)."""

    kind: str | None
    elaborator: str | None
    line: int
    column: int
    end_line: int
    end_column: int
    nested: tuple[ElaboratedCommand, ...] = ()

    @property
    def label(self) -> str:
        """How a reason names the command: its syntax kind's last part and where it is."""
        kind = (self.kind or "command").rsplit(".", 1)[-1]
        return f"{kind!r} at line {self.line}"

    def is_(self, expected: tuple[str | None, str | None]) -> bool:
        """Whether this is the command of ``expected`` (syntax kind, elaborator), elaborated by
        that elaborator; a backend that reports no kinds matches any."""
        if self.kind is None:
            return True
        return (self.kind, self.elaborator) == expected

    def moved(self, lines: int) -> ElaboratedCommand:
        """The same command with ``lines`` added to its lines (and its nested commands')."""
        return ElaboratedCommand(
            self.kind,
            self.elaborator,
            self.line + lines,
            self.column,
            self.end_line + lines,
            self.end_column,
            tuple(c.moved(lines) for c in self.nested),
        )

    def walk(self) -> Iterator[ElaboratedCommand]:
        """This command and every command it expanded to."""
        yield self
        for inner in self.nested:
            yield from inner.walk()


def commands_from_infotree(infotree: Any, line_offset: int = 0) -> tuple[ElaboratedCommand, ...]:
    """The top-level commands in a Lean REPL ``infotree`` answer (requested with
    ``"infotree": "full"``): each top-level tree is a ``CommandInfo`` node. Lines are shifted by
    ``line_offset`` (the header lines the REPL was not sent). ``ValueError`` when the answer has
    another shape — a tree that is not a command is not something leanloop can place."""
    if not isinstance(infotree, list):
        raise ValueError("the infotree is not a list of trees")
    commands = []
    for index, tree in enumerate(infotree):
        if not isinstance(tree, Mapping) or tree.get("kind") != _COMMAND_INFO:
            kind = tree.get("kind") if isinstance(tree, Mapping) else type(tree).__name__
            raise ValueError(f"infotree[{index}] is a {kind}, not a command")
        commands.append(_command(tree, line_offset, f"infotree[{index}]"))
    return tuple(commands)


def commands_from_boundaries(
    boundaries: Sequence[tuple[int, int]], code: str, line_offset: int = 0
) -> tuple[ElaboratedCommand, ...]:
    """The top-level commands of ``code`` from the byte ranges in which Lean's frontend
    elaborated them (Pantograph's compilation units: ``[begin, end)`` in UTF-8 bytes of the
    code sent, from where Lean's parser started the command to where it started the next, so
    that a command's trailing whitespace and comments are in its range). Kinds and elaborators
    are not known (None); each command ends at its range's last character that is not white
    space. A range with nothing but white space holds no command and is left out. Lines are
    shifted by ``line_offset``; ``ValueError`` when a range does not lie in the code or splits a
    character."""
    data = code.encode("utf-8")
    lines = Offsets(code)
    commands = []
    for index, boundary in enumerate(boundaries):
        begin, end = boundary
        if not 0 <= begin <= end <= len(data):
            raise ValueError(f"unit {index}'s range {boundary} is not in the code")
        try:
            start = len(data[:begin].decode("utf-8"))
            text = data[begin:end].decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError(f"unit {index}'s range {boundary} splits a character") from None
        if not text.strip():
            continue
        finish = start + len(text.rstrip())
        line, end_line = lines.line(start), lines.line(finish)
        commands.append(
            ElaboratedCommand(
                None,
                None,
                line + line_offset,
                start - lines.starts[line - 1],
                end_line + line_offset,
                finish - lines.starts[end_line - 1],
            )
        )
    return tuple(commands)


def _command(tree: Mapping[str, Any], line_offset: int, where: str) -> ElaboratedCommand:
    node: Any = tree.get("node")
    try:
        syntax = node["stx"]
        start, finish = syntax["range"]["start"], syntax["range"]["finish"]
        kind, elaborator = str(syntax["kind"]), node.get("elaborator")
        line, column = int(start["line"]), int(start["column"])
        end_line, end_column = int(finish["line"]), int(finish["column"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{where} is a command without its syntax or range ({exc})") from None
    nested = tuple(
        _command(inner, line_offset, f"{where} > command")
        for inner in _nested_commands(tree.get("children") or ())
    )
    return ElaboratedCommand(
        kind,
        str(elaborator) if elaborator is not None else None,
        line + line_offset,
        column,
        end_line + line_offset,
        end_column,
        nested,
    )


def _nested_commands(children: Sequence[Any]) -> Iterator[Mapping[str, Any]]:
    """The outermost ``CommandInfo`` nodes below ``children`` (through macro expansions)."""
    for child in children:
        if not isinstance(child, Mapping):
            continue
        if child.get("kind") == _COMMAND_INFO:
            yield child
        else:
            yield from _nested_commands(child.get("children") or ())


class Offsets:
    """Turns Lean's positions (1-based line, 0-based column in characters) into offsets of
    ``code`` (a column past the end of its line counts as the line's end)."""

    def __init__(self, code: str) -> None:
        self.code = code
        self.starts = [0]
        for index, char in enumerate(code):
            if char == "\n":
                self.starts.append(index + 1)

    def offset(self, line: int, column: int) -> int:
        if line < 1:
            return 0
        if line > len(self.starts):
            return len(self.code)
        start = self.starts[line - 1]
        end = self.starts[line] - 1 if line < len(self.starts) else len(self.code)
        return min(start + max(column, 0), end)

    def line(self, offset: int) -> int:
        """The 1-based line holding ``offset``."""
        low, high = 0, len(self.starts) - 1
        while low < high:
            middle = (low + high + 1) // 2
            if self.starts[middle] <= offset:
                low = middle
            else:
                high = middle - 1
        return low + 1


@dataclass(frozen=True)
class ExpectedCommand:
    """A command leanloop put in the code itself, at ``offset``, and which it must be."""

    offset: int
    expected: tuple[str | None, str | None]


@dataclass(frozen=True)
class Placed:
    """A command of the account and the offsets it spans in the code."""

    command: ElaboratedCommand
    start: int
    end: int


def place(commands: Sequence[ElaboratedCommand], code: str) -> list[Placed]:
    """Each command of ``commands`` with its start and end offsets in ``code``."""
    offsets = Offsets(code)
    return [
        Placed(c, offsets.offset(c.line, c.column), offsets.offset(c.end_line, c.end_column))
        for c in commands
    ]


def declaration_problem(
    placed: Sequence[Placed], start: int, end: int
) -> tuple[Placed | None, str]:
    """The declaration under judgement — the one command that holds offset ``start`` (its doc
    comment or attributes, trusted text, may start it earlier) or else starts in ``[start,
    end)`` — or why there is not exactly one command in ``[start, end)`` (a command the code's
    text does not show, or none)."""
    covering = [p for p in placed if p.start < start < p.end]
    inside = [p for p in placed if start <= p.start < end]
    if covering:
        first, others = covering[-1], inside
    elif inside:
        first, *others = inside
    else:
        return None, "Lean elaborated no declaration where leanloop put it"
    if others:
        extra = others[0].command
        more = f" and {len(others) - 1} more" if len(others) > 1 else ""
        return None, f"Lean elaborated a command inside the declaration's text: {extra.label}{more}"
    declarations = [c for c in first.command.walk() if c.kind == DECLARATION[0]]
    if first.command.kind is not None:
        if len(declarations) != 1:
            return None, f"the declaration was elaborated as {first.command.label}"
        if not declarations[0].is_(DECLARATION):
            return None, (
                f"the declaration was elaborated by {declarations[0].elaborator}, not by Lean's "
                "own elaborator"
            )
    return first, ""


def sequence_problem(
    placed: Sequence[Placed], start: int, end: int, expected: Sequence[ExpectedCommand]
) -> str:
    """Why the commands starting in ``[start, end)`` are not exactly ``expected`` (each at its
    offset, elaborated by Lean's own elaborator of its kind), '' when they are. A final
    end-of-input command is allowed after them."""
    found = [p for p in placed if start <= p.start < end]
    if found and found[-1].command.kind == END_OF_INPUT[0]:
        found = found[:-1]
    for index, want in enumerate(expected):
        if index >= len(found):
            kind = (want.expected[0] or "command").rsplit(".", 1)[-1]
            return f"Lean did not elaborate the {kind!r} command expected at this place (hidden)"
        got = found[index]
        if got.start > want.offset:  # the command expected first is missing
            kind = (want.expected[0] or "command").rsplit(".", 1)[-1]
            return f"Lean did not elaborate the {kind!r} command expected at this place (hidden)"
        if got.start < want.offset:
            return f"Lean elaborated {got.command.label} where no command was expected"
        if not got.command.is_(want.expected):
            own = (want.expected[1] or "elaborator").rsplit(".", 1)[-1]
            return (
                f"{got.command.label} was elaborated by {got.command.elaborator}, not by "
                f"{own} (a macro or elaborator rewrote it)"
            )
    if len(found) > len(expected):
        return f"Lean elaborated {found[len(expected)].command.label}, which leanloop did not send"
    return ""
