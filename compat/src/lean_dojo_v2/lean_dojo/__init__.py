"""``lean_dojo_v2.lean_dojo``: ``generate_benchmark`` and ``Pos`` (leanloop's
``leanloop.data.records.Pos``). Tracing itself is leanloop's (``leanloop trace``,
``DynamicDatabase.trace_repository``)."""

from __future__ import annotations

from leanloop.data.records import Pos
from leanloop.database.generate import generate_benchmark

__all__ = ["Pos", "generate_benchmark"]
