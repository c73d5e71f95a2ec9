"""LeanDojo-v2's package on leanloop: its module paths (``lean_dojo_v2.agent.hf_agent``,
``lean_dojo_v2.trainer.sft_trainer``, ``lean_dojo_v2.lean_agent.config``,
``lean_dojo_v2.lean_progress``, ...), names and call forms, each a thin mapping onto leanloop's
public API (``docs/migrating.md`` maps every name). Importing it loads nothing heavy.

Where leanloop differs on purpose (the database is never wiped, a proof counts only when Lean
accepted it, local work needs no GitHub token), the package says so once per process, on
stderr, when one of its agents, databases or provers is first made; ``quiet()`` or
``LEANLOOP_COMPAT_QUIET=1`` silences it.
"""

from __future__ import annotations

from lean_dojo_v2._notice import note_differences, quiet

__version__ = "0.1.0"
#: The LeanDojo-v2 release whose names and call forms this package reproduces.
LEANDOJO_V2_VERSION = "1.0.9"

__all__ = ["LEANDOJO_V2_VERSION", "__version__", "note_differences", "quiet"]
