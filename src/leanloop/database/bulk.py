"""Bulk work without Python's cycle collector: importing or exporting tens of thousands of
theorems allocates millions of objects that plain reference counting frees (records and rows form
no cycles), while the cycle collector's full passes would scan every live object again and again
as the work goes on — a third of an import's time. The collector is paused for the block and
restored as it was afterwards."""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator


class _Pause:
    """How many blocks (in any thread) want the collector paused, and whether it ran before."""

    lock = threading.Lock()
    depth = 0
    resume = False


@contextlib.contextmanager
def without_cycle_collection() -> Iterator[None]:
    """Run the block with the cycle collector paused; nested and concurrent blocks are counted,
    and it resumes when the last one ends (if it was enabled before the first began)."""
    with _Pause.lock:
        if _Pause.depth == 0:
            _Pause.resume = gc.isenabled()
            gc.disable()
        _Pause.depth += 1
    try:
        yield
    finally:
        with _Pause.lock:
            _Pause.depth -= 1
            if _Pause.depth == 0 and _Pause.resume:
                gc.enable()
