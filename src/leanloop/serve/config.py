"""``ServeConfig``: the model server's configuration (its models and their providers, the progress
model, Lean verification, limits, security), loaded from YAML or JSON with one-line errors that
name the file and the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from leanloop.configfile import explain, read_config_file
from leanloop.data.prompt import PromptFormat
from leanloop.errors import DataFormatError
from leanloop.lean.backends import lean_backend
from leanloop.lean.sandbox import SandboxConfig
from leanloop.ml.generation import DecodingOptions

Provider = Literal["hf", "encoder", "openai", "anthropic", "gemini"]
Kind = Literal["generator", "encoder"]

#: The providers whose models run in this process.
LOCAL_PROVIDERS = ("hf", "encoder")

_STRICT = ConfigDict(extra="forbid", frozen=True)


class ModelConfig(BaseModel):
    """One model the server offers, under ``name``."""

    model_config = _STRICT

    name: str = Field(
        min_length=1,
        description="The name clients ask for (Lean Copilot's ExternalGenerator.name, the "
        "OpenAI 'model').",
    )
    provider: Provider = Field(
        description="hf: a local causal LM (leanloop checkpoint, trainer output directory, LoRA "
        "adapter, packaged or hub name); encoder: a local retriever checkpoint or Hugging Face "
        "encoder; openai: any OpenAI-compatible endpoint (OpenAI, vLLM, ...); anthropic; gemini."
    )
    kind: Kind | None = Field(
        default=None,
        description="generator or encoder; follows from the provider (encoder for 'encoder', "
        "generator otherwise) and may be left out.",
    )
    model: str = Field(
        min_length=1,
        description="A local path or a model id (hub name, packaged name, or the provider's "
        "model id).",
    )
    base_url: str | None = Field(
        default=None,
        description="The provider's endpoint (e.g. http://localhost:8000/v1 for vLLM); the "
        "official default when left out.",
    )
    api_key_env: str | None = Field(
        default=None,
        description="The environment variable holding the provider's API key (the key itself "
        "never goes in the file); the client's own variable when left out.",
    )
    timeout: float = Field(default=60.0, gt=0, description="Seconds allowed for one upstream call.")
    retries: int = Field(
        default=2, ge=0, le=10, description="Retries of a failed upstream call, with backoff."
    )
    num_samples: int = Field(
        default=8,
        ge=1,
        le=64,
        description="Tactics returned by /generate when the request says none.",
    )
    temperature: float = Field(
        default=0.7,
        ge=0,
        le=2,
        description="Sampling temperature of remote providers for /generate (Anthropic's "
        "client of this version sends none: the model's default applies).",
    )
    max_tokens: int = Field(
        default=128,
        ge=1,
        description="Tokens a reply may have at most: per candidate of a remote provider; for "
        "a local model, the default and the limit of /v1/chat/completions' max_tokens.",
    )
    max_concurrency: int = Field(
        default=8,
        ge=1,
        description="Requests a remote provider serves at once (each makes one upstream call, "
        "or one per sample for Anthropic and per 8 for Gemini); more wait for a turn.",
    )
    decoding: DecodingOptions = Field(
        default_factory=DecodingOptions,
        description="Decoding of local generators (method, beams, samples, token limits, "
        "batch size) for /generate.",
    )
    prompt_format: PromptFormat | None = Field(
        default=None,
        description="The system prompt; default: the one the checkpoint was trained with, "
        "else leanloop's.",
    )

    @model_validator(mode="after")
    def _kind_follows_provider(self) -> ModelConfig:
        implied = "encoder" if self.provider == "encoder" else "generator"
        if self.kind is None:
            object.__setattr__(self, "kind", implied)
        elif self.kind != implied:
            raise ValueError(
                f"provider '{self.provider}' gives kind '{implied}', not '{self.kind}'"
            )
        return self

    @property
    def local(self) -> bool:
        """Whether the model runs in the server's process (``hf``, ``encoder``)."""
        return self.provider in LOCAL_PROVIDERS


