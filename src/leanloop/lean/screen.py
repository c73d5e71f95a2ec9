"""Screening of a whole-proof candidate before Lean sees it: what is refused outright (a declared
axiom, code that replaces what the compiler runs or skips the kernel, metaprograms, ``sorry``, a
changed statement) and the proof body to check.

The screen reads tokens (``leanloop.lean.lexer``) where Lean reads them, so words in comments
and strings do not count; the ``{...}`` of a string, which are code when Lean reads the string as
interpolated, count; and text Lean may read otherwise than the lexer (a string or comment never
closed, a token Lean's tokenizer fails in and reads on after, a string that ends elsewhere when
read as interpolated) is refused. It is a first line only: what counts is Lean's verdict and the
axiom audit (``leanloop.lean.axioms``). Native code (``native_decide``, ``decide +native``,
``bv_decide``) is not the screen's business: whether it is allowed is the audit's
``allow_native``.
"""

from __future__ import annotations

import itertools
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from leanloop.lean.axioms import name_parts
from leanloop.lean.lexer import Flaw, Kind, Token, hash_word, hole_spans, tokenize
from leanloop.lean.scanner import (
    DECLARATION_KEYWORDS,
    MODIFIERS,
    SCOPE_COMMANDS,
    Declaration,
    scan,
)
from leanloop.lean.scanner import (
    HASH_COMMANDS as SCANNER_HASH_COMMANDS,
)


class RefusalCode(StrEnum):
    """Why a candidate is refused, as a stable machine code."""

    EMPTY = "empty"  # nothing to check
    DECLARES_AXIOM = "declares_axiom"
    IMPLEMENTED_BY = "implemented_by"  # @[implemented_by f]: the compiler runs f instead
    EXTERN = "extern"  # @[extern "c"]: the compiler runs foreign code instead
    SKIPS_KERNEL_CHECK = "skips_kernel_check"
    METAPROGRAM = "metaprogram"
    SORRY = "sorry"
    CHANGED_STATEMENT = "changed_statement"
    NO_PROOF = "no_proof"  # the restated theorem has no ':= ...' proof to take
    UNTERMINATED = "unterminated"  # a string or comment left open hides the text after it
    UNREADABLE = "unreadable"  # text Lean may read otherwise than the screen
    COMMAND = "command"  # a command inside a proof would leave the proof's 'by' block


@dataclass(frozen=True)
class Refusal:
    """A candidate refused: its code, a one-line reason, and the line (1-based) it is about."""

    code: RefusalCode
    reason: str
    line: int | None = None


@dataclass(frozen=True)
class Screened:
    """The outcome of the screen: the proof body to check (the body of the theorem's ``by``
    block), or a refusal."""

    body: str | None
    refusal: Refusal | None = None

    @property
    def passed(self) -> bool:
        return self.refusal is None


