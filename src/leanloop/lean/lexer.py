"""A tokenizer for Lean 4 source that reads tokens where Lean's parser reads them: identifiers
(with Lean's unicode rules), numbers, strings (escapes, string gaps, raw strings, interpolated
strings whose ``{...}`` holes hold code), char and name literals, nested and doc comments, and
symbols, each with its position.

The rules follow Lean's own (``Lean.Parser.Basic``: ``whitespace``, ``finishCommentBlock``,
``strLitFnAux``, ``quotedCharCoreFn``, ``stringGapFn``, ``charLitFnAux``, ``rawStrLitFnAux``,
``identFnAux``; ``interpolatedStrFn``; ``isIdFirst``/``isIdRest``/``isLetterLike`` of
``Init.Meta``). Where Lean's tokenizer fails (an invalid escape, a char literal not closed after
one character) Lean reports an error and reads on from the place it failed, token by token; so
does this lexer, and the token it stopped in carries a ``Flaw``. A string is read as
interpolated after a syntax known to take one (``s!``, ``m!``, ``f!``, ``throwError``, ...);
any other string whose ``{...}`` would, read as holes of code, make it end elsewhere carries
``Flaw.TWO_READINGS``: the set of such syntaxes is open (a library can declare
``syntax "sql!" interpolatedStr(term) : term``), so no fixed lexer knows which reading Lean takes.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import Enum


class Kind(Enum):
    """What a token is (keywords are identifiers: ``theorem``, ``s!``, ``panic!``)."""

    IDENT = "ident"
    NUMBER = "number"
    STRING = "string"
    CHAR = "char"
    NAME = "name"  # `Foo.bar name literal
    SYMBOL = "symbol"
    COMMENT = "comment"  # -- and /- -/
    DOC = "doc"  # /-- -/
    MODDOC = "moddoc"  # /-! -/


class Flaw(Enum):
    """Why Lean may not read a token as it is shown (each value completes "a <kind> ...")."""

    UNTERMINATED = "is never closed"
    INVALID_ESCAPE = "holds an escape Lean does not accept (Lean reads on from there as code)"
    STRING_GAP = (
        "holds a string gap ('\\' and a line break) with a second line break, which Lean does "
        "not accept (it reads on from there as code)"
    )
    CHAR_NOT_CLOSED = "is not closed after one character (Lean reads on from there as code)"
    TWO_READINGS = (
        "ends elsewhere when its {...} are read as code (an interpolated string): which one "
        "Lean reads depends on the syntax before it"
    )
    TOO_DEEP = "nests interpolated strings too deeply to be read"


@dataclass(frozen=True, slots=True)
class Token:
    """One token of Lean source, with where it is and how it was read."""

    kind: Kind
    text: str
    start: int  # offset in the source (characters)
    end: int
    line: int  # 1-based
    column: int  # 0-based, in characters (as Lean reports positions)
    line_start: bool  # first token (comments included) on its line
    interpolated: bool = False  # a string read as interpolated: its {...} holes are code
    flaw: Flaw | None = None  # why Lean may read this text otherwise (None: it reads it so)


def _letter_like() -> str:
    # Lean 4's isLetterLike: greek without λ, Π, Σ; coptic; polytonic greek; the letterlike
    # block; mathematical alphanumerics; Latin-1 letters without × and ÷; Latin Extended-A.
    return (
        "\u03b1-\u03ba\u03bc-\u03c9"
        "\u0391-\u039f\u03a1\u03a2\u03a4-\u03a9"
        "\u03ca-\u03fb"
        "\u1f00-\u1ffe"
        "\u2100-\u214f"
        "\U0001d49c-\U0001d59f"
        "\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u00ff"
        "\u0100-\u017f"
    )


#: isIdFirst: ASCII letters, '_' and letter-like characters.
_START = "A-Za-z_" + _letter_like()
#: isIdRest: also digits, ', !, ? and subscripts (isSubScriptAlnum).
_REST = _START + "0-9'!?\u2080-\u2089\u2090-\u209c\u1d62-\u1d6a\u2c7c"
_ATOM = rf"(?:[{_START}][{_REST}]*|«[^»]*»)"  # «...» may span lines, as in Lean
# a name part after a dot must start an identifier; `h.1` keeps its field index as Lean's
# fieldIdx does (the same text)
_IDENT = re.compile(rf"{_ATOM}(?:\.{_ATOM}|\.[0-9]+)*")
_NAME = re.compile(rf"``?{_ATOM}(?:\.{_ATOM})*")
_ID_START = re.compile(rf"[{_START}«]")
_DIGITS = r"[0-9](?:_*[0-9])*"
_NUMBER = re.compile(
    r"0[xX](?:_*[0-9a-fA-F])+|0[bB](?:_*[01])+|0[oO](?:_*[0-7])+"
    rf"|{_DIGITS}(?:\.(?:{_DIGITS})?)?(?:[eE][+-]?{_DIGITS})?"
)
# A plain string without a flaw, as strLitFnAux reads it: escapes \\ \" \' \r \n \t \xHH \uHHHH
# and string gaps (\ and a line break, blanks without another line break, then a character).
_ESCAPES = r"""[\\"'rnt]|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|\r?\n[ \t\r]*(?=[^ \t\r\n])"""
_PLAIN_STRING = re.compile(rf'"(?:[^"\\]|\\(?:{_ESCAPES}))*"')
_RAW_STRING_START = re.compile(r'r(#*)"')
_WHITESPACE = re.compile(r"[ \t\r\n\f\v\ufeff]+")  # a byte order mark counts as blank
_COMMENT_MARK = re.compile(r"/-|-/")
_SYMBOLS = (
    ":=", "@[", "=>", "<;>", "..", "::", "<|", "|>", "←", "→", "↔",
    # Mathlib tokens that end in a quote (tsum, tprod, preimage, image): not char literals
    "∑'", "∏'", "⁻¹'", "''",
)  # fmt: skip
_SYMBOL = re.compile("|".join(re.escape(symbol) for symbol in _SYMBOLS))
_QUOTABLE = frozenset("\\\"'rnt")
_QUOTABLE_IN_INTERPOLATION = _QUOTABLE | {"{"}
_HEX = frozenset("0123456789abcdefABCDEF")
#: Syntaxes whose string argument Lean reads as interpolated (``interpolatedStr(term)``, first
#: if it may also be a term): core's ``s!``, ``m!``, ``f!``, ``throwError``, ``println!`` and
#: ``dbg_trace``. ``throwErrorAt ref "..."`` and ``trace[cls] "..."`` are recognised by shape.
INTERPOLATING = frozenset({"s!", "m!", "f!", "throwError", "println!", "dbg_trace"})
_MAX_NESTING = 40


# A token as scanned: kind, start, end, read as interpolated, flaw.
_Raw = tuple[Kind, int, int, bool, Flaw | None]


def tokenize(source: str) -> list[Token]:
    """All tokens of ``source`` in order, comments included; never fails: an unknown character
    is a one-character symbol, an unterminated comment or string runs to the end, and a token
    Lean's tokenizer would fail in ends where Lean stops (its ``flaw`` says why), the text
    after it read on as Lean reads it."""
    line_starts = [0, *(m.end() for m in re.finditer("\n", source))]
    tokens: list[Token] = []
    last_line = 0  # the line the previous token ends on
    for kind, start, end, interpolated, flaw in _scan(source, 0, depth=0):
        line = bisect_right(line_starts, start)
        text = source[start:end]
        first = line != last_line
        column = start - line_starts[line - 1]
        tokens.append(Token(kind, text, start, end, line, column, first, interpolated, flaw))
        last_line = bisect_right(line_starts, end - 1) if "\n" in text else line
    return tokens


def _scan(source: str, pos: int, depth: int) -> Iterator[_Raw]:
    """The tokens of ``source`` from ``pos`` on (``depth``: the interpolated strings around)."""
    code: list[_Raw] = []  # the code tokens so far (what a string's reading depends on)
    length = len(source)
    while pos < length:
        match = _WHITESPACE.match(source, pos)
        if match:
            pos = match.end()
            continue
        raw = _comment(source, pos) if source[pos] in "-/" else None
        if raw is None:
            raw = _code_token(source, pos, code, depth)
            code.append(raw)
        yield raw
        pos = raw[2]


def _comment(source: str, pos: int) -> _Raw | None:
    if source.startswith("--", pos):
        end = source.find("\n", pos)
        return Kind.COMMENT, pos, len(source) if end < 0 else end, False, None
    if not source.startswith("/-", pos):
        return None
    # '/--' and '/-!' are doc comment tokens whose text is scanned right after them (even
    # '/--/'); a plain block comment skips the character after '/-' (Lean's whitespace)
    kind = (
        Kind.DOC
        if source.startswith("/--", pos)
        else Kind.MODDOC
        if source.startswith("/-!", pos)
        else Kind.COMMENT
    )
    closed = _block_comment_end(source, pos + 3, depth=1)
    if closed is None:
        return kind, pos, len(source), False, Flaw.UNTERMINATED
    return kind, pos, closed, False, None


def _block_comment_end(source: str, start: int, depth: int) -> int | None:
    """End offset of the (nested) block comment whose text is scanned from ``start`` at nesting
    ``depth``, or None when it is never closed."""
    pos = start
    while True:
        match = _COMMENT_MARK.search(source, pos)
        if match is None:
            return None
        depth += 1 if match.group() == "/-" else -1
        pos = match.end()
        if depth == 0:
            return pos


def _code_token(source: str, pos: int, code: Sequence[_Raw], depth: int) -> _Raw:
    char = source[pos]
    if char == '"':
        return _string(source, pos, _interpolating(source, code), depth)
    if char == "'" and not source.startswith("''", pos):
        return _char(source, pos)
    if char == "`" and _ID_START.match(source, pos + 1 + source.startswith("``", pos)):
        match = _NAME.match(source, pos)
        if match is None:  # `«... never closed
            return Kind.NAME, pos, len(source), False, Flaw.UNTERMINATED
        return Kind.NAME, pos, match.end(), False, None
    raw = _RAW_STRING_START.match(source, pos) if char == "r" else None
    if raw:  # r"..." and r#"..."#: no escapes, it ends at the quote and its hashes
        closing = '"' + raw.group(1)
        found = source.find(closing, raw.end())
        if found < 0:
            return Kind.STRING, pos, len(source), False, Flaw.UNTERMINATED
        return Kind.STRING, pos, found + len(closing), False, None
    match = _IDENT.match(source, pos)
    if match:
        return Kind.IDENT, pos, match.end(), False, None
    if char == "«":  # an identifier escape never closed
        return Kind.IDENT, pos, len(source), False, Flaw.UNTERMINATED
    match = _NUMBER.match(source, pos) if "0" <= char <= "9" else None
    if match:
        return Kind.NUMBER, pos, match.end(), False, None
    match = _SYMBOL.match(source, pos)
    return Kind.SYMBOL, pos, match.end() if match else pos + 1, False, None


def _interpolating(source: str, code: Sequence[_Raw]) -> bool:
    """Whether the string after the code tokens ``code`` is the argument of a syntax that takes
    an interpolated string: ``s!``, ``throwError``, ... right before it, ``trace[cls]``, or
    ``throwErrorAt ref`` with ``ref`` an identifier."""

    def text(back: int) -> str | None:
        return source[code[-back][1] : code[-back][2]] if len(code) >= back else None

    if text(1) in INTERPOLATING:
        return True
    if text(2) == "throwErrorAt" and code[-1][0] is Kind.IDENT:
        return True
    return text(1) == "]" and text(3) == "[" and text(4) == "trace"


def _string(source: str, pos: int, interpolated: bool, depth: int) -> _Raw:
    """The string whose quote is at ``pos``, read as interpolated or as a plain string; a plain
    string that holds ``{`` is read the other way too, and flawed when the readings differ."""
    if interpolated:
        end, flaw = _interpolated_end(source, pos, depth)
        return Kind.STRING, pos, end, True, flaw
    match = _PLAIN_STRING.match(source, pos)
    end, flaw = (match.end(), None) if match else _plain_end(source, pos)
    # read as interpolated no further than the plain reading's end (past it, they differ)
    if (
        flaw is None
        and "{" in source[pos:end]
        and _interpolated_end(source, pos, depth, limit=end) != (end, None)
    ):
        flaw = Flaw.TWO_READINGS
    return Kind.STRING, pos, end, False, flaw


def _plain_end(source: str, pos: int) -> tuple[int, Flaw | None]:
    """Where the plain string whose quote is at ``pos`` ends, or where Lean fails in it."""
    index, length = pos + 1, len(source)
    while index < length:
        char = source[index]
        if char == '"':
            return index + 1, None
        if char == "\\":
            index, flaw = _escape(source, index + 1, _QUOTABLE, in_string=True)
            if flaw is not None:
                return index, flaw
            continue
        index += 1
    return length, Flaw.UNTERMINATED


def _interpolated_end(
    source: str, pos: int, depth: int, limit: int | None = None
) -> tuple[int, Flaw | None]:
    """Where the interpolated string whose quote is at ``pos`` ends (its holes read as code),
    or where Lean fails in it; a reading that passes ``limit`` stops there, as two readings."""
    if depth >= _MAX_NESTING:
        return len(source), Flaw.TOO_DEEP
    index, length = pos + 1, len(source)
    while index < length:
        if limit is not None and index > limit:
            return index, Flaw.TWO_READINGS
        char = source[index]
        if char == '"':
            return index + 1, None
        if char == "\\":
            index, flaw = _escape(source, index + 1, _QUOTABLE_IN_INTERPOLATION, in_string=True)
            if flaw is not None:
                return index, flaw
            continue
        if char == "{":
            index, flaw = _hole_end(source, index + 1, depth + 1, limit)
            if flaw is not None:
                return index, flaw
            continue
        index += 1
    return length, Flaw.UNTERMINATED


def _hole_end(
    source: str, pos: int, depth: int, limit: int | None = None
) -> tuple[int, Flaw | None]:
    """The offset after the ``}`` that closes the hole of code starting at ``pos`` (braces,
    strings, comments and interpolated strings nest in it), or where Lean fails in it; a hole
    that passes ``limit`` stops there, as two readings."""
    braces = 0
    for kind, start, end, _, flaw in _scan(source, pos, depth):
        if limit is not None and end > limit:
            return end, Flaw.TWO_READINGS
        if flaw is not None and flaw is not Flaw.TWO_READINGS:
            return end, flaw
        if kind is not Kind.SYMBOL:
            continue
        if source[start] == "{":
            braces += 1
        elif source[start] == "}":
            if braces == 0:
                return end, None
            braces -= 1
    return len(source), Flaw.UNTERMINATED


def _escape(
    source: str, index: int, quotable: frozenset[str], in_string: bool
) -> tuple[int, Flaw | None]:
    """The offset after the escape whose character (after ``\\``) is at ``index``, or where Lean
    fails in it (``quotedCharCoreFn``, and ``stringGapFn`` in strings)."""
    length = len(source)
    if index >= length:
        return length, Flaw.UNTERMINATED
    char = source[index]
    if char in quotable:
        return index + 1, None
    if char in "xu":
        for offset in range(1, 3 if char == "x" else 5):
            if index + offset >= length or source[index + offset] not in _HEX:
                return min(index + offset, length), Flaw.INVALID_ESCAPE
        return index + (3 if char == "x" else 5), None
    newline = 2 if source.startswith("\r\n", index) else 1 if char == "\n" else 0
    if not (in_string and newline):
        return index, Flaw.INVALID_ESCAPE
    index += newline
    while index < length and source[index] in " \t\r\n":
        if source[index] == "\n":  # a second line break in one gap
            return index, Flaw.STRING_GAP
        index += 1
    return index, None


def _char(source: str, pos: int) -> _Raw:
    """The char literal at ``pos`` (``'`` not followed by another): one character or escape,
    then ``'``; or, where Lean fails, the text it read (it reads on after it)."""
    length = len(source)
    index = pos + 1
    if index >= length:
        return Kind.CHAR, pos, length, False, Flaw.UNTERMINATED
    if source[index] == "\\":
        index, flaw = _escape(source, index + 1, _QUOTABLE, in_string=False)
        if flaw is not None:
            return Kind.CHAR, pos, max(index, pos + 1), False, flaw
    else:
        index += 1
    if index < length and source[index] == "'":
        return Kind.CHAR, pos, index + 1, False, None
    return Kind.CHAR, pos, min(index + 1, length), False, Flaw.CHAR_NOT_CLOSED


def hole_spans(text: str) -> list[tuple[int, int]]:
    """Where the code of each ``{...}`` hole of ``text`` is (offsets, braces excluded), ``text``
    being a string token read as interpolated (or any string: its text from the first quote is
    read so). A hole never closed runs to the end."""
    quote = text.find('"')
    if quote < 0:
        return []
    spans, index, length = [], quote + 1, len(text)
    while index < length and text[index] != '"':
        if text[index] == "\\":
            index, flaw = _escape(text, index + 1, _QUOTABLE_IN_INTERPOLATION, in_string=True)
            if flaw is not None:
                break
        elif text[index] == "{":
            end, flaw = _hole_end(text, index + 1, 1)
            spans.append((index + 1, end - 1 if flaw is None else end))
            if flaw is not None:
                break
            index = end
        else:
            index += 1
    return spans


def interpolation_holes(text: str) -> list[str]:
    """The code in the ``{...}`` holes of ``text`` (see ``hole_spans``)."""
    return [text[start:end] for start, end in hole_spans(text)]


_PLAIN_ATOM = re.compile(rf"[{_START}][{_REST}]*")
_NAME_PART = re.compile(r"«[^»]*»|[^.«»]+")
#: Words of Lean's syntax that a name part must be written as ``«word»`` to be.
KEYWORDS = frozenset(
    {
        "at", "by", "do", "else", "end", "example", "from", "fun", "have", "if", "import", "in",
        "instance", "let", "match", "namespace", "open", "section", "show", "structure", "then",
        "theorem", "universe", "variable", "where", "with", "def", "abbrev", "axiom", "class",
        "inductive", "mutual", "deriving", "termination_by", "decreasing_by", "forall", "calc",
        "lemma", "Type", "Sort", "Prop", "λ", "sorry",
    }
)  # fmt: skip


def split_name(name: str) -> list[str]:
    """The dotted parts of a name as written, a ``«...»`` part kept whole (dots inside it do
    not split)."""
    return _NAME_PART.findall(name)


def _plain(part: str) -> bool:
    return _PLAIN_ATOM.fullmatch(part) is not None and part not in KEYWORDS


def escape_name(full_name: str) -> str:
    """A full name as Lean source writes it (and Lean prints it): each part that is not a plain
    identifier goes between ``«»`` (``Foo.my thm`` -> ``Foo.«my thm»``); a part already between
    them stays whole (``«a.b»`` is one part)."""
    return ".".join(
        part if part.startswith("«") or _plain(part) else f"«{part}»"
        for part in split_name(full_name)
    )


def normalize_name(name: str) -> str:
    """A name as Lean prints it: ``«»`` taken off the parts that do not need them
    (``«foo».«a b»`` -> ``foo.«a b»``)."""
    parts = []
    for part in split_name(name):
        inner = part[1:-1] if part.startswith("«") and part.endswith("»") else part
        parts.append(inner if _plain(inner) else f"«{inner}»")
    return ".".join(parts)


def is_unterminated(token: Token) -> bool:
    """Whether a string, comment, char literal or ``«`` escape runs to the end of the source
    unclosed (the lexer never fails, so such a token swallows everything after it)."""
    return token.flaw is Flaw.UNTERMINATED


def hash_word(tokens: Sequence[Token], index: int) -> str | None:
    """The word spelt right after the ``#`` at ``tokens[index]`` (``#check`` -> ``check``), or
    None when that token is not such a ``#``."""
    token = tokens[index]
    following = tokens[index + 1] if index + 1 < len(tokens) else None
    if (
        token.text != "#"
        or following is None
        or following.kind is not Kind.IDENT
        or following.start != token.end
    ):
        return None
    return following.text
