"""Where leanloop keeps its files and which database it uses, read from the environment."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel


class Settings(BaseModel):
    """User-level settings: ``LEANLOOP_DATA_DIR``, ``LEANLOOP_CACHE_DIR`` and ``LEANLOOP_DB``."""

    data_dir: Path
    cache_dir: Path
    database: str | None = None

    @classmethod
    def from_env(cls) -> Settings:
        import platformdirs

        data_dir = os.environ.get("LEANLOOP_DATA_DIR") or platformdirs.user_data_dir("leanloop")
        cache_dir = os.environ.get("LEANLOOP_CACHE_DIR") or platformdirs.user_cache_dir("leanloop")
        return cls(
            data_dir=Path(data_dir).expanduser(),
            cache_dir=Path(cache_dir).expanduser(),
            database=os.environ.get("LEANLOOP_DB") or None,
        )

    @property
    def default_database(self) -> str:
        """``LEANLOOP_DB`` if set, otherwise a SQLite file in the data directory."""
        return self.database or str(self.data_dir / "leanloop.db")
