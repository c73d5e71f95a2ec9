"""Deprecated: ``leanloop.lean.transcript`` (``TranscriptTransport``, ``TranscriptMismatch``);
"replay" names the backend that follows recorded proof transitions. Kept for one release."""

from __future__ import annotations

import warnings
from typing import Any

_RENAMED = {"ReplayTransport": "TranscriptTransport", "ReplayMismatch": "TranscriptMismatch"}


def __getattr__(name: str) -> Any:
    if name not in _RENAMED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import leanloop.lean.transcript as transcript

    new = _RENAMED[name]
    warnings.warn(
        f"leanloop.lean.replay.{name} is deprecated: use leanloop.lean.transcript.{new}",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(transcript, new)
