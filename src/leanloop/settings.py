"""The one place that reads leanloop's environment variables (``LEANLOOP_*``, ``LEANPROGRESS_*``
and the few of other tools leanloop honours), read when asked for, never at import time."""

from __future__ import annotations

import os
from collections.abc import Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, Field, ValidationError, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from leanloop.errors import LeanloopError

_TRUE = ("1", "true", "yes", "on")

#: The environment ``Settings.from_env`` was given (``os.environ`` when none was).
_ENVIRON: ContextVar[Mapping[str, str] | None] = ContextVar("leanloop_environ", default=None)


def _checkout_fixtures() -> Path | None:
    """``../shared/fixtures`` beside a source checkout of leanloop (what ``make`` passes), when
    it is there: a command started by hand finds what ``make run`` uses."""
    root = Path(__file__).resolve().parents[2]
    candidate = root.parent / "shared" / "fixtures"
    return candidate if (root / "pyproject.toml").is_file() and candidate.is_dir() else None


def _user_dir(kind: str) -> Path:
    import platformdirs

    return Path(getattr(platformdirs, f"user_{kind}_dir")("leanloop"))


def _names(field: FieldInfo) -> tuple[str, ...]:
    """The environment variables a field is read from, in the order they are tried."""
    alias = field.validation_alias
    if isinstance(alias, AliasChoices):
        return tuple(choice for choice in alias.choices if isinstance(choice, str))
    return (alias,) if isinstance(alias, str) else ()


