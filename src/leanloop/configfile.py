"""Configuration files and the one configuration idiom: a file (YAML, or JSON, which YAML also
reads) read into plain data with errors naming the file and line, and ``ConfigBase``, the pydantic
dataclass every component's ``*Config`` derives from (help text on every field, checked when made
or changed, loaded from and saved to YAML or JSON, a bad value reported as one line naming the
file or class and the field)."""

from __future__ import annotations

import dataclasses
import difflib
import json
from collections.abc import Mapping
from os import PathLike
from pathlib import Path
from typing import Any, Self, cast

from pydantic import ConfigDict, TypeAdapter, ValidationError, ValidationInfo, model_validator
from pydantic.dataclasses import dataclass

from leanloop.atomic import write_text_atomic
from leanloop.errors import DataFormatError, LeanloopError

#: The pydantic settings every configuration uses.
CONFIG = ConfigDict(extra="forbid", validate_assignment=True)


def read_config_file(path: str | PathLike[str]) -> Any:
    """The data in a YAML or JSON file (None for an empty file)."""
    import yaml

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataFormatError(path, "the configuration file does not exist") from None
    except OSError as exc:
        raise DataFormatError(
            path, f"cannot read the configuration file ({exc.strerror})"
        ) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise DataFormatError(
            path,
            f"malformed YAML/JSON ({getattr(exc, 'problem', None) or exc})",
            line=mark.line + 1 if mark else None,
            column=mark.column + 1 if mark else None,
        ) from None


@dataclass(config=CONFIG)
class ConfigBase:
    """Base of the configurations (``dataclasses.asdict`` and ``dataclasses.replace`` work on
    them). A subclass is a ``pydantic.dataclasses.dataclass(config=CONFIG)`` and checks fields
    that depend on each other in a ``model_validator(mode="after")`` that raises
    ``self.invalid(info, message)``.

    A configuration is checked when it is made and when a field is changed; a value that does
    not fit is a ``LeanloopError`` of one line naming the file (or class) and the field.
    """

    @model_validator(mode="wrap")
    @classmethod
    def _report(cls, data: Any, handler: Any, info: ValidationInfo) -> Any:
        try:
            return handler(data)
        except ValidationError as exc:
            raise _explain(cls, exc, _source(cls, info)) from None

    @classmethod
    def invalid(cls, info: ValidationInfo, message: str, hint: str | None = None) -> LeanloopError:
        """The error for values that do not fit together, naming where they came from.

        Args:
            info: The validation's information (it knows the file or class).
            message: What does not fit.
            hint: What to do instead.

        Returns:
            The error, for the validator to raise.
        """
        return LeanloopError(f"{_source(cls, info)}: {message}", hint=hint)

    # -- reading -----------------------------------------------------------------------------

    @classmethod
    def from_dict(cls, data: Any, source: str | None = None) -> Self:
        """A configuration from a mapping of field names to values.

        Args:
            data: The mapping (None for every default).
            source: What errors name as the values' origin (default: the class's name).

        Returns:
            The configuration.

        Raises:
            LeanloopError: ``data`` is not a mapping, names an unknown field, or holds a
                value a field cannot take (one line naming ``source`` and the field).
        """
        if data is None:
            data = {}
        where = source or cls.__name__
        if not isinstance(data, Mapping):
            raise LeanloopError(f"{where}: expected a mapping of field names to values")
        return TypeAdapter(cls).validate_python(dict(data), context={"source": where})

    @classmethod
    def from_yaml(cls, file_path: str | Path) -> Self:
        """A configuration from a YAML file of its fields.

        Args:
            file_path: The file.

        Returns:
            The configuration.

        Raises:
            DataFormatError: The file is missing or not YAML (naming its line).
            LeanloopError: A field is unknown or wrong (naming the file and the field).
        """
        return cls.from_dict(read_config_file(file_path), str(file_path))

    @classmethod
    def from_json(cls, file_path: str | Path) -> Self:
        """A configuration from a JSON file of its fields (as ``from_yaml``).

        Args:
            file_path: The file.

        Returns:
            The configuration.
        """
        return cls.from_dict(read_config_file(file_path), str(file_path))

    @classmethod
    def load(cls, source: str | PathLike[str] | Mapping[str, Any] | Self, **overrides: Any) -> Self:
        """A configuration from a YAML/JSON file, a mapping or a configuration.

        Args:
            source: A YAML or JSON file, a mapping of fields, or a configuration.
            **overrides: Field values that replace ``source``'s.

        Returns:
            The configuration.

        Raises:
            LeanloopError: The file or a field is wrong (naming the file and the field).
        """
        if isinstance(source, cls):
            return dataclasses.replace(source, **overrides)
        if isinstance(source, Mapping):
            return cls.from_dict({**source, **overrides})
        data = read_config_file(cast("str | PathLike[str]", source))  # mypy keeps Self here
        if data is not None and not isinstance(data, Mapping):
            raise LeanloopError(f"{source}: expected a mapping of field names to values")
        return cls.from_dict({**(data or {}), **overrides}, str(source))

    # -- writing -----------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The fields as plain JSON/YAML values.

        Returns:
            Field name to value (paths as strings).
        """
        return TypeAdapter(type(self)).dump_python(self, mode="json")

    def to_yaml(self, file_path: str | Path) -> Path:
        """Write the configuration as YAML (written aside and renamed into place).

        Args:
            file_path: The file.

        Returns:
            The file's path.
        """
        import yaml

        path = Path(file_path)
        write_text_atomic(path, yaml.safe_dump(self.to_dict(), sort_keys=False))
        return path

    def to_json(self, file_path: str | Path) -> Path:
        """Write the configuration as JSON (written aside and renamed into place).

        Args:
            file_path: The file.

        Returns:
            The file's path.
        """
        path = Path(file_path)
        write_text_atomic(path, json.dumps(self.to_dict(), indent=2) + "\n")
        return path


def field_names(config: type[ConfigBase]) -> list[str]:
    return [field.name for field in dataclasses.fields(config)]


def _source(cls: type, info: ValidationInfo) -> str:
    return (info.context or {}).get("source") or cls.__name__


def _explain(cls: type[ConfigBase], exc: ValidationError, source: str) -> LeanloopError:
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
