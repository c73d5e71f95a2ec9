"""What the wire models of the routes share."""

from __future__ import annotations

from typing import Any

from pydantic import Field


def omitted_when_null(default: Any = None, **kwargs: Any) -> Any:
    """A field left out of the answer when it is null (as the Lean REPL and LeanDojo-v2 leave
    them out)."""
    return Field(default, exclude_if=lambda value: value is None, **kwargs)
