"""Stand-ins for the answers Lean gives to leanloop's audited checks, for tests of what leanloop
does with a verdict (no Lean toolchain can run here).

These build leanloop's own ``CheckResult`` / ``LeanMessage`` objects; they are not Lean's output.
Where a test needs the text of an axiom report it takes a real one from
``fixtures/axioms/axioms.jsonl`` (``real_axiom_report``) when the theorem's name has one there,
and otherwise formats one with ``axiom_report_text`` (the format is checked against Lean's real
output in ``test_lean_axioms``). A declaration that still holds ``sorry`` gets Lean's sorry
warning at its first line (``sorry_warnings``), as Lean reports it.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from leanloop.lean.account import (
    DECLARATION,
    END,
    END_OF_INPUT,
    PRINT_AXIOMS,
    SET_OPTION,
    ElaboratedCommand,
)
from leanloop.lean.keywords import (
    COMMAND_WORDS,
    DECLARATION_KEYWORDS,
    HASH_BOTH,
    HASH_COMMANDS,
    IN_COMMANDS,
    MODIFIERS,
)
from leanloop.lean.lexer import Kind, Token, tokenize
from leanloop.lean.scanner import scan
from leanloop.lean.server import CheckResult, LeanMessage

_PRINT = re.compile(r"^(?:set_option pp\.fullNames true in )?#print axioms (\S+)\s*$")


def axiom_rows(fixtures: Path) -> list[dict]:
    path = fixtures / "axioms" / "axioms.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def real_axiom_report(fixtures: Path, command: str) -> str:
    """The message Lean printed for ``command`` (e.g. ``#print axioms efsq``) in the fixtures."""
    for row in axiom_rows(fixtures):
        if row["command"] == command and row["kind"] != "repl_info_framing":
            return row["message"]
    raise KeyError(command)


def axiom_report_text(name: str, axioms: Iterable[str]) -> str:
    """An axiom report in the form Lean prints (one line; no wrapping)."""
    axioms = list(axioms)
    if not axioms:
        return f"'{name}' does not depend on any axioms"
    return f"'{name}' depends on axioms: [{', '.join(axioms)}]"


def audit_requests(code: str) -> list[tuple[str, int]]:
    """Each name ``#print axioms`` asks about in ``code``, and its line (1-based)."""
    found = []
    for number, line in enumerate(code.split("\n"), 1):
        match = _PRINT.match(line)
        if match:
            found.append((match.group(1), number))
    return found


def audit_request(code: str) -> tuple[str, int] | None:
    """The full name leanloop's final ``#print axioms`` asks about in ``code``, and its line."""
    requests = audit_requests(code)
    return requests[-1] if requests else None


def sorry_warnings(code: str) -> list[LeanMessage]:
    """The warning Lean gives each declaration of ``code`` that still uses ``sorry``."""
    return [
        LeanMessage(
            "warning", "declaration uses 'sorry'", declaration.start.line, declaration.start.column
        )
        for declaration in scan(code).declarations
        if declaration.has_sorry
    ]


def audited_answer(
    code: str,
    messages: Iterable[LeanMessage] = (),
    axioms: Mapping[str, Iterable[str]] | None = None,
    texts: Mapping[str, str] | None = None,
    default: Iterable[str] = ("propext",),
) -> CheckResult:
    """leanloop's ``CheckResult`` for ``code``: ``messages`` (located where the test says), the
    sorry warnings of the declarations that still use ``sorry``, and the answer to the code's
    ``#print axioms`` at its line: ``texts[name]`` (a real report) if given, else a report of
    ``axioms[name]`` (default ``default``)."""
    found = [*messages, *sorry_warnings(code)]
    request = audit_request(code)
    if request is not None:
        name, _ = request  # the full name: each print reports the declaration by it
        text = (texts or {}).get(name)
        if text is None:
            text = axiom_report_text(name, (axioms or {}).get(name, default))
        for _asked, line in audit_requests(code):
            found.append(LeanMessage("info", text, line, 0))
    return CheckResult.from_messages(found, commands=standin_account(code))


#: Words that start a declaration command at the start of a line (with its modifiers).
_DECLARATION_WORDS = frozenset(
    {
        "theorem", "lemma", "example", "def", "abbrev", "instance", "structure", "inductive",
        "class", "axiom", "opaque", "private", "protected", "noncomputable", "partial",
        "unsafe", "@[", "/--",
    }
)  # fmt: skip
_KINDS = {
    "end": END,
    "open": ("Lean.Parser.Command.open", "Lean.Elab.Command.elabOpen"),
    "namespace": ("Lean.Parser.Command.namespace", "Lean.Elab.Command.elabNamespace"),
    "section": ("Lean.Parser.Command.section", "Lean.Elab.Command.elabSection"),
    "variable": ("Lean.Parser.Command.variable", "Lean.Elab.Command.elabVariable"),
    "universe": ("Lean.Parser.Command.universe", "Lean.Elab.Command.elabUniverse"),
}
_IN = ("Lean.Parser.Command.in", "Lean.Elab.Command.expandInCmd")


def standin_account(code: str) -> tuple[ElaboratedCommand, ...]:
    """leanloop's own account object for honest ``code``, as Lean gives it where Lean ends each
    declaration where ``lean.scanner`` reads its end (the layouts these tests use; tests of
    hidden commands, and of Lean reading a declaration otherwise, build their account
    explicitly): each command with the syntax kind and elaborator of Lean's (``lean.account``'s
    names; the real names are checked against a recorded infotree in ``test_lean_account``), and
    the end of input. Other commands start at a line's first token that only a command starts
    with."""
    tokens = _joined([t for t in tokenize(code) if t.kind not in (Kind.COMMENT, Kind.MODDOC)])
    declarations = scan(code).declarations
    # where both readings fit, Lean's is the earlier end: what follows is the next command
    spans = [
        (
            (d.context_start or d.code_start).offset,
            d.proof_end.offset if d.proof_unclear and d.proof_end else d.end.offset,
        )
        for d in declarations
    ]
    unclear_ends = {b for (_, b), d in zip(spans, declarations, strict=True) if d.proof_unclear}
    starts = sorted(
        {
            i
            for i, t in enumerate(tokens)
            if (t.line_start or _command_word(t))
            and t.text != "import"
            and _starts_command(tokens, i)
            and not (i and tokens[i - 1].text == "in")  # 'set_option ... in' goes on to it
            and not (i and _declaration_goes_on(tokens[i - 1], t))
            and not any(a < t.start < b for a, b in spans)
        }
        | {i for i, t in enumerate(tokens) if any(t.start == a for a, _ in spans)}
        | {
            i
            for i, t in enumerate(tokens)
            if i and tokens[i - 1].end in unclear_ends and t.start >= tokens[i - 1].end
        }
    )
    commands = []
    for n, i in enumerate(starts):
        stop = starts[n + 1] if n + 1 < len(starts) else len(tokens)
        ends = [b for a, b in spans if a == tokens[i].start]
        if ends:
            stop = max(j for j in range(i, stop) if tokens[j].start < ends[0]) + 1
        last = tokens[stop - 1]
        end_line = last.line + last.text.count("\n")
        end_column = len(last.text.rsplit("\n", 1)[-1]) + (
            last.column if "\n" not in last.text else 0
        )
        commands.append(_standin_command(tokens[i:stop], end_line, end_column))
    end = code.rstrip("\n")
    lines = end.count("\n") + 1
    column = len(end.rsplit("\n", 1)[-1])
    commands.append(ElaboratedCommand(*END_OF_INPUT, lines, column, lines, column))
    return tuple(commands)


def _joined(tokens: list[Token]) -> list[Token]:
    """``#`` and the word right after it as one token (``#print``)."""
    out: list[Token] = []
    for token in tokens:
        if out and out[-1].text == "#" and out[-1].end == token.start:
            hash_ = out.pop()
            token = dataclasses.replace(
                token,
                text="#" + token.text,
                start=hash_.start,
                column=hash_.column,
                line_start=hash_.line_start,
            )
        out.append(token)
    return out


def _declaration_goes_on(before: Token, token: Token) -> bool:
    """``token`` goes on with the declaration its line started (``@[simp] lemma``,
    ``private theorem``)."""
    return before.line == token.line and (before.text in MODIFIERS or before.text == "]")


def _command_word(token: Token) -> bool:
    """A word only a command starts with (Lean starts a command there, wherever it is)."""
    text = token.text
    return text in COMMAND_WORDS - IN_COMMANDS or (
        text.startswith("#") and text[1:] in HASH_COMMANDS - HASH_BOTH
    )


def _starts_command(tokens, i: int) -> bool:
    """A command starts here: at any column, a word no tactic or term starts with (Lean ends a
    tactic block there); at column 0 also a modifier, an attribute, a doc comment, ``open`` or
    ``set_option`` and any ``#`` command."""
    token = tokens[i]
    text = token.text
    if _command_word(token):
        return True
    if text == "@[" or text in MODIFIERS - {"local", "scoped"} or token.kind is Kind.DOC:
        return True  # an attribute, a modifier, a doc comment: a declaration starts
    if token.column != 0:
        return False
    if token.kind is Kind.DOC or text.startswith("#"):
        return True
    return text in _DECLARATION_WORDS or text in _KINDS or text in IN_COMMANDS


def _standin_command(tokens, end_line: int, end_column: int) -> ElaboratedCommand:
    first = tokens[0]
    where = (first.line, first.column, end_line, end_column)
    words = [t.text for t in tokens]
    if first.text == "#print" and words[1:2] == ["axioms"]:
        return ElaboratedCommand(*PRINT_AXIOMS, *where)
    if first.text == "set_option" and "in" in words:
        rest = tokens[words.index("in") + 1 :]
        inner = _standin_command(rest, end_line, end_column) if rest else None
        option = ElaboratedCommand(*SET_OPTION, *where)
        nested = (option, inner) if inner is not None else (option,)
        return ElaboratedCommand(*_IN, *where, nested=nested)
    if first.text == "set_option":
        return ElaboratedCommand(*SET_OPTION, *where)
    if first.text.startswith("#") or first.text in COMMAND_WORDS - DECLARATION_KEYWORDS:
        word = first.text.removeprefix("#")
        elaborator = f"Lean.Elab.Command.elab{word[:1].upper()}{word[1:]}"
        return ElaboratedCommand(f"Lean.Parser.Command.{word}", elaborator, *where)
    if first.text in _KINDS:
        return ElaboratedCommand(*_KINDS[first.text], *where)
    return ElaboratedCommand(*DECLARATION, *where)


def infotree_json(commands, line_offset: int = 0) -> list[dict]:
    """leanloop's account objects in the shape of the REPL's ``infotree`` JSON (each command a
    ``CommandInfo`` node with its syntax kind, elaborator and range; nothing below it), lines
    moved by ``line_offset``: for stand-in servers that speak a wire format. It is leanloop's
    stand-in, not Lean's output; ``test_lean_account`` checks the shape against a real
    recorded infotree."""

    def node(command) -> dict:
        return {
            "kind": "CommandInfo",
            "node": {
                "stx": {
                    "range": {
                        "synthetic": False,
                        "start": {"line": command.line + line_offset, "column": command.column},
                        "finish": {
                            "line": command.end_line + line_offset,
                            "column": command.end_column,
                        },
                    },
                    "pp": None,
                    "kind": command.kind,
                    "argKinds": [],
                },
                "elaborator": command.elaborator,
            },
            "children": [node(inner) for inner in command.nested],
        }

    return [node(command) for command in commands]


def without_audit(code: str) -> str:
    """``code`` without the lines leanloop adds to audit a declaration (the ``#print axioms``
    after it, and the scopes closed and the final ``#print axioms`` at the end), as the code
    checked was before them, with one final newline."""
    requests = audit_requests(code)
    if not requests:
        return code
    lines = code.split("\n")
    *inner, (_, last) = requests
    lines = lines[: last - 1]
    while lines and (
        not lines[-1].strip()
        or lines[-1].startswith("end")
        or lines[-1] == "set_option pp.fullNames true"
    ):
        lines.pop()
    text = "\n".join(lines) + "\n"
    for name, _ in inner:
        text = text.replace(f"\n\n#print axioms {name}", "", 1)
    return text.rstrip() + "\n"