_CHANGES_PARSING = (
    "changes how the text after it parses (a notation or macro can make what Lean checks "
    "differ from what the text shows)"
)
_RUNS_CODE = (
    "runs code while Lean elaborates, which can change the environment (add or replace "
    "declarations without the kernel's check)"
)
#: Commands (and the tactic and term forms of the same) refused as metaprograms, with why. Each
#: is a keyword, so the word cannot be an ordinary identifier. `#`-commands are in
#: ``HASH_COMMANDS``.
METAPROGRAM_WORDS: dict[str, str] = {
    **dict.fromkeys(
        (
            "syntax",
            "macro",
            "macro_rules",
            "declare_syntax_cat",
            "notation",
            "notation3",  # Mathlib
            "infix",
            "infixl",
            "infixr",
            "prefix",
            "postfix",
            "binder_predicate",
        ),
        _CHANGES_PARSING,
    ),
    **dict.fromkeys(
        (
            "elab",
            "elab_rules",
            "run_cmd",
            "run_elab",
            "run_meta",
            "run_tac",  # Mathlib: inside a proof
            "by_elab",  # Mathlib: inside a term
        ),
        _RUNS_CODE,
    ),
    **dict.fromkeys(
        ("initialize", "builtin_initialize"),
        "runs code when the module is loaded",
    ),
    **dict.fromkeys(
        ("simproc", "dsimproc", "simproc_decl", "dsimproc_decl"),
        "adds code that simp runs while it elaborates, which can change the environment",
    ),
}
#: `#`-commands refused, with why (others, like `#check` and `#reduce`, only show terms).
HASH_COMMANDS: dict[str, str] = {
    "eval": _RUNS_CODE,
    "eval!": _RUNS_CODE,
    "print": "prints any text as an info message, which could imitate Lean's axiom report",
    "exit": "makes Lean stop reading the rest of the input",
    "guard_msgs": "swallows the messages of the command it wraps, which the verdict reads",
    "guard": "runs the untrusted evaluator",
    "html": "evaluates a term to show it (ProofWidgets): runs code",
    "widget": "evaluates a term to show it (ProofWidgets): runs code",
}
#: Term forms refused as metaprograms: ``eval% e`` (Mathlib) evaluates code while the proof
#: elaborates; ``unsafe e`` (core) compiles ``e`` as implemented by unsafe code.
TERM_METAPROGRAMS: dict[str, str] = {
    "eval": "eval% evaluates code while the proof elaborates",
    "unsafe": "unsafe makes a term implemented by unchecked code",
}
#: Words that start a command: inside a proof (a tactic, or the body of a 'by' block) one would
#: end the proof and run as a command of the file (Lean's commands need no indentation).
#: ``open`` and ``set_option`` are tactics too when an ``in`` follows on their line.
COMMAND_WORDS = (
    DECLARATION_KEYWORDS
    | SCOPE_COMMANDS
    | (MODIFIERS - {"local", "scoped"})
    | frozenset(
        {
            "variable", "universe", "include", "omit", "mutual", "import", "export",
            "attribute", "deriving", "alias", "add_decl_doc", "assert_not_exists",
            "library_note", "proof_wanted", "suppress_compilation", "unseal", "seal",
        }
    )
)  # fmt: skip
#: Attributes that register code run by Lean's front end (elaborators, macros, parsers,
#: initialisers, simprocs), refused as metaprograms; so is every ``builtin_*`` attribute.
METAPROGRAM_ATTRIBUTES = frozenset(
    {
        "command_elab",
        "term_elab",
        "tactic",
        "macro",
        "init",
        "command_parser",
        "term_parser",
        "tactic_parser",
        "simproc",
        "norm_num",  # Mathlib: extensions norm_num and positivity run later
        "positivity",
    }
)
#: Identifiers that stand for Lean code skipping the kernel's check (as parts of a name:
#: ``set_option debug.skipKernelTC true``, ``debug.skipKernelTC.set``,
#: ``Environment.addDeclWithoutChecking``).
KERNEL_SKIPS = frozenset({"skipKernelTC", "addDeclWithoutChecking"})
SORRY_WORDS = frozenset({"sorry", "admit", "sorryAx"})
THEOREM_WORDS = frozenset({"theorem", "lemma", "example"})
#: Clauses after a declaration's proof; the proof taken out stops before them.
_BODY_CLAUSES = frozenset({"where", "termination_by", "decreasing_by", "deriving"})
_COMMENTS = (Kind.COMMENT, Kind.DOC, Kind.MODDOC)
_TERMS = (Kind.IDENT, Kind.NUMBER, Kind.STRING, Kind.CHAR, Kind.NAME)
_OPENING = frozenset({"(", "[", "{", "⟨", "⦃", "⟦", "‹", "@["})
_CLOSING = frozenset({")", "]", "}", "⟩", "⦄", "⟧", "›"})
# The order refusals are reported in when a candidate has several.
_PRIORITY = (
    RefusalCode.DECLARES_AXIOM,
    RefusalCode.SKIPS_KERNEL_CHECK,
    RefusalCode.IMPLEMENTED_BY,
    RefusalCode.EXTERN,
    RefusalCode.METAPROGRAM,
    RefusalCode.SORRY,
)


