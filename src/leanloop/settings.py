"""The one place that reads leanloop's environment variables (``LEANLOOP_*``, ``LEANPROGRESS_*``
and the few of other tools leanloop honours), read when asked for, never at import time."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict

_APP = "leanloop"


def _path(value: str | None) -> Path | None:
    return Path(value).expanduser() if value else None


def _checkout_fixtures() -> Path | None:
    """``../shared/fixtures`` beside a source checkout of leanloop (what ``make`` passes), when
    it is there: a command started by hand finds what ``make run`` uses."""
    root = Path(__file__).resolve().parents[2]
    candidate = root.parent / "shared" / "fixtures"
    return candidate if (root / "pyproject.toml").is_file() and candidate.is_dir() else None


class Settings(BaseModel):
    """User-level settings, each from one environment variable:

    - ``data_dir`` (``LEANLOOP_DATA_DIR``): where the default database lives;
    - ``cache_dir`` (``LEANLOOP_CACHE_DIR``): clones, trace caches, converted models, downloads;
    - ``database`` (``LEANLOOP_DB``): the database used when none is given;
    - ``fixtures`` (``LEANLOOP_FIXTURES``, default ``../shared/fixtures`` beside a source
      checkout when it is there, as ``make`` passes it): a directory of recorded Lean data (the
      main job's default dataset is its ``leandojo_benchmark_4``);
    - ``benchmarks`` (``LEANLOOP_BENCHMARKS``): a directory of benchmark files (``minif2f.jsonl``,
      ``proofnet.jsonl``) that ``--benchmark NAME`` finds there;
    - ``device`` (``LEANLOOP_DEVICE``): ``cpu`` keeps models off an accelerator;
    - ``repl`` / ``pantograph`` (``LEANLOOP_REPL`` / ``LEANLOOP_PANTOGRAPH``): the Lean-side
      server executables, when they are not in the project's Lake packages or on the PATH;
    - ``progress_model`` (``LEANPROGRESS_MODEL``): a trained progress model's directory;
    - ``serve_config`` (``LEANLOOP_SERVE_CONFIG``): the model server's configuration file;
    - ``elan_home`` (``ELAN_HOME``, default ``~/.elan``): where elan keeps toolchains;
    - ``github_token`` (``GITHUB_TOKEN`` or ``GITHUB_ACCESS_TOKEN``): only for private clones.
    """

    model_config = ConfigDict(frozen=True)

    data_dir: Path
    cache_dir: Path
    database: str | None = None
    fixtures: Path | None = None
    benchmarks: Path | None = None
    device: str | None = None
    repl: Path | None = None
    pantograph: Path | None = None
    progress_model: Path | None = None
    serve_config: Path | None = None
    elan_home: Path
    github_token: str | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        import platformdirs

        env = os.environ if environ is None else environ

        def get(name: str) -> str | None:
            value = env.get(name, "").strip()
            return value or None

        return cls(
            data_dir=_path(get("LEANLOOP_DATA_DIR"))
            or Path(platformdirs.user_data_dir("leanloop")),
            cache_dir=_path(get("LEANLOOP_CACHE_DIR"))
            or Path(platformdirs.user_cache_dir("leanloop")),
            database=get("LEANLOOP_DB"),
            fixtures=_path(get("LEANLOOP_FIXTURES")) or _checkout_fixtures(),
            benchmarks=_path(get("LEANLOOP_BENCHMARKS")),
            device=(get("LEANLOOP_DEVICE") or "").lower() or None,
            repl=_path(get("LEANLOOP_REPL")),
            pantograph=_path(get("LEANLOOP_PANTOGRAPH")),
            progress_model=_path(get("LEANPROGRESS_MODEL")),
            serve_config=_path(get("LEANLOOP_SERVE_CONFIG")),
            elan_home=_path(get("ELAN_HOME")) or Path.home() / ".elan",
            github_token=get("GITHUB_TOKEN") or get("GITHUB_ACCESS_TOKEN"),
        )

    @staticmethod
    def variable(name: str, environ: Mapping[str, str] | None = None) -> str | None:
        """The value of a variable the user names (e.g. the one holding a model endpoint's API
        key), None when it is unset or empty."""
        env = os.environ if environ is None else environ
        return env.get(name, "").strip() or None

    @property
    def default_database(self) -> str:
        """``LEANLOOP_DB`` if set, otherwise a SQLite file in the data directory."""
        return self.database or str(self.data_dir / "leanloop.db")