class _Environment(PydanticBaseSettingsSource):
    """Each field's variables as an environment holds them; a variable that is unset, empty
    or blank counts as unset (so a second name of the same field is tried)."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        super().__init__(settings_cls)
        self.environ = environ

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        for name in _names(field):
            value = self.environ.get(name, "").strip()
            if value:
                return value, name, False
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for field_name, field in self.settings_cls.model_fields.items():
            value, name, _ = self.get_field_value(field, field_name)
            if value is not None:
                values[name] = value
        return values


class Settings(BaseSettings):
    """User-level settings, each from one environment variable (two for the GitHub token).

    An unset, empty or blank variable means the default. ``Settings.from_env()`` reads the
    process's environment, ``Settings.from_env(mapping)`` only the mapping; a value that does
    not fit is a `LeanloopError` naming the variable. The settings are frozen.

    Attributes:
        data_dir: ``LEANLOOP_DATA_DIR``: where the default database lives (default: the
            user's data directory for leanloop, e.g. ``~/.local/share/leanloop``).
        cache_dir: ``LEANLOOP_CACHE_DIR``: clones, trace caches, converted models, downloads
            (default: the user's cache directory for leanloop, e.g. ``~/.cache/leanloop``).
        database: ``LEANLOOP_DB``: the database used when none is given (see
            `default_database`).
        fixtures: ``LEANLOOP_FIXTURES``: a directory of recorded Lean data (the main job's
            default dataset is its ``leandojo_benchmark_4``); default ``../shared/fixtures``
            beside a source checkout when it is there, as ``make`` passes it.
        benchmarks: ``LEANLOOP_BENCHMARKS``: a directory of benchmark files
            (``minif2f.jsonl``, ``proofnet.jsonl``) that ``--benchmark NAME`` finds there.
        device: ``LEANLOOP_DEVICE``, lower-cased: ``cpu`` keeps models off an accelerator.
        repl: ``LEANLOOP_REPL``: the Lean REPL executable, when it is not in the project's
            Lake packages or on the PATH.
        pantograph: ``LEANLOOP_PANTOGRAPH``: the Pantograph executable, likewise.
        progress_model: ``LEANPROGRESS_MODEL``: a trained progress model's directory.
        serve_config: ``LEANLOOP_SERVE_CONFIG``: the model server's configuration file.
        elan_home: ``ELAN_HOME``: where elan keeps toolchains (default ``~/.elan``).
        github_token: ``GITHUB_TOKEN``, or ``GITHUB_ACCESS_TOKEN`` when that one is unset:
            only for private clones.
        hf_token: ``HF_TOKEN``: the key of Hugging Face's router (Inference Providers), which
            ``ExternalProver`` uses for hub model names, as LeanDojo-v2 does.
        compat_quiet: ``LEANLOOP_COMPAT_QUIET``: true (``1``, ``true``, ``yes`` or ``on``)
            silences the one line the LeanDojo-v2 compatibility package writes about where
            leanloop differs.
        hub_offline: ``HF_HUB_OFFLINE``: true (``1``, ``true``, ``yes`` or ``on``, as the
            Hugging Face libraries read it) when the model hub must not be contacted.
        threads: ``OMP_NUM_THREADS``: how many CPU threads torch uses when a caller asks for
            the configured count (the first entry of an OpenMP list such as ``4,2``).
        sandbox: ``LEANLOOP_SANDBOX``: ``off`` (or ``0``, ``false``, ``no``) runs the Lean
            processes that check code without the sandbox (default on; see
            ``docs/sandbox.md``). Any other value than on/off words is refused.
        sandbox_subprocesses: ``LEANLOOP_SANDBOX_SUBPROCESSES``: ``on`` lets sandboxed Lean
            processes start processes (``bv_decide`` runs a SAT solver); default off.
    """

    model_config = SettingsConfigDict(frozen=True, populate_by_name=True, extra="forbid")

    data_dir: Path = Field(
        default_factory=lambda: _user_dir("data"), validation_alias="LEANLOOP_DATA_DIR"
    )
    cache_dir: Path = Field(
        default_factory=lambda: _user_dir("cache"), validation_alias="LEANLOOP_CACHE_DIR"
    )
    database: str | None = Field(default=None, validation_alias="LEANLOOP_DB")
    fixtures: Path | None = Field(
        default_factory=_checkout_fixtures, validation_alias="LEANLOOP_FIXTURES"
    )
    benchmarks: Path | None = Field(default=None, validation_alias="LEANLOOP_BENCHMARKS")
    device: str | None = Field(default=None, validation_alias="LEANLOOP_DEVICE")
    repl: Path | None = Field(default=None, validation_alias="LEANLOOP_REPL")
    pantograph: Path | None = Field(default=None, validation_alias="LEANLOOP_PANTOGRAPH")
    progress_model: Path | None = Field(default=None, validation_alias="LEANPROGRESS_MODEL")
    serve_config: Path | None = Field(default=None, validation_alias="LEANLOOP_SERVE_CONFIG")
    elan_home: Path = Field(
        default_factory=lambda: Path.home() / ".elan", validation_alias="ELAN_HOME"
    )
    github_token: str | None = Field(
        default=None, validation_alias=AliasChoices("GITHUB_TOKEN", "GITHUB_ACCESS_TOKEN")
    )
    hf_token: str | None = Field(default=None, validation_alias="HF_TOKEN")
    compat_quiet: bool = Field(default=False, validation_alias="LEANLOOP_COMPAT_QUIET")
    hub_offline: bool = Field(default=False, validation_alias="HF_HUB_OFFLINE")
    threads: int | None = Field(default=None, ge=0, validation_alias="OMP_NUM_THREADS")
    sandbox: bool = Field(default=True, validation_alias="LEANLOOP_SANDBOX")
    sandbox_subprocesses: bool = Field(
        default=False, validation_alias="LEANLOOP_SANDBOX_SUBPROCESSES"
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # values given to the constructor first, then the environment (no .env, no secrets)
        environ = _ENVIRON.get()
        return init_settings, _Environment(settings_cls, os.environ if environ is None else environ)

    @field_validator(
        "data_dir",
        "cache_dir",
        "fixtures",
        "benchmarks",
        "repl",
        "pantograph",
        "progress_model",
        "serve_config",
        "elan_home",
        mode="after",
    )
    @classmethod
    def _expand_user(cls, value: Path | None) -> Path | None:
        return value.expanduser() if value is not None else None

    @field_validator("device", mode="after")
    @classmethod
    def _lower(cls, value: str | None) -> str | None:
        return value.lower() if value else None

    @field_validator("hub_offline", "compat_quiet", mode="before")
    @classmethod
    def _truthy(cls, value: Any) -> Any:
        return value.strip().lower() in _TRUE if isinstance(value, str) else value

    @field_validator("threads", mode="before")
    @classmethod
    def _first_of_list(cls, value: Any) -> Any:
        return value.split(",", 1)[0].strip() if isinstance(value, str) else value

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """The settings an environment gives.

        Args:
            environ: The variables to read; ``None`` reads the process's environment
                (``os.environ``). Only the variables of the fields are looked at.

        Returns:
            The settings, every unset variable at its default.

        Raises:
            LeanloopError: A variable holds a value its field cannot take (e.g.
                ``OMP_NUM_THREADS=many``); the message names the variable.
        """
        token = _ENVIRON.set(environ)
        try:
            return cls()
        except ValidationError as exc:
            error = exc.errors()[0]
            name = ".".join(str(part) for part in error["loc"]) or "the environment"
            given = error.get("input")
            raise LeanloopError(
                f"environment variable {name}={given!r}: {error['msg'].lower()}",
                hint=f"set {name} to a valid value, or unset it",
            ) from None
        finally:
            _ENVIRON.reset(token)

    @staticmethod
    def variable(name: str, environ: Mapping[str, str] | None = None) -> str | None:
        """The value of a variable the user names (e.g. the one holding a model endpoint's API
        key), or one another program sets (a launcher's ``RANK``, ``WORLD_SIZE``,
        ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``).

        Args:
            name: The variable's name.
            environ: The variables to read; ``None`` reads the process's environment.

        Returns:
            The value without surrounding blanks; ``None`` when it is unset or blank.
        """
        env = os.environ if environ is None else environ
        return env.get(name, "").strip() or None

    @staticmethod
    def process_environment() -> dict[str, str]:
        """The whole environment of this process, as a process it starts inherits it (the
        sandbox of Lean processes passes on only part of it).

        Returns:
            A copy of the variables.
        """
        return dict(os.environ)

    @property
    def default_database(self) -> str:
        """``LEANLOOP_DB`` if set, otherwise a SQLite file (``leanloop.db``) in the data
        directory."""
        return self.database or str(self.data_dir / "leanloop.db")
