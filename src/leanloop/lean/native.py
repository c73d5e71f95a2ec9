"""Whether Lean code asks for native code: a proof whose check runs compiled code instead of the
kernel (``native_decide``, ``decide +native``, ``bv_decide``, or Lean's ``ofReduceBool`` family
named directly). Lean's axiom report shows such a proof (``leanloop.lean.axioms``); this reading
of the text is for where no report exists, such as a verdict recorded earlier."""

from __future__ import annotations

from collections.abc import Sequence

from leanloop.lean.lexer import Kind, Token, interpolation_holes, split_name, tokenize

#: Tactics whose proof rests on compiled code: ``native_decide``; ``bv_decide`` and
#: ``bv_decide?`` (the LRAT certificate is checked by ``Lean.ofReduceBool``), ``bv_check``
#: (checks a stored LRAT file the same way). ``bv_omega`` (``simp`` and ``omega``) and
#: ``bv_normalize`` do not.
NATIVE_TACTICS = frozenset({"native_decide", "bv_decide", "bv_decide?", "bv_check"})
#: Lean's axioms that trust compiled code, matched as the last part of any name
#: (``Lean.ofReduceBool``, ``_root_.Lean.ofReduceBool``, ``ofReduceBool`` under ``open Lean``).
NATIVE_AXIOM_PARTS = frozenset({"ofReduceBool", "ofReduceNat", "trustCompiler"})
#: What the kernel evaluates with compiled code (even ``rfl`` on them does), matched as
#: ``reduceBool`` / ``reduceNat`` alone or under ``Lean`` (``_root_`` taken off).
NATIVE_EVALUATORS = frozenset({"reduceBool", "reduceNat"})
_CODE = frozenset(Kind) - {Kind.COMMENT, Kind.DOC, Kind.MODDOC}
_MAX_NESTING = 8  # strings in the {...} of strings read into (the screen refuses deeper ones)


def native_code_use(text: str) -> str | None:
    """The first use of native code in the Lean code ``text`` (comments and plain strings
    aside; the ``{...}`` of strings count as code), as written, or None.

    It is any spelling of: a native tactic (``native_decide``, ``bv_decide``, ``bv_decide?``,
    ``bv_check``); ``decide`` with its ``native`` option (``decide +native``,
    ``decide (config := { native := true })``); a name whose last part is ``ofReduceBool``,
    ``ofReduceNat`` or ``trustCompiler`` (``Lean.ofReduceBool``, ``_root_.Lean.ofReduceNat``,
    ``Lean.«trustCompiler»``, a name literal); ``Lean.reduceBool`` or ``Lean.reduceNat``.
    """
    return _native_in(text, nesting=0)


def _native_in(text: str, nesting: int) -> str | None:
    tokens = [t for t in tokenize(text) if t.kind in _CODE]
    for index, token in enumerate(tokens):
        found = _native_at(tokens, index)
        if found is not None:
            return found
        if token.kind is Kind.STRING and "{" in token.text and nesting < _MAX_NESTING:
            for hole in interpolation_holes(token.text):
                found = _native_in(hole, nesting + 1)
                if found is not None:
                    return found
    return None


def _parts(name: str) -> list[str]:
    parts = [p[1:-1] if p.startswith("«") and p.endswith("»") else p for p in split_name(name)]
    while parts and parts[0] == "_root_":
        parts = parts[1:]
    return parts


def _native_at(tokens: Sequence[Token], index: int) -> str | None:
    token = tokens[index]
    if token.kind not in (Kind.IDENT, Kind.NAME):
        return None
    parts = _parts(token.text.lstrip("`"))
    if not parts:
        return None
    if token.kind is Kind.IDENT and len(parts) == 1 and parts[0] in NATIVE_TACTICS:
        return token.text
    if parts[-1] in NATIVE_AXIOM_PARTS:
        return token.text
    if parts[-1] in NATIVE_EVALUATORS and parts[:-1] in ([], ["Lean"]):
        return token.text
    if parts == ["native"] and token.kind is Kind.IDENT:  # decide's option, however set
        following = [t.text for t in tokens[index + 1 : index + 3]]
        if index and tokens[index - 1].text == "+":
            return "decide +native"
        if following[:1] == [":="] and following[1:] != ["false"]:
            return "native := " + (following[1] if len(following) > 1 else "")
    return None
