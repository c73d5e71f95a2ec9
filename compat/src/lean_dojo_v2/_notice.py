"""The one line saying where leanloop differs from LeanDojo-v2 on purpose, written once per
process (logger ``lean_dojo_v2``, WARNING) unless the user opted out."""

from __future__ import annotations

import logging
import threading

log = logging.getLogger("lean_dojo_v2")

#: What the line says.
DIFFERENCES = (
    "lean_dojo_v2 runs on leanloop, which differs on purpose: the database persists and is never "
    "wiped (dynamic_database.json is imported, not overwritten), a proof counts only when Lean "
    "accepted it (without Lean, recorded steps are replayed and nothing is proved), and local "
    "work needs no GitHub token; see leanloop's docs/migrating.md (LEANLOOP_COMPAT_QUIET=1 or "
    "lean_dojo_v2.quiet() silences this line)"
)

_lock = threading.Lock()
_state = {"said": False, "quiet": False}


def quiet() -> None:
    """Never write the line in this process."""
    _state["quiet"] = True


def note_differences() -> bool:
    """Write the line, unless it was written already in this process or the user opted out
    (``quiet()``, or ``LEANLOOP_COMPAT_QUIET`` set true, read through leanloop's settings).

    Returns:
        Whether the line was written now.
    """
    from leanloop.settings import Settings

    with _lock:
        if _state["said"] or _state["quiet"]:
            return False
        _state["said"] = True
    if Settings.from_env().compat_quiet:
        return False
    log.warning(DIFFERENCES)
    return True