class LeanConfig(BaseModel):
    """Where /verify checks code: a Lean project with the Lean REPL (or Pantograph) built in
    it."""

    model_config = _STRICT

    project: Path = Field(description="The Lean project (its lakefile's directory).")
    backend: str = Field(
        default="repl",
        description="The Lean backend that checks code: repl (the Lean REPL) or pantograph "
        "(Pantograph: no infotree, so /verify refuses infotree_type).",
    )
    repl: Path | None = Field(
        default=None,
        description="The REPL executable; default: $LEANLOOP_REPL, the project's Lake "
        "packages, then the PATH.",
    )
    pantograph: Path | None = Field(
        default=None,
        description="The pantograph-repl executable (backend: pantograph); default: "
        "$LEANLOOP_PANTOGRAPH, the project's Lake packages, then the PATH.",
    )
    max_repls: int = Field(default=2, ge=1, description="Lean REPL processes at most.")
    max_uses: int = Field(
        default=100, ge=1, description="Checks per REPL process before it is replaced."
    )
    timeout: float = Field(
        default=300.0,
        gt=0,
        description="Seconds allowed per check at most (a request may ask less).",
    )
    memory_limit_mb: float | None = Field(
        default=8192, gt=0, description="Memory per REPL process; one that uses more is stopped."
    )
    sandbox: SandboxConfig = Field(
        default_factory=SandboxConfig,
        description="The sandbox of the REPL processes (no network, a read-only file system, "
        "no new processes, limits; see docs/sandbox.md). On by default; 'enabled: false' (or "
        "LEANLOOP_SANDBOX=off) turns it off.",
    )

    _backend = field_validator("backend")(lean_backend)

    @property
    def executable(self) -> Path | None:
        """The configured executable of the backend (None: looked for)."""
        return self.repl if self.backend == "repl" else self.pantograph


class ServeConfig(BaseModel):
    """The whole server: the models it offers, Lean verification, where it listens and its
    limits. ``leanloop serve --config FILE`` reads it (``ServeConfig.load``).
    """

    model_config = _STRICT

    models: list[ModelConfig] = Field(
        default_factory=list, description="The models offered, each under its own name."
    )
    progress_model: Path | None = Field(
        default=None,
        description="A trained progress model for use_reward; default: $LEANPROGRESS_MODEL.",
    )
    lean: LeanConfig | None = Field(default=None, description="Lean verification (/verify).")
    host: str = Field(default="127.0.0.1", description="Address to listen on.")
    port: int = Field(default=23337, ge=0, le=65535, description="Port (Lean Copilot's default).")
    preload: bool = Field(
        default=False,
        description="Load the local models at startup instead of on their first request.",
    )
    max_queue: int = Field(
        default=64,
        ge=1,
        description="Requests per model waiting or running at once; more are refused with 429.",
    )
    max_queue_wait: float = Field(
        default=30.0,
        gt=0,
        description="Seconds a request may wait for its turn at its model; when they run out it "
        "is refused with 503 and Retry-After at once (the batch running does not delay it).",
    )
    max_body_bytes: int = Field(
        default=1_048_576, ge=1024, description="Largest request body accepted (413 beyond)."
    )
    api_key_env: str | None = Field(
        default=None,
        description="The environment variable holding this server's API key; when set, "
        "requests must send it (Authorization: Bearer KEY, or X-API-Key: KEY).",
    )
    cors_origins: list[str] = Field(
        default_factory=list,
        description="Origins allowed to call the server from a browser ('*' for any).",
    )
    shutdown_timeout: float = Field(
        default=30.0,
        gt=0,
        description="The grace period on shutdown (SIGTERM, Ctrl-C): seconds the requests "
        "running may take to finish; queued and new requests get 503 at once, and the requests "
        "still running when it ends get 503.",
    )

    @model_validator(mode="after")
    def _unique_names(self) -> ServeConfig:
        seen: set[str] = set()
        for model in self.models:
            if model.name in seen:
                raise ValueError(f"two models are named '{model.name}'")
            seen.add(model.name)
        return self

    def model(self, name: str) -> ModelConfig | None:
        """The model offered under a name.

        Args:
            name: The name clients ask for.

        Returns:
            Its configuration; None when no model has that name.
        """
        return next((m for m in self.models if m.name == name), None)

    @classmethod
    def from_dict(cls, data: Any, source: str = "the server configuration") -> ServeConfig:
        """A configuration from plain data.

        Args:
            data: A mapping of the fields (None for every default).
            source: What errors name as the data's origin.

        Returns:
            The configuration.

        Raises:
            ConfigError: Fields are unknown or have values they cannot take (each problem in
                one line naming ``source``, the line and the field).
        """
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise DataFormatError(source, "expected a mapping of field names to values")
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise explain(exc, cls, source, data) from None

    @classmethod
    def load(cls, path: str | Path) -> ServeConfig:
        """The configuration in a YAML or JSON file.

        Args:
            path: The file.

        Returns:
            The configuration.

        Raises:
            DataFormatError: The file is missing or not YAML/JSON.
            LeanloopError: A field is wrong (naming the file and the field).
        """
        return cls.from_dict(read_config_file(path), str(path))
