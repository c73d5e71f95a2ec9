"""The lifelong database of traced repositories (SQLite or PostgreSQL through SQLAlchemy)."""

from leanloop.database.dynamic import DynamicDatabase
from leanloop.database.splits import SplitConfig
from leanloop.database.stats import DatabaseStats, RepositoryStats

__all__ = ["DatabaseStats", "DynamicDatabase", "RepositoryStats", "SplitConfig"]
