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

import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

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
    return CheckResult.from_messages(found)


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
    while lines and (not lines[-1].strip() or lines[-1].startswith("end")):
        lines.pop()
    text = "\n".join(lines) + "\n"
    for name, _ in inner:
        text = text.replace(f"\n\n#print axioms {name}\n", "", 1)
    return text.rstrip() + "\n"
