"""The lifelong database of traced repositories (SQLite or PostgreSQL through SQLAlchemy).

Names are loaded on first use, so importing this package does not import SQLAlchemy."""

from __future__ import annotations

from typing import TYPE_CHECKING

from leanloop.lazy import lazy_exports

_EXPORTS = {
    "DatabaseStats": "leanloop.database.stats",
    "DynamicDatabase": "leanloop.database.dynamic",
    "RepositoryStats": "leanloop.database.stats",
    "SplitConfig": "leanloop.database.splits",
}

__all__ = list(_EXPORTS)

if TYPE_CHECKING:  # what type checkers see; at run time a name loads on first use
    from leanloop.database.dynamic import DynamicDatabase as DynamicDatabase
    from leanloop.database.splits import SplitConfig as SplitConfig
    from leanloop.database.stats import DatabaseStats as DatabaseStats
    from leanloop.database.stats import RepositoryStats as RepositoryStats
else:
    __getattr__ = lazy_exports(__name__, _EXPORTS)
