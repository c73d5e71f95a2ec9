"""Where a sorry fill's span ends by Lean's own account of the file before the fill, and which
commands of the file after the declaration must read the same once the proof is in.

The scanner (``lean.scanner``) reads where a proof ends from the text; Lean's account of the
original file (the commands it elaborated, ``lean.account``) says where the declaration really
ends. A declaration whose proof runs to its end (no ``where`` or ``termination_by`` after it)
has its span end there, whatever the scanner read; one with such clauses keeps the scanner's end
of the proof only when the scanner and Lean agree on where the declaration ends. The commands
Lean elaborated after the declaration are what the filled file must still hold, each at the same
distance from the declaration's end (``AuditedCode.around``'s ``rest``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from leanloop.lean.account import END_OF_INPUT, ElaboratedCommand, ExpectedCommand, Placed, place

_BOM = "\ufeff"


class LeanOffsets:
    """Offsets of a file's text and of the text Lean is shown (no byte order mark, LF line
    ends), both ways."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.text = source.removeprefix(_BOM).replace("\r\n", "\n")
        back = []
        index = 1 if source.startswith(_BOM) else 0
        while index < len(source):
            back.append(index)  # a CRLF is one '\n' for Lean: it starts at the '\r'
            index += 2 if source.startswith("\r\n", index) else 1
        back.append(len(source))
        self._back = back

    def to_lean(self, offset: int) -> int:
        """The offset in Lean's text of the source offset ``offset``."""
        return len(self.source[:offset].removeprefix(_BOM).replace("\r\n", "\n"))

    def to_source(self, offset: int) -> int:
        """The source offset of the offset ``offset`` in Lean's text."""
        return self._back[min(max(offset, 0), len(self._back) - 1)]


@dataclass(frozen=True)
class LeanSpan:
    """The span a fill replaces, in source offsets, and the commands after the declaration (their
    offsets from its end, in Lean's text)."""

    start: int
    end: int
    declaration_end: int
    rest: tuple[ExpectedCommand, ...]


def lean_span(
    source: str,
    commands: Sequence[ElaboratedCommand],
    first: int,
    span: tuple[int, int],
    declaration_end: int,
) -> LeanSpan | str:
    """The span of a fill by Lean's account ``commands`` of ``source`` (the file before the fill),
    for the declaration whose text starts at source offset ``first``, whose proof the scanner
    read as ``span`` and whose end as ``declaration_end``; or why Lean's account and the
    scanner disagree so that no span is safe."""
    offsets = LeanOffsets(source)
    placed = place(commands, offsets.text)
    start = offsets.to_lean(first)
    declaration = _declaration(placed, start)
    if declaration is None:
        return "Lean elaborated no declaration where leanloop read it"
    lean_end = offsets.to_source(declaration.end)
    proof_start, proof_end = span
    if not declaration.start <= offsets.to_lean(proof_start) < declaration.end:
        return "the proof leanloop read is outside the declaration Lean elaborated"
    if proof_end < declaration_end:  # 'where', 'termination_by' ... follow the proof
        if lean_end != declaration_end:
            line = offsets.text.count("\n", 0, declaration.end) + 1
            return f"Lean ends the declaration at line {line}, not where leanloop read it"
        end = proof_end
    else:
        end = lean_end
    rest = tuple(
        ExpectedCommand(p.start - declaration.end, (p.command.kind, p.command.elaborator))
        for p in placed
        if p.start >= declaration.end and p.command.kind != END_OF_INPUT[0]
    )
    return LeanSpan(proof_start, end, lean_end, rest)


def _declaration(placed: Sequence[Placed], start: int) -> Placed | None:
    """The command holding the declaration that starts at ``start`` (its doc comment or
    attributes may start it earlier)."""
    covering = [p for p in placed if p.start <= start < max(p.end, p.start + 1)]
    return covering[-1] if covering else None
