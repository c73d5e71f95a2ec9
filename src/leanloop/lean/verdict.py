"""Lean's verdict on code, as one type: ``Outcome``. On code as a whole (``verdict_of``, read
from the messages Lean printed) it is accepted, rejected, or accepted only thanks to ``sorry``;
on one declaration (``lean.audit.judge``) it may also be refused by leanloop's soundness policy,
or broken (the code around the declaration does not elaborate)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from enum import StrEnum
from typing import Protocol

# "declaration uses 'sorry'" (older Lean) and "declaration uses `sorry`" (newer).
_SORRY_WARNING = re.compile(r"declaration uses ['`]sorry['`]")


class Outcome(StrEnum):
    """Lean's verdict on code: on code as a whole (``verdict_of``: ``accepted``, ``rejected``,
    ``sorry``), or on one declaration of an ``AuditedCode`` (``lean.audit.judge``: any of
    them). How an attempt ends on it is ``data.records.AttemptStatus.judged``."""

    ACCEPTED = "accepted"  # no error, no sorry (in the declaration: its axioms allowed too)
    REJECTED = "rejected"  # Lean reported an error (in the declaration)
    SORRY = "sorry"  # accepted only thanks to a sorry (in the declaration)
    REFUSED = "refused"  # refused by the soundness policy: an axiom not allowed (or none
    # reported), Lean's account of what it elaborated, or the screen
    BROKEN = "broken"  # an error outside the declaration: the code around it does not elaborate


class _MessageLike(Protocol):
    @property
    def severity(self) -> str: ...
    @property
    def data(self) -> str: ...


def is_sorry_warning(message: _MessageLike) -> bool:
    """Whether ``message`` is Lean's warning that a declaration uses ``sorry``."""
    return message.severity == "warning" and bool(_SORRY_WARNING.search(message.data))


def verdict_of(messages: Iterable[_MessageLike], *, sorries: int = 0) -> Outcome:
    """Lean's verdict on code as a whole: ``rejected`` if Lean reported an error; ``sorry`` if
    it warned about a ``sorry`` or left sorry goals (``sorries``); ``accepted`` otherwise (other
    warnings and infos, e.g. linters, do not matter)."""
    messages = list(messages)
    if any(m.severity == "error" for m in messages):
        return Outcome.REJECTED
    if sorries or any(is_sorry_warning(m) for m in messages):
        return Outcome.SORRY
    return Outcome.ACCEPTED
