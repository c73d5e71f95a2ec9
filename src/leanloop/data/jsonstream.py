"""Streaming readers for JSON arrays and JSON-lines files that report where malformed input is.

A LeanDojo split file is one JSON array that can be gigabytes long and is usually written on a
single line. The array reader decodes one element at a time, so memory holds only the element being
read, and a syntax error is reported with its line, column and element number. Bytes that are not
UTF-8, nesting too deep to decode, and text no database can store (lone UTF-16 surrogates, NUL
characters) are reported the same way.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from leanloop.errors import DataFormatError

_WHITESPACE = " \t\n\r\ufeff"
#: JSON escapes that may decode to text a database cannot store (checked precisely when found).
_SUSPECT_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def unstorable_text(value: Any, path: str = "") -> tuple[str, str] | None:
    """The first string in ``value`` (field path, problem) holding a NUL character or a lone
    UTF-16 surrogate, which neither UTF-8 files nor PostgreSQL can hold; None when clean."""
    if isinstance(value, str):
        match = _UNSTORABLE.search(value)
        if match is None:
            return None
        char = match.group()
        what = "a NUL character" if char == "\x00" else f"a lone surrogate (\\u{ord(char):04x})"
        return path, f"contains {what}, which cannot be stored as text"
    items: Iterable[tuple[Any, Any]]
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list | tuple):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        found = unstorable_text(item, f"{path}.{key}" if path else str(key))
        if found is not None:
            return found
    return None


@dataclass(frozen=True, slots=True)
class JsonItem:
    """One decoded element and where it started (1-based line and column, 0-based index)."""

    index: int
    line: int
    column: int
    value: Any


class _Buffer:
    """A sliding window over a text file that knows the line and column of every character."""

    def __init__(self, handle, path: Path, chunk_size: int) -> None:
        self.handle = handle  # binary: bytes are decoded here, so a bad byte has a line
        self.path = path
        self.chunk_size = chunk_size
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self._newlines_read = 0  # newlines in the bytes decoded so far
        self.text = ""
        self.pos = 0
        self.eof = False
        self._line = 1  # line of text[0]
        self._column = 0  # characters before text[0] on its line
        self._mark = (0, 1, 0)  # a known (offset, line, characters before it on its line)

    def locate(self, offset: int) -> tuple[int, int]:
        """Line and column of ``text[offset]``; counting resumes from the last position located,
        so locating increasing offsets costs time linear in the text."""
        start, line, column = self._mark if offset >= self._mark[0] else (0, *self._base())
        newlines = self.text.count("\n", start, offset)
        if newlines:
            line += newlines
            column = offset - self.text.rfind("\n", start, offset) - 1
        else:
            column += offset - start
        self._mark = (offset, line, column)
        return line, column + 1

    def _base(self) -> tuple[int, int]:
        return self._line, self._column

    def fill(self) -> bool:
        """Read more text, dropping what was consumed; False at the end of the file."""
        if self.eof:
            return False
        if self.pos:
            self._line, column = self.locate(self.pos)
            self._column = column - 1
            self.text = self.text[self.pos :]
            self.pos = 0
            self._mark = (0, self._line, self._column)
        raw = self.handle.read(max(self.chunk_size, len(self.text)))
        try:
            chunk = self._decoder.decode(raw, final=not raw)
        except UnicodeDecodeError as exc:
            # exc.object is the bytes decoded: a partial character left from the last chunk
            # (no newline in it) and this chunk
            line = self._newlines_read + exc.object.count(b"\n", 0, exc.start) + 1
            raise DataFormatError(
                self.path,
                f"not valid UTF-8 text (byte 0x{exc.object[exc.start]:02x}: {exc.reason})",
                line=line,
                hint="the file must be UTF-8 encoded, as JSON is",
            ) from None
        self._newlines_read += raw.count(b"\n")
        if not raw:
            self.eof = True
            return False
        self.text += chunk
        return True

    def peek(self) -> str:
        """The next character that is not whitespace, or '' at the end of the file."""
        while True:
            while self.pos < len(self.text) and self.text[self.pos] in _WHITESPACE:
                self.pos += 1
            if self.pos < len(self.text):
                return self.text[self.pos]
            if not self.fill():
                return ""

    def error(self, problem: str, offset: int | None = None, item: int | None = None):
        line, column = self.locate(self.pos if offset is None else offset)
        return DataFormatError(self.path, problem, line=line, column=column, item=item)


def iter_json_array(
    path: str | Path, *, chunk_size: int = 1 << 20, max_item_chars: int = 1 << 28
) -> Iterator[JsonItem]:
    """Yield the elements of the JSON array stored in ``path`` one at a time."""
    path = Path(path)
    decoder = json.JSONDecoder()
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise DataFormatError(path, f"cannot open file ({exc.strerror})") from None
    with handle:
        buf = _Buffer(handle, path, chunk_size)
        if buf.peek() != "[":
            raise buf.error("expected a JSON array starting with '['")
        buf.pos += 1
        index = 0
        while True:
            char = buf.peek()
            if char == "]":
                buf.pos += 1
                break
            if index > 0:
                if char != ",":
                    raise buf.error(
                        "expected ',' or ']' after an array element"
                        if char
                        else "file ends inside the array (truncated?)"
                    )
                buf.pos += 1
                char = buf.peek()
            if not char:
                raise buf.error("file ends inside the array (truncated?)", item=index)
            while True:
                start = buf.pos
                try:
                    value, end = decoder.raw_decode(buf.text, start)
                except RecursionError:
                    raise buf.error(
                        "the element is nested too deeply to read", start, item=index
                    ) from None
                except json.JSONDecodeError as exc:
                    if buf.eof or len(buf.text) - start > max_item_chars:
                        problem = exc.msg
                        if exc.pos >= len(buf.text) - 1 or "Unterminated" in exc.msg:
                            problem += " (the file ends inside this element: truncated?)"
                        raise buf.error(problem, exc.pos, item=index) from None
                    buf.fill()
                    continue
                if end >= len(buf.text) and not buf.eof:
                    buf.fill()  # the value may continue in the next chunk: decode it again
                    continue
                break
            line, column = buf.locate(start)
            if _SUSPECT_ESCAPE.search(buf.text, start, end):
                found = unstorable_text(value)
                if found is not None:
                    raise DataFormatError(
                        path, found[1], line=line, column=column, item=index, field=found[0] or None
                    )
            buf.pos = end
            yield JsonItem(index, line, column, value)
            index += 1
        if buf.peek():
            raise buf.error("unexpected data after the end of the JSON array")


def iter_jsonl(path: str | Path) -> Iterator[JsonItem]:
    """Yield the JSON value on each non-blank line of a JSON-lines file."""
    path = Path(path)
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise DataFormatError(path, f"cannot open file ({exc.strerror})") from None
    with handle:
        index = 0
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                value = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                if "UTF-8" in exc.msg:
                    problem = "not valid UTF-8 text"
                else:
                    problem = f"malformed JSON ({exc.msg})"
                if not raw.endswith(b"\n"):
                    problem += "; the last line is incomplete (truncated file?)"
                raise DataFormatError(path, problem, line=number, column=exc.colno) from None
            if b"\\u0000" in raw:
                found = unstorable_text(value)
                if found is not None:
                    raise DataFormatError(path, found[1], line=number, field=found[0] or None)
            yield JsonItem(index, number, 1, value)
            index += 1


def read_json(path: str | Path) -> Any:
    """Read a whole (small) JSON document, with a clear error when it is malformed."""
    path = Path(path)
    try:
        return orjson.loads(path.read_bytes())
    except OSError as exc:
        raise DataFormatError(path, f"cannot read file ({exc.strerror})") from None
    except orjson.JSONDecodeError as exc:
        problem = f"malformed JSON ({exc.msg})"
        if exc.pos >= len(exc.doc) - 1:
            problem += "; the file ends too early (truncated?)"
        raise DataFormatError(path, problem, line=exc.lineno, column=exc.colno) from None