def screen_candidate(candidate: str, statement: str | None = None) -> Screened:
    """Screen ``candidate``, model output meant as a proof of the theorem ``statement`` (its
    statement as leanloop states it: everything before ``:=``; a trailing ``:= by`` is
    ignored).

    A candidate is either the body of the theorem's ``by`` block, returned unchanged, or Lean
    code that restates the theorem (possibly among other declarations and commands): then the
    restated statement must be ``statement`` (token by token, so whitespace, line breaks and
    comments do not matter, nor ``theorem`` versus ``lemma``; the name must be the same) and
    the body is its proof, dedented (a term proof ``:= t`` becomes ``exact t``). Without a
    readable ``statement`` the last theorem, lemma or example restated is taken.
    """
    refusal = forbidden_in(candidate)
    if refusal is not None:
        return Screened(None, refusal)
    tokens = [t for t in tokenize(candidate) if t.kind not in _COMMENTS]
    if not tokens:
        return _refused(RefusalCode.EMPTY, "the candidate is empty")
    return _screened(candidate, tokens, statement)


def forbidden_in(text: str) -> Refusal | None:
    """The refusal the words of ``text`` call for, wherever they stand (a tactic, a proof or
    whole code): declared axioms, kernel checks skipped, ``implemented_by``/``extern``,
    metaprograms, ``sorry`` (in code, and in the ``{...}`` of strings), or text Lean may read
    otherwise than this screen (a string or comment left unterminated, a token Lean's tokenizer
    fails in, a string read two ways); None when there is none."""
    return _first_refusal(text, proof=False, alternatives=True, nesting=0)


def forbidden_in_proof(text: str) -> Refusal | None:
    """``forbidden_in``, and for a proof (a tactic, or the body of a ``by`` block) also a
    command word at the proof's own bracket depth, which would end the proof and run as a
    command of the file (``end X``, ``variable``, ``open X`` without ``in``, ``#eval``, ...)."""
    return _first_refusal(text, proof=True, alternatives=True, nesting=0)


#: How deep the ``{...}`` of strings are read into (strings in holes in strings ...).
_MAX_NESTING = 8


def _first_refusal(text: str, proof: bool, alternatives: bool, nesting: int) -> Refusal | None:
    """The words refused first (they name what they do), then what the ``{...}`` of strings
    hold, a command in a proof, what a string read the other way exposes (``alternatives``),
    and last text that cannot be read safely."""
    every = tokenize(text)
    code = [t for t in every if t.kind not in _COMMENTS]
    refusal = _forbidden(code)
    for token in every if refusal is None else ():
        if token.kind is Kind.STRING and "{" in token.text and not token.text.startswith("r"):
            if nesting >= _MAX_NESTING:
                reason = f"line {token.line}: strings nest in {{...}} too deeply to be read"
                return Refusal(RefusalCode.UNREADABLE, reason, token.line)
            refusal = _forbidden_in_string(token, nesting + 1)
            if refusal is not None:
                break
    if refusal is None and proof:
        refusal = _command_in(code)
    two_ways = [t for t in every if t.flaw is Flaw.TWO_READINGS]
    if refusal is None and alternatives and two_ways:
        # the string read as interpolated, and the text after it read on from its end
        token = two_ways[0]
        other = _first_refusal("s!" + text[token.start :], proof, False, nesting)
        if other is not None and other.code not in _UNSAFE:
            refusal = _moved(other, token.line, "read as an interpolated string: ")
    return refusal or _unsafe(every, code)


_UNSAFE = (RefusalCode.UNREADABLE, RefusalCode.UNTERMINATED)
#: Keywords a string may follow with no space between (``panic!"x"``); strings after the syntaxes
#: that take an interpolated one are known too (``Token.interpolated``).
_TAKE_A_STRING = frozenset({"panic!", "assert!", "fail", "trace"})


def _unsafe(every: Sequence[Token], code: Sequence[Token]) -> Refusal | None:
    """The first token Lean may read otherwise than the lexer: a flawed one, or a string glued
    to a term (``X!"..."``, ``f"x"``: Lean applies a function only to what follows a space, so
    it takes no argument there; it stops with a parse error and reads on, or a library's
    syntax reads it). What a glued string holds is screened as code too, to name it."""
    for before, token in itertools.pairwise(code):
        glued = (
            token.kind is Kind.STRING
            and token.start == before.end
            and not token.interpolated
            and before.text not in _TAKE_A_STRING
            and (before.kind in _TERMS or before.text in _CLOSING)
        )
        if not glued:
            continue
        content = token.text[token.text.index('"') + 1 :]
        held = [t for t in tokenize(content) if t.kind not in _COMMENTS]
        named = _forbidden(held)
        where = f"in a string right after {before.text!r}, which Lean reads no argument from: "
        if named is not None:
            return _moved(named, token.line, where)
        return Refusal(
            RefusalCode.UNREADABLE,
            f"line {token.line}: a string right after {before.text!r} with no space between is "
            "no argument of it: Lean stops there with a parse error and reads on",
            token.line,
        )
    for token in every:
        if token.flaw is not None:
            code_ = (
                RefusalCode.UNTERMINATED
                if token.flaw is Flaw.UNTERMINATED
                else RefusalCode.UNREADABLE
            )
            reason = f"line {token.line}: a {token.kind.value} {token.flaw.value}"
            return Refusal(code_, reason, token.line)
    return None


