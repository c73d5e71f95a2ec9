"""What the wire models of the routes share: text that must be valid Unicode, and fields left out
of an answer when they are null."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, Field


def _valid_unicode(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("the text holds an unpaired surrogate (it is not valid Unicode)") from None
    return text


#: A string of a request: JSON allows unpaired surrogates (``"\\ud800"``), models do not.
Text = Annotated[str, AfterValidator(_valid_unicode)]


def omitted_when_null(default: Any = None, **kwargs: Any) -> Any:
    """A field left out of the answer when it is null (as the Lean REPL and LeanDojo-v2 leave
    them out)."""
    return Field(default, exclude_if=lambda value: value is None, **kwargs)
