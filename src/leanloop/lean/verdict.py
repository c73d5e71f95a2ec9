"""Lean's verdict on a piece of code, from the messages it printed: accepted, rejected, or
accepted only thanks to ``sorry``."""

from __future__ import annotations

import re
from collections.abc import Iterable
from enum import StrEnum
from typing import Protocol

# "declaration uses 'sorry'" (older Lean) and "declaration uses `sorry`" (newer).
_SORRY_WARNING = re.compile(r"declaration uses ['`]sorry['`]")


class Verdict(StrEnum):
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    CONTAINS_SORRY = "contains_sorry"


class _MessageLike(Protocol):
    @property
    def severity(self) -> str: ...
    @property
    def data(self) -> str: ...


def is_sorry_warning(message: _MessageLike) -> bool:
    return message.severity == "warning" and bool(_SORRY_WARNING.search(message.data))


def verdict_of(messages: Iterable[_MessageLike], *, sorries: int = 0) -> Verdict:
    """Rejected if Lean reported an error; contains sorry if it warned about a ``sorry`` or left
    sorry goals; accepted otherwise (other warnings and infos, e.g. linters, do not matter)."""
    messages = list(messages)
    if any(m.severity == "error" for m in messages):
        return Verdict.REJECTED
    if sorries or any(is_sorry_warning(m) for m in messages):
        return Verdict.CONTAINS_SORRY
    return Verdict.ACCEPTED
