"""The one way trainer configurations work: a pydantic dataclass per trainer with help text on
every field, checked when made or changed, loaded from and saved to YAML or JSON, and reporting a
bad value as one line naming the file (or class) and the field."""

from __future__ import annotations

import dataclasses
import difflib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Self

from pydantic import ConfigDict, TypeAdapter, ValidationError, ValidationInfo, model_validator
from pydantic.dataclasses import dataclass

from leanloop.atomic import write_text_atomic
from leanloop.configfile import read_config_file
from leanloop.errors import LeanloopError

#: The pydantic settings every trainer configuration uses.
CONFIG = ConfigDict(extra="forbid", validate_assignment=True)


@dataclass(config=CONFIG)
class TrainerConfig:
    """Base of the trainer configurations (``dataclasses.asdict`` and ``dataclasses.replace``
    work on them). A subclass checks fields that depend on each other in a
    ``model_validator(mode="after")`` that raises ``self.invalid(info, message)``."""

    @model_validator(mode="wrap")
    @classmethod
    def _report(cls, data: Any, handler: Any, info: ValidationInfo) -> Any:
        try:
            return handler(data)
        except ValidationError as exc:
            raise _explain(cls, exc, _source(cls, info)) from None

    @classmethod
    def invalid(cls, info: ValidationInfo, message: str, hint: str | None = None) -> LeanloopError:
        """The error for values that do not fit together, naming where they came from."""
        return LeanloopError(f"{_source(cls, info)}: {message}", hint=hint)

    # -- reading -----------------------------------------------------------------------------

    @classmethod
    def from_dict(cls, data: Any, source: str | None = None) -> Self:
        """A configuration from a mapping of field names to values; errors name ``source``."""
        if data is None:
            data = {}
        where = source or cls.__name__
        if not isinstance(data, Mapping):
            raise LeanloopError(f"{where}: expected a mapping of field names to values")
        return TypeAdapter(cls).validate_python(dict(data), context={"source": where})

    @classmethod
    def from_yaml(cls, file_path: str | Path) -> Self:
        return cls.from_dict(read_config_file(file_path), str(file_path))

    @classmethod
    def from_json(cls, file_path: str | Path) -> Self:
        return cls.from_dict(read_config_file(file_path), str(file_path))

    @classmethod
    def load(cls, source: str | Path | Mapping[str, Any] | Self, **overrides: Any) -> Self:
        """A configuration from a YAML/JSON file, a mapping or a configuration, with
        ``overrides`` (field values) on top."""
        if isinstance(source, cls):
            return dataclasses.replace(source, **overrides)
        if isinstance(source, Mapping):
            return cls.from_dict({**source, **overrides})
        data = read_config_file(source)
        if data is not None and not isinstance(data, Mapping):
            raise LeanloopError(f"{source}: expected a mapping of field names to values")
        return cls.from_dict({**(data or {}), **overrides}, str(source))

    # -- writing -----------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The fields as plain JSON/YAML values (paths as strings)."""
        return TypeAdapter(type(self)).dump_python(self, mode="json")

    def to_yaml(self, file_path: str | Path) -> Path:
        import yaml

        path = Path(file_path)
        write_text_atomic(path, yaml.safe_dump(self.to_dict(), sort_keys=False))
        return path

    def to_json(self, file_path: str | Path) -> Path:
        path = Path(file_path)
        write_text_atomic(path, json.dumps(self.to_dict(), indent=2) + "\n")
        return path


def field_names(config: type[TrainerConfig]) -> list[str]:
    return [field.name for field in dataclasses.fields(config)]


def trainer_arguments(
    config_class: type[TrainerConfig],
    source: str | Path | Mapping[str, Any] | TrainerConfig,
    kwargs: Mapping[str, Any],
) -> dict[str, Any]:
    """A trainer's constructor arguments for ``from_config``: every field of the configuration
    read from ``source`` with the ``kwargs`` naming fields on top, and the other ``kwargs``
    (objects that are not configuration, such as callbacks) as they are."""
    names = field_names(config_class)
    config = config_class.load(source, **{k: v for k, v in kwargs.items() if k in names})
    extra = {k: v for k, v in kwargs.items() if k not in names}
    return {**extra, **{name: getattr(config, name) for name in names}}


def config_field(name: str) -> property:
    """A read-only trainer attribute giving its ``config``'s field ``name`` (trainers keep
    LeanDojo-v2's attribute names this way)."""
    return property(lambda self: getattr(self.config, name), doc=f"``config.{name}``")


def _source(cls: type, info: ValidationInfo) -> str:
    return (info.context or {}).get("source") or cls.__name__


def _explain(cls: type[TrainerConfig], exc: ValidationError, source: str) -> LeanloopError:
    error = exc.errors()[0]
    field = ".".join(str(part) for part in error.get("loc", ())) or "?"
    if error.get("type") in ("extra_forbidden", "unexpected_keyword_argument"):
        close = difflib.get_close_matches(field, field_names(cls), n=1)
        hint = f"did you mean '{close[0]}'?" if close else f"see {cls.__name__} for the fields"
        return LeanloopError(f"{source}: unknown field '{field}'", hint=hint)
    if error.get("type") in ("missing", "missing_argument"):
        return LeanloopError(f"{source}: field '{field}' is missing")
    message = error.get("msg", "invalid value").removeprefix("Value error, ")
    return LeanloopError(
        f"{source}: field '{field}': {message} (got {error.get('input')!r})",
        hint="fix the value or leave the field out to use its default",
    )
