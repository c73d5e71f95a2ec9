"""A stand-in Lean server for tests of what leanloop does with Lean's account of the commands it
elaborated, when model output hides commands from leanloop's screen.

It answers with leanloop's own objects (``CheckResult``, ``LeanMessage``, ``ElaboratedCommand``),
not Lean's output. Its reading of the code is the one Lean's parser gives the inputs these tests
use, which are built so that it is simple: a command starts at every line that begins, at
column 0, with a command keyword, whatever a string or comment before it might seem to hold
(Lean decides where strings end; the tests' hidden commands sit where Lean sees them), or at
any column with a keyword no tactic starts with (``macro_rules``, ``#eval``, ``theorem``...: in a
tactic block Lean ends the block there and reads a command). A
``macro_rules`` on ``#print axioms`` makes every later ``#print axioms`` elaborated by that
macro, which prints the forged report the attack wants (only ``propext``). Axiom reports of the
genuine ``#print axioms`` give ``axioms`` (default: ``propext``), or, for a proof by
``native_decide``, Lean's native axiom; a declaration holding ``sorry`` gets Lean's sorry warning.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from leanloop.lean.account import (
    DECLARATION,
    END,
    END_OF_INPUT,
    PRINT_AXIOMS,
    SET_OPTION,
    ElaboratedCommand,
)
from leanloop.lean.server import CheckResult, LeanMessage, LeanServer
from tests.audit_standin import axiom_report_text

KINDS: dict[str, tuple[str, str]] = {
    "theorem": DECLARATION,
    "lemma": DECLARATION,
    "example": DECLARATION,
    "def": DECLARATION,
    "end": END,
    "set_option": SET_OPTION,
    "open": ("Lean.Parser.Command.open", "Lean.Elab.Command.elabOpen"),
    "namespace": ("Lean.Parser.Command.namespace", "Lean.Elab.Command.elabNamespace"),
    "section": ("Lean.Parser.Command.section", "Lean.Elab.Command.elabSection"),
    "macro_rules": ("Lean.Parser.Command.macro_rules", "Lean.Elab.Command.elabMacroRules"),
    "#eval": ("Lean.Parser.Command.eval", "Lean.Elab.Command.elabEval"),
    "run_cmd": ("Lean.runCmd", "Lean.Elab.Command.elabRunCmd"),
    "#print": PRINT_AXIOMS,
}
#: Keywords that start a command only at column 0 here (``open ... in`` is also a tactic).
_COLUMN_0 = ("end", "set_option", "open")
_START = re.compile(
    r"^(?:("
    + "|".join(_COLUMN_0)
    + r")|[ \t]*("
    + "|".join(re.escape(k) for k in KINDS if k not in _COLUMN_0)
    + r"))(?=\s|$)"
)
#: The elaborator a ``macro_rules`` on ``#print axioms`` gives the commands it rewrites.
MACRO = "_aux_Attack___macroRules_Lean_Parser_Command_printAxioms_1"


def lean_reading(code: str, axioms: Iterable[str] = ("propext",)) -> CheckResult:
    """The answer for ``code`` as described in the module's text."""
    lines = code.split("\n")
    starts = [n for n, line in enumerate(lines) if _START.match(line)]
    commands: list[ElaboratedCommand] = []
    messages: list[LeanMessage] = []
    rewritten = False
    for index, first in enumerate(starts):
        stop = starts[index + 1] if index + 1 < len(starts) else len(lines)
        last = max((n for n in range(first, stop) if lines[n].strip()), default=first)
        text = "\n".join(lines[first : last + 1])
        match = _START.match(lines[first])
        assert match is not None
        word = match[1] or match[2]
        column = len(lines[first]) - len(lines[first].lstrip())
        kind, elaborator = KINDS[word]
        line = first + 1
        if word == "#print":
            name = text.split()[-1]
            if rewritten:
                elaborator = MACRO
                report = axiom_report_text(name, ["propext"])
            else:
                used = ["Lean.ofReduceBool"] if "native_decide" in code else list(axioms)
                report = axiom_report_text(name, used)
            messages.append(LeanMessage("info", report, line, column))
        if word == "macro_rules" and "#print axioms" in text:
            rewritten = True
        if kind == DECLARATION[0] and re.search(r"\bsorry\b", text):
            messages.append(LeanMessage("warning", "declaration uses 'sorry'", line, column))
        commands.append(
            ElaboratedCommand(kind, elaborator, line, column, last + 1, len(lines[last]))
        )
    end = code.rstrip("\n")
    row, column = end.count("\n") + 1, len(end.rsplit("\n", 1)[-1])
    commands.append(ElaboratedCommand(*END_OF_INPUT, row, column, row, column))
    return CheckResult.from_messages(messages, commands=commands)


class ReadingLean(LeanServer):
    """A ``LeanServer`` whose checks answer with ``lean_reading`` (and which runs no tactic)."""

    def __init__(self, axioms: Iterable[str] = ("propext",)) -> None:
        super().__init__()
        self.axioms = list(axioms)
        self.checked: list[str] = []

    def check(self, code: str) -> CheckResult:
        self.checked.append(code)
        return lean_reading(code, self.axioms)

    def close(self) -> None:
        pass

    generation = 0
    start_proof = start_theorem = open_sorries = run_tactic = None  # type: ignore