def _forbidden_in_string(token: Token, nesting: int) -> Refusal | None:
    """What the ``{...}`` of a string hold: each hole read as code, and (words only) the text
    from the first hole on, which Lean reads as code after a hole it cannot parse."""
    spans = hole_spans(token.text)
    for start, end in spans:
        refusal = _first_refusal(token.text[start:end], False, False, nesting)
        # a hole Lean may not read is the string's own flaw when Lean reads it as interpolated
        if refusal is not None and (token.interpolated or refusal.code not in _UNSAFE):
            line = token.line + token.text.count("\n", 0, start)
            return _moved(refusal, line, "in the {...} of a string: ")
    if not spans:
        return None
    start = spans[0][0]
    rest = [t for t in tokenize(token.text[start:]) if t.kind not in _COMMENTS]
    refusal = _forbidden(rest)
    if refusal is None:
        return None
    return _moved(refusal, token.line + token.text.count("\n", 0, start), "in a string: ")


def _moved(refusal: Refusal, first_line: int, context: str) -> Refusal:
    """``refusal``, found in a text whose first line is line ``first_line`` here."""
    line = first_line + (refusal.line or 1) - 1
    said = (
        refusal.reason.split(": ", 1)[1] if refusal.reason.startswith("line ") else refusal.reason
    )
    return Refusal(refusal.code, f"line {line}: {context}{said}", line)


def _command_in(tokens: Sequence[Token]) -> Refusal | None:
    """A command word at the proof's own bracket depth (or a `#` command anywhere)."""
    depth = 0
    for index, token in enumerate(tokens):
        if token.kind is Kind.SYMBOL and token.text in _OPENING:
            depth += 1
            continue
        if token.kind is Kind.SYMBOL and token.text in _CLOSING:
            depth = max(0, depth - 1)
            continue
        word = None
        hashed = hash_word(tokens, index)
        if depth == 0 and token.kind is Kind.IDENT and token.text in COMMAND_WORDS:
            word = token.text
        elif depth == 0 and token.text in ("open", "set_option") and not _in_follows(tokens, index):
            word = f"{token.text} without 'in'"
        elif hashed in SCANNER_HASH_COMMANDS:
            word = f"#{hashed}"
        if word is not None:
            return Refusal(
                RefusalCode.COMMAND,
                f"line {token.line}: {word} is a command: in a proof it would end the proof "
                "and change the file",
                token.line,
            )
    return None


def _in_follows(tokens: Sequence[Token], index: int) -> bool:
    """Whether an ``in`` follows token ``index`` at its depth before the next line starts
    (the line after an ``in`` at the end of a line belongs to it)."""
    for token in tokens[index + 1 :]:
        if token.line_start and token.line > tokens[index].line:
            return False
        if token.text == "in":
            return True
    return False


def _screened(candidate: str, tokens: Sequence[Token], statement: str | None) -> Screened:
    refusal = _forbidden(tokens)
    if refusal is not None:
        return Screened(None, refusal)
    scanned = scan(candidate)
    if not scanned.declarations:
        return Screened(candidate)
    return _restated_proof(candidate, tokens, scanned.declarations, statement)


def _refused(code: RefusalCode, reason: str, line: int | None = None) -> Screened:
    where = f"line {line}: " if line is not None else ""
    return Screened(None, Refusal(code, f"{where}{reason}", line))


def _plain(text: str) -> str:
    return text.replace("«", "").replace("»", "")


# -- words refused wherever they stand ---------------------------------------------------------


