"""``lean_dojo_v2.agent.base_agent``: ``BaseAgent``, leanloop's (``leanloop.agent.BaseAgent``)
with LeanDojo-v2's ``database_path`` (a ``dynamic_database.json`` is imported into leanloop's
database, never overwritten). A subclass implements ``_get_build_deps()`` and
``_setup_prover()``, as in LeanDojo-v2."""

from __future__ import annotations

from typing import Any

from lean_dojo_v2._notice import note_differences
from lean_dojo_v2.database.dynamic_database import DEFAULT_JSON_PATH, database_for
from leanloop.agent.base_agent import BaseAgent as _LeanloopAgent


class BaseAgent(_LeanloopAgent):
    """leanloop's ``BaseAgent``; ``database_path`` defaults to LeanDojo-v2's
    ``dynamic_database.json``, whose repositories (when the file exists) are imported into
    leanloop's default database (see ``lean_dojo_v2.database.DynamicDatabase``); a SQLite file
    or ``postgresql://`` URL is used as leanloop uses it.

    Args:
        database_path: LeanDojo-v2's database file, or a leanloop database.
        **kwargs: leanloop's keyword arguments (``prover_config``, ``data_path``).
    """

    def __init__(self, database_path: Any = DEFAULT_JSON_PATH, **kwargs: Any) -> None:
        note_differences()
        super().__init__(database_for(database_path), **kwargs)


__all__ = ["BaseAgent"]
