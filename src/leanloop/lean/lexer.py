"""A tokenizer for Lean 4 source: identifiers (with Lean's unicode rules), numbers, strings, char
and name literals, nested and doc comments, and symbols, each with its position."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum


class Kind(Enum):
    IDENT = "ident"
    NUMBER = "number"
    STRING = "string"
    CHAR = "char"
    NAME = "name"  # `Foo.bar name literal
    SYMBOL = "symbol"
    COMMENT = "comment"  # -- and /- -/
    DOC = "doc"  # /-- -/
    MODDOC = "moddoc"  # /-! -/


@dataclass(frozen=True, slots=True)
class Token:
    kind: Kind
    text: str
    start: int  # offset in the source (characters)
    end: int
    line: int  # 1-based
    column: int  # 0-based, in characters (as Lean reports positions)
    line_start: bool  # first token (comments included) on its line


def _letter_like_ranges() -> str:
    # Lean 4's isLetterLike (greek without λ, Π, Σ; coptic; polytonic greek; letterlike block;
    # mathematical alphanumerics), plus ASCII letters and '_'.
    return (
        "A-Za-z_"
        "\u03b1-\u03ba\u03bc-\u03c9"
        "\u0391-\u039f\u03a1\u03a2\u03a4-\u03a9"
        "\u03ca-\u03fb"
        "\u1f00-\u1ffe"
        "\u2100-\u214f"
        "\U0001d49c-\U0001d59f"
    )


_START = _letter_like_ranges()
# Subscripts (₀-₉, ₐ-ₜ, ᵢ-ᵪ, ⱼ) and the extra identifier characters.
_REST = _START + "0-9'!?\u2080-\u2089\u2090-\u209c\u1d62-\u1d6a\u2c7c"
_ATOM = rf"(?:[{_START}][{_REST}]*|«[^»]*»)"  # «...» may span lines, as in Lean
_IDENT = re.compile(rf"{_ATOM}(?:\.{_ATOM}|\.[0-9]+)*")
_NUMBER = re.compile(
    r"0[xX][0-9a-fA-F_]+|0[bB][01_]+|0[oO][0-7_]+|[0-9][0-9_]*(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
)
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_RAW_STRING_START = re.compile(r'r(#*)"')
_CHAR = re.compile(r"'(?:\\(?:x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|.)|[^'\\\n])'")
_NAME = re.compile(rf"``?{_ATOM}(?:\.{_ATOM})*")
# a byte order mark counts as blank (a file may start with one)
_WHITESPACE = re.compile(r"[ \t\r\f\v\ufeff]+")
_COMMENT_MARK = re.compile(r"/-|-/")
_SYMBOLS = (":=", "@[", "=>", "<;>", "..", "::", "<|", "|>", "←", "→", "↔")


def tokenize(source: str) -> list[Token]:
    """All tokens of ``source`` in order, comments included; never fails (unknown characters
    become one-character symbols, an unterminated comment or string runs to the end)."""
    tokens: list[Token] = []
    pos, line, line_offset = 0, 1, 0
    length = len(source)
    first_on_line = True

    def add(kind: Kind, start: int, end: int) -> None:
        nonlocal first_on_line
        tokens.append(
            Token(kind, source[start:end], start, end, line, start - line_offset, first_on_line)
        )
        first_on_line = False

    def advance_lines(start: int, end: int) -> None:
        nonlocal line, line_offset
        newlines = source.count("\n", start, end)
        if newlines:
            line += newlines
            line_offset = source.rfind("\n", start, end) + 1

    while pos < length:
        char = source[pos]
        if char == "\n":
            pos += 1
            line += 1
            line_offset = pos
            first_on_line = True
            continue
        match = _WHITESPACE.match(source, pos)
        if match:
            pos = match.end()
            continue
        if source.startswith("--", pos):
            end = source.find("\n", pos)
            end = length if end < 0 else end
            add(Kind.COMMENT, pos, end)
            pos = end
            continue
        if source.startswith("/-", pos):
            # as Lean reads them: '/--' and '/-!' open doc comments (even '/--/'), whose text
            # starts after the three characters; nesting counts from there
            kind = (
                Kind.DOC
                if source.startswith("/--", pos)
                else Kind.MODDOC
                if source.startswith("/-!", pos)
                else Kind.COMMENT
            )
            end = _block_comment_end(source, pos + (2 if kind is Kind.COMMENT else 3), depth=1)
            add(kind, pos, end)
            advance_lines(pos, end)
            pos = end
            continue
        if char == '"':
            match = _STRING.match(source, pos)
            end = match.end() if match else length
            add(Kind.STRING, pos, end)
            advance_lines(pos, end)
            pos = end
            continue
        if char == "'":
            match = _CHAR.match(source, pos)
            if match:
                add(Kind.CHAR, pos, match.end())
                pos = match.end()
                continue
        if char == "`":
            match = _NAME.match(source, pos)
            if match:
                add(Kind.NAME, pos, match.end())
                pos = match.end()
                continue
        match = _RAW_STRING_START.match(source, pos)
        if match:  # r"..." and r#"..."#: no escapes, it ends at the quote and its hashes
            closing = '"' + match.group(1)
            found = source.find(closing, match.end())
            end = length if found < 0 else found + len(closing)
            add(Kind.STRING, pos, end)
            advance_lines(pos, end)
            pos = end
            continue
        match = _IDENT.match(source, pos)
        if match and match.group().endswith("!") and source.startswith('"', match.end()):
            end = _interpolated_end(source, match.end())  # s!"..{code}.." is one string
            add(Kind.STRING, pos, end)
            advance_lines(pos, end)
            pos = end
            continue
        if match:
            add(Kind.IDENT, pos, match.end())
            pos = match.end()
            continue
        match = _NUMBER.match(source, pos)
        if match:
            add(Kind.NUMBER, pos, match.end())
            pos = match.end()
            continue
        for symbol in _SYMBOLS:
            if source.startswith(symbol, pos):
                add(Kind.SYMBOL, pos, pos + len(symbol))
                pos += len(symbol)
                break
        else:
            add(Kind.SYMBOL, pos, pos + 1)
            pos += 1
    return tokens


def _interpolated_end(source: str, start: int) -> int:
    """End offset of the interpolated string whose quote is at ``start``: its ``{...}`` holes
    hold code (strings, characters and braces nest there)."""
    pos, length = start + 1, len(source)
    while pos < length:
        char = source[pos]
        if char == "\\":
            pos += 2
        elif char == '"':
            return pos + 1
        elif char == "{":
            pos = _hole_end(source, pos + 1)
        else:
            pos += 1
    return length


def _hole_end(source: str, pos: int) -> int:
    """Offset after the ``}`` closing an interpolation hole whose code starts at ``pos``."""
    depth, length = 1, len(source)
    while pos < length:
        char = source[pos]
        if char == '"':
            match = _STRING.match(source, pos)
            pos = match.end() if match else length
            continue
        if char == "'":
            match = _CHAR.match(source, pos)
            if match:
                pos = match.end()
                continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return pos + 1
        pos += 1
    return length


def interpolation_holes(text: str) -> list[str]:
    """The code in the ``{...}`` holes of an interpolated string token (``s!"..."``)."""
    quote = text.find('"')
    holes, pos = [], quote + 1
    while 0 < pos < len(text):
        char = text[pos]
        if char == "\\":
            pos += 2
        elif char == "{":
            end = _hole_end(text, pos + 1)
            holes.append(text[pos + 1 : end - 1])
            pos = end
        else:
            pos += 1
    return holes


def _block_comment_end(source: str, start: int, depth: int = 0) -> int:
    """End offset of the (nested) block comment whose text is scanned from ``start``, at
    nesting ``depth`` there (0: ``start`` is the opening ``/-``)."""
    pos = start
    while True:
        match = _COMMENT_MARK.search(source, pos)
        if match is None:
            return len(source)
        depth += 1 if match.group() == "/-" else -1
        pos = match.end()
        if depth == 0:
            return pos


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
    """Whether a string or block comment runs to the end of the source unclosed (the lexer
    never fails, so such a token swallows everything after it)."""
    text = token.text
    if token.kind is Kind.STRING:
        if not text.startswith(('"', "r")) or (
            text.startswith("r") and not _RAW_STRING_START.match(text)
        ):  # interpolated: s!"..."
            quote = text.find('"')
            return _interpolated_end(text, quote) != len(text) or not text.endswith('"')
        raw = _RAW_STRING_START.match(text)
        if raw:
            closing = '"' + raw.group(1)
            return len(text) < raw.end() + len(closing) or not text.endswith(closing)
        return _STRING.fullmatch(text) is None
    if token.kind in (Kind.COMMENT, Kind.DOC, Kind.MODDOC) and text.startswith("/-"):
        opener = 2 if token.kind is Kind.COMMENT else 3
        return _block_comment_end(text, opener, depth=1) != len(text) or not text.endswith("-/")
    return False


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