def _forbidden(tokens: Sequence[Token]) -> Refusal | None:
    """The first refusal (in ``_PRIORITY`` order, then by position) the tokens call for."""
    found: dict[RefusalCode, Refusal] = {}

    def refuse(code: RefusalCode, token: Token, reason: str) -> None:
        if code not in found:
            found[code] = Refusal(code, f"line {token.line}: {reason}", token.line)

    for index, token in enumerate(tokens):
        following = tokens[index + 1] if index + 1 < len(tokens) else None
        if token.kind is Kind.IDENT:
            text = token.text
            if text == "axiom":
                named = following.text if following is not None else "?"
                refuse(RefusalCode.DECLARES_AXIOM, token, f"declares axiom {named}")
            elif text in TERM_METAPROGRAMS and (
                text != "eval" or (following is not None and following.text == "%")
            ):
                refuse(RefusalCode.METAPROGRAM, token, TERM_METAPROGRAMS[text])
            elif KERNEL_SKIPS & set(_plain(text).split(".")):
                refuse(
                    RefusalCode.SKIPS_KERNEL_CHECK,
                    token,
                    f"{text} skips the kernel's check of declarations",
                )
            elif text in METAPROGRAM_WORDS:
                refuse(RefusalCode.METAPROGRAM, token, f"{text} {METAPROGRAM_WORDS[text]}")
            elif text in SORRY_WORDS:
                refuse(RefusalCode.SORRY, token, f"uses {text}")
            elif text == "attribute" and following is not None and following.text == "[":
                for name_token in _attribute_names(tokens, index + 1):
                    _check_attribute(name_token, refuse)
        elif token.kind in (Kind.NAME, Kind.STRING) and any(w in token.text for w in KERNEL_SKIPS):
            refuse(
                RefusalCode.SKIPS_KERNEL_CHECK,
                token,
                f"{token.text} names what skips the kernel's check of declarations",
            )
        elif token.kind is Kind.SYMBOL:
            if token.text == "@[":
                for name_token in _attribute_names(tokens, index):
                    _check_attribute(name_token, refuse)
            elif (hashed := hash_word(tokens, index)) is not None and hashed in HASH_COMMANDS:
                refuse(RefusalCode.METAPROGRAM, token, f"#{hashed} {HASH_COMMANDS[hashed]}")
    for code in _PRIORITY:
        if code in found:
            return found[code]
    return None


def _attribute_names(tokens: Sequence[Token], opening: int) -> list[Token]:
    """The name of each attribute in the brackets opening at ``tokens[opening]`` (``@[`` or the
    ``[`` of ``attribute [...]``): the first identifier of each comma-separated entry, after
    ``local`` / ``scoped``."""
    names: list[Token] = []
    depth = 0
    expecting = True
    for token in tokens[opening:]:
        if token.text in _OPENING:
            depth += 1
            continue
        if token.text in _CLOSING:
            depth -= 1
            if depth == 0:
                break
            continue
        if depth != 1:
            continue
        if token.text == ",":
            expecting = True
        elif expecting and token.kind is Kind.IDENT and token.text not in ("local", "scoped"):
            names.append(token)
            expecting = False
    return names


def _check_attribute(token: Token, refuse: Callable[[RefusalCode, Token, str], None]) -> None:
    name = _plain(token.text)
    if name == "implemented_by":
        refuse(
            RefusalCode.IMPLEMENTED_BY,
            token,
            "@[implemented_by] makes the compiler run other code than the definition's",
        )
    elif name == "extern":
        refuse(RefusalCode.EXTERN, token, "@[extern] makes the compiler run foreign code")
    elif name in METAPROGRAM_ATTRIBUTES or name.startswith("builtin_"):
        refuse(RefusalCode.METAPROGRAM, token, f"@[{name}] registers code Lean's front end runs")


# -- the restated theorem ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Header:
    """A theorem's statement as compared: its kind, full name and the tokens after its name
    (``text``: the same as written, blanks collapsed, for showing)."""

    kind: str
    name: str | None
    tokens: tuple[str, ...]
    text: str

    @property
    def shown(self) -> str:
        kind = "theorem" if self.kind == "lemma" else self.kind
        text = " ".join((kind, *([self.name] if self.name else []), self.text))
        return text if len(text) <= 100 else text[:99] + "…"


