"""A model's whole proof of a benchmark statement, as the text that follows the statement: either
the model continued the statement (the candidate is that continuation), or it restated the
theorem in a file of its own, whose statement must then be the benchmark's, token by token
(whitespace, line breaks and comments do not matter), and whose proof is the raw text after it.
The code Lean checks is the benchmark's prefix, its statement and this text, so that a verdict
recorded on a file a model wrote applies to the code leanloop checks."""

from __future__ import annotations

from dataclasses import dataclass

from leanloop.lean.lexer import Kind, Token, tokenize
from leanloop.lean.scanner import THEOREM_KINDS, scan
from leanloop.lean.screen import Refusal, RefusalCode, forbidden_in, forbidden_in_proof

_CODE = frozenset(Kind) - {Kind.COMMENT, Kind.DOC, Kind.MODDOC}


@dataclass(frozen=True)
class Continuation:
    """The text that follows the benchmark's statement in the checked code, or why the candidate
    is refused (``refusal.code`` is ``changed_statement`` when it restated another statement)."""

    proof: str | None
    refusal: Refusal | None = None
    restated: bool = False  # the candidate was a file restating the theorem


def _code_tokens(text: str) -> list[Token]:
    return [t for t in tokenize(text) if t.kind in _CODE]


def continuation(candidate: str, formal_statement: str, name: str) -> Continuation:
    """The proof text of ``candidate`` for the theorem ``name`` stated by ``formal_statement``
    (which ends with ``:= by`` or ``:=``), screened: refused for a declared axiom, a metaprogram,
    ``sorry``, ... anywhere in the candidate, for a command in its proof, or, when it restates
    the theorem, for another statement (or no theorem ``name``)."""
    refusal = forbidden_in(candidate)
    if refusal is not None:
        return Continuation(None, refusal)
    if not _code_tokens(candidate):
        return Continuation(None, Refusal(RefusalCode.EMPTY, "the candidate is empty"))
    restated = [d for d in scan(candidate).declarations if d.kind in THEOREM_KINDS]
    if not restated:
        proof, is_file = candidate, False
    else:
        chosen = [d for d in restated if d.full_name == name or d.name == name]
        if not chosen:
            stated = ", ".join(f"{d.kind} {d.full_name or ''}".rstrip() for d in restated[:3])
            return Continuation(
                None,
                Refusal(
                    RefusalCode.CHANGED_STATEMENT,
                    f"the candidate restates no theorem {name} (it states {stated})",
                ),
                True,
            )
        declaration = chosen[-1]
        end = _statement_end(candidate, declaration.start.offset, formal_statement)
        if isinstance(end, Refusal):
            return Continuation(None, end, True)
        proof, is_file = candidate[end:], True
        trailing = formal_statement[len(formal_statement.rstrip()) :]
        if trailing and proof.startswith(trailing):
            proof = proof[len(trailing) :]
    refusal = forbidden_in_proof(proof)
    if refusal is not None:
        return Continuation(None, refusal, is_file)
    return Continuation(proof, None, is_file)


def _statement_end(candidate: str, start: int, formal_statement: str) -> int | Refusal:
    """The offset in ``candidate`` after its restatement (from ``start``) of
    ``formal_statement``, token by token; a refusal at the first token that differs."""
    wanted = _code_tokens(formal_statement)
    given = [t for t in _code_tokens(candidate) if t.start >= start]
    for index, token in enumerate(wanted):
        other = given[index] if index < len(given) else None
        if other is None or other.text != token.text:
            shown = other.text if other is not None else "the end of the candidate"
            line = other.line if other is not None else None
            where = f"line {line}: " if line is not None else ""
            return Refusal(
                RefusalCode.CHANGED_STATEMENT,
                f"{where}the candidate changes the statement: {shown!r} where the benchmark "
                f"states {token.text!r}",
                line,
            )
    if not wanted:
        return start
    return given[len(wanted) - 1].end
