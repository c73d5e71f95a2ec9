"""The lifelong database of traced repositories (SQLite or PostgreSQL through SQLAlchemy)."""

from leanloop.database.dynamic import DatabaseStats, DynamicDatabase, RepositoryStats
from leanloop.database.splits import SplitConfig

__all__ = ["DatabaseStats", "DynamicDatabase", "RepositoryStats", "SplitConfig"]