def _header(declaration: Declaration, tokens: Sequence[Token]) -> _Header:
    start = (
        declaration.name_end.offset
        if declaration.name_end is not None
        else declaration.signature_start
    )
    end = declaration.statement_end.offset
    texts = tuple(t.text for t in tokens if start <= t.start and t.end <= end)
    text = " ".join(declaration.source[start:end].split())
    return _Header(declaration.kind, declaration.full_name, texts, text)


def _target_header(statement: str | None) -> _Header | None:
    """The header of the theorem ``statement`` states, or None when it states none."""
    if statement is None:
        return None
    theorems = [d for d in scan(statement).declarations if d.kind in THEOREM_WORDS]
    if not theorems:
        return None
    tokens = [t for t in tokenize(statement) if t.kind not in _COMMENTS]
    return _header(theorems[-1], tokens)


def _same_name(a: str | None, b: str | None) -> bool:
    return a is not None and b is not None and name_parts(a) == name_parts(b)


def _restated_proof(
    candidate: str,
    tokens: Sequence[Token],
    declarations: Sequence[Declaration],
    statement: str | None,
) -> Screened:
    theorems = [d for d in declarations if d.kind in THEOREM_WORDS]
    if not theorems:
        stated = ", ".join(f"{d.kind} {d.full_name or ''}".rstrip() for d in declarations[:3])
        return _refused(
            RefusalCode.CHANGED_STATEMENT, f"the candidate states no theorem (only {stated})"
        )
    target = _target_header(statement)
    headers = [(d, _header(d, tokens)) for d in theorems]
    if target is None:
        chosen = theorems[-1]
    elif target.kind == "example":
        same = [d for d, header in headers if header.tokens == target.tokens]
        if not same:
            return _refused(
                RefusalCode.CHANGED_STATEMENT,
                f"restates the goal as {headers[-1][1].shown!r}, not {target.shown!r}",
            )
        chosen = same[-1]
    else:
        named = [
            (d, header)
            for d, header in headers
            if d.kind != "example" and _same_name(d.full_name, target.name)
        ]
        if not named:
            stated = ", ".join(header.shown for _, header in headers[:3])
            return _refused(
                RefusalCode.CHANGED_STATEMENT,
                f"restates no theorem {target.name} (it states {stated})",
            )
        chosen, header = named[-1]
        if header.tokens != target.tokens:
            return _refused(
                RefusalCode.CHANGED_STATEMENT,
                f"restates {target.name} as {header.shown!r}, not {target.shown!r}",
                chosen.start.line,
            )
    return _proof_of(candidate, tokens, chosen)


def _proof_of(candidate: str, tokens: Sequence[Token], declaration: Declaration) -> Screened:
    """The body of ``declaration``'s proof: what follows ``:= by``, or ``exact`` and the term
    that follows ``:=``."""
    name = declaration.full_name or declaration.kind
    line = declaration.start.line
    after = [
        t for t in tokens if declaration.statement_end.offset <= t.start < declaration.end.offset
    ]
    if not after or after[0].text != ":=":
        return _refused(
            RefusalCode.NO_PROOF,
            f"{name} has no ':= ...' proof to take (a 'where' or pattern-matching body?)",
            line,
        )
    body: list[Token] = []
    depth = 0
    for token in after[1:]:
        if depth == 0 and token.text in _BODY_CLAUSES:
            break
        if token.text in _OPENING:
            depth += 1
        elif token.text in _CLOSING:
            depth = max(0, depth - 1)
        body.append(token)
    tactic = bool(body) and body[0].text == "by"
    opening = body[0] if tactic else after[0]
    if tactic:
        body = body[1:]
    if not body:
        return _refused(RefusalCode.EMPTY, f"{name} is restated without a proof", line)
    # the text after `:= by` (or `:=`) up to the proof's last token, comments in it included;
    # code on the opening line keeps its column so that the dedent keeps the layout
    start = opening.end
    first, newline, rest = candidate[start : body[-1].end].partition("\n")
    if body[0].line == opening.line:
        column = start - (candidate.rfind("\n", 0, start) + 1)
        rest = " " * column + first + newline + rest
    text = textwrap.dedent(rest).strip("\n")
    if not tactic:
        text = "exact\n" + textwrap.indent(text, "  ")
    return Screened(text)
