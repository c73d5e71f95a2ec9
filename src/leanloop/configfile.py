"""Configuration files and the one configuration idiom: a file (YAML, or JSON, which YAML also
reads) read into plain data with errors naming the file and line, and ``ConfigBase``, the pydantic
dataclass every component's ``*Config`` derives from (help text on every field, checked when made
or changed, loaded from and saved to YAML or JSON).

Everything wrong with a configuration is reported at once (``ConfigError``), one line per
problem naming the file, the line where the YAML/JSON file has it, the dotted field
(``lora.lora_alph``, ``models[gpt].timeout``) and what was expected; an unknown key is reported
as unknown, with the closest known field of its section as a suggestion. A mapping that holds a
library's keyword arguments (``lora:`` for ``peft.LoraConfig``, ``trl_args:`` for TRL's
configuration) is checked against that library's parameters when the configuration is loaded
(``KeywordsOf``), not when the library is called."""

from __future__ import annotations

import contextvars
import dataclasses
import difflib
import functools
import importlib
import inspect
import json
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from os import PathLike
from pathlib import Path
from typing import Any, Self, Union, cast, get_args, get_origin

from pydantic import (
    BaseModel,
    ConfigDict,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    create_model,
)
from pydantic.dataclasses import dataclass
from pydantic.fields import FieldInfo
from pydantic_core import core_schema

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


def config_lines(path: str | PathLike[str]) -> dict[tuple[str | int, ...], int]:
    """Where each key (and list item) of a YAML or JSON file is: its path of keys and indices
    to its line (1-based); empty when the file cannot be read or parsed."""
    import yaml

    try:
        root = yaml.compose(Path(path).read_text(encoding="utf-8"), Loader=yaml.SafeLoader)
    except (OSError, ValueError, yaml.YAMLError):
        return {}
    lines: dict[tuple[str | int, ...], int] = {}

    def walk(node: Any, at: tuple[str | int, ...]) -> None:
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                here = (*at, str(key.value))
                lines[here] = key.start_mark.line + 1
                walk(value, here)
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                here = (*at, index)
                lines[here] = item.start_mark.line + 1
                walk(item, here)

    if root is not None:
        walk(root, ())
    return lines


# -- everything wrong at once ---------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ConfigProblem:
    """One thing wrong with a configuration: the dotted field (None: the whole), what is
    wrong or was expected, what to do, and the line of the file that has it."""

    field: str | None
    problem: str
    hint: str | None = None
    line: int | None = None


class ConfigError(DataFormatError):
    """Everything wrong with a configuration; ``problems`` holds each, and ``lines()`` says
    each in one line (``FILE, line L, field 'F': PROBLEM (HINT)``). The error's own message is
    the first problem's (with how many more there are).

    Args:
        source: The file (or what else the values came from).
        problems: What is wrong, at least one.
    """

    def __init__(self, source: str, problems: Sequence[ConfigProblem]) -> None:
        first = problems[0]
        more = len(problems) - 1
        problem = first.problem + (f" (and {more} more problem{'s' * (more > 1)})" if more else "")
        super().__init__(source, problem, line=first.line, field=first.field, hint=first.hint)
        self.source = source
        self.problems = list(problems)

    def lines(self) -> list[str]:
        """Each problem as one line naming the file, line and field."""
        return [
            str(DataFormatError(self.source, p.problem, line=p.line, field=p.field, hint=p.hint))
            for p in self.problems
        ]

    def __str__(self) -> str:
        return "\n".join(self.lines())


class InvalidValues(LeanloopError):
    """Values of a configuration that do not fit together (raised by its checks, see
    ``ConfigBase.invalid``); ``problem`` is what is wrong, without the source."""

    def __init__(self, source: str, problem: str, hint: str | None = None) -> None:
        super().__init__(f"{source}: {problem}", hint=hint)
        self.problem = problem


@dataclasses.dataclass(frozen=True)
class KeywordsOf:
    """Marks a mapping field as keyword arguments of a library's class, e.g.
    ``Annotated[dict[str, Any] | None, KeywordsOf("peft", "LoraConfig", build=True)]``: an
    unknown key is reported where the configuration is loaded, as an unknown field of that
    section (with the closest parameter as a suggestion); with ``build``, the class is also
    made from the mapping then (for classes that are cheap to make and do nothing else), so a
    value it refuses is reported there too. Where the library is not installed, nothing is
    checked (the component that needs it says so)."""

    module: str
    name: str
    build: bool = False
    #: keyword arguments leanloop adds before it makes the class (e.g. PEFT's ``task_type``)
    defaults: tuple[tuple[str, Any], ...] = ()

    def keywords(self) -> list[str] | None:
        """The parameters of the class (None: the library is not installed)."""
        return _keywords(self.module, self.name)

    def __get_pydantic_core_schema__(self, source: Any, handler: Callable[[Any], Any]) -> Any:
        return core_schema.no_info_wrap_validator_function(self._check, handler(source))

    def _check(self, value: Any, handler: Callable[[Any], Any]) -> Any:
        value = handler(value)
        if not isinstance(value, Mapping) or not value:
            return value
        known = self.keywords()
        if known is None:
            return value
        _keyword_model(self.module, self.name).model_validate(dict(value))
        if self.build:
            target = getattr(importlib.import_module(self.module), self.name)
            try:
                target(**{**dict(self.defaults), **value})
            except (TypeError, ValueError) as exc:
                raise ValueError(f"{self.module}.{self.name} refuses these values: {exc}") from None
        return value


@functools.cache
def _keywords(module: str, name: str) -> list[str] | None:
    try:
        target = getattr(importlib.import_module(module), name)
    except ImportError:
        return None
    if dataclasses.is_dataclass(target):
        return [f.name for f in dataclasses.fields(target) if f.init]
    parameters = inspect.signature(target).parameters.values()
    return [p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


@functools.cache
def _keyword_model(module: str, name: str) -> type[BaseModel]:
    """A model whose fields are the class's parameters (any value): unknown keys fail it."""
    fields: dict[str, Any] = {key: (Any, None) for key in _keywords(module, name) or ()}
    return create_model(f"{name}Keywords", __config__=ConfigDict(extra="forbid"), **fields)


#: Names pydantic puts in an error's location for the branch of a union it tried.
_BRANCHES = frozenset({"str", "int", "float", "bool", "list", "dict", "none", "tuple", "set"})


def explain(
    exc: ValidationError,
    root: type,
    source: str,
    data: Any = None,
    *,
    unknown: str = "field",
) -> ConfigError:
    """Every problem of a failed validation of ``root`` (a configuration class) from ``data``
    read from ``source``, each with its dotted field, its line (when ``source`` is a YAML or
    JSON file) and what was expected; an unknown key as an unknown ``unknown`` ("field",
    "option") with the closest known name of its section.

    Args:
        exc: The validation's error.
        root: The class validated.
        source: Where the values came from (a file, or a name such as the class).
        data: The values validated (names list items by their ``name``).
        unknown: What an unknown key is called.

    Returns:
        The error, for the caller to raise.
    """
    lines = config_lines(source) if Path(source).suffix in (".yaml", ".yml", ".json") else {}
    problems: dict[str | None, ConfigProblem] = {}
    meant: set[str] = set()  # the fields unknown keys were probably meant to be
    for error in exc.errors():
        kind = error.get("type", "")
        loc = list(error.get("loc", ()))
        if kind not in ("extra_forbidden", "unexpected_keyword_argument"):
            loc = [p for p in loc if not (isinstance(p, str) and (p in _BRANCHES or "[" in p))]
        field = _dotted(loc, data) or None
        line = _line(lines, loc)
        if kind in ("extra_forbidden", "unexpected_keyword_argument"):
            known = _section_names(root, loc[:-1])
            close = difflib.get_close_matches(str(loc[-1]), known or [], n=1)
            hint = f"did you mean '{close[0]}'?" if close else _listing(known, unknown)
            if close:
                meant.add(_dotted([*loc[:-1], close[0]], data))
            problems[field] = ConfigProblem(field, f"unknown {unknown}", hint, line)
        elif kind in ("missing", "missing_argument"):
            expected = _description(root, loc)
            hint = f"expected: {expected}" if expected else None
            problems[field] = ConfigProblem(field, "the field is missing", hint, line)
        else:
            message = str(error.get("msg", "invalid value")).removeprefix("Value error, ")
            if "input" in error and loc and not isinstance(error["input"], Mapping | list):
                message += f" (got {error['input']!r})"
            earlier = problems.get(field)
            if earlier is not None and earlier.problem != message:  # another branch of a union
                message = f"{earlier.problem}; or {message}"
            problems[field] = ConfigProblem(field, message, None, line)
    # a required field is missing because its key was misspelt: the misspelling says it
    found = [
        p for p in problems.values() if not (p.problem.endswith("missing") and p.field in meant)
    ]
    found.sort(key=lambda p: (p.line is None, p.line or 0))
    return ConfigError(source, found)


def _listing(known: list[str] | None, what: str) -> str | None:
    if not known:
        return None
    if len(known) > 12:
        return f"known {what}s include: {', '.join(known[:12])}, ..."
    return f"known {what}s: {', '.join(known)}"


def _dotted(loc: Sequence[Any], data: Any) -> str:
    """``models[gpt].timeout`` for ``("models", 1, "timeout")`` when item #1 is named."""
    parts: list[str] = []
    node: Any = data
    for part in loc:
        if isinstance(part, int) and parts:
            item = node[part] if isinstance(node, list) and part < len(node) else None
            name = item.get("name") if isinstance(item, Mapping) else None
            parts[-1] += f"[{name}]" if isinstance(name, str) and name else f"[{part}]"
            node = item
        else:
            parts.append(str(part))
            node = node.get(part) if isinstance(node, Mapping) else None
    return ".".join(parts)


def _line(lines: Mapping[tuple[str | int, ...], int], loc: Sequence[Any]) -> int | None:
    """The line of ``loc`` in the file, else of the closest section around it."""
    key = tuple(p if isinstance(p, int) else str(p) for p in loc)
    for end in range(len(key), 0, -1):
        if key[:end] in lines:
            return lines[key[:end]]
    return None


def _section(root: Any, loc: Sequence[Any]) -> Any:
    """The class, field or type that ``loc`` points into (None: unknown)."""
    current: Any = root
    for part in loc:
        if isinstance(part, int):
            current = _item_type(current)
        else:
            members = _members(current)
            if members is None or part not in members:
                return None
            current = members[part]
        if current is None:
            return None
    return current


def _section_names(root: Any, loc: Sequence[Any]) -> list[str] | None:
    members = _members(_section(root, loc))
    return None if members is None else list(members)


def _description(root: Any, loc: Sequence[Any]) -> str | None:
    field = _section(root, loc)
    text = getattr(field, "description", None) if isinstance(field, FieldInfo) else None
    if not text:
        return None
    first = text.split(". ")[0].rstrip(".")
    return first[:1].lower() + first[1:]


def _types(annotation: Any) -> Iterator[Any]:
    """The types of an annotation, unions and ``Annotated`` opened."""
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        for arg in get_args(annotation):
            yield from _types(arg)
    elif hasattr(annotation, "__metadata__"):
        yield from _types(get_args(annotation)[0])
    else:
        yield annotation


def _members(node: Any) -> dict[str, Any] | None:
    """The fields of a configuration class or of the type of a field (None: it has none)."""
    if isinstance(node, FieldInfo):
        for meta in node.metadata:
            if isinstance(meta, KeywordsOf):
                known = meta.keywords()
                return None if known is None else dict.fromkeys(known)
        node = node.annotation
    for kind in _types(node):
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            return {field.alias or name: field for name, field in kind.model_fields.items()}
        fields = getattr(kind, "__pydantic_fields__", None)
        if isinstance(fields, dict):
            return dict(fields)
    return None


def _item_type(node: Any) -> Any:
    """The type of a list field's items."""
    if isinstance(node, FieldInfo):
        node = node.annotation
    for kind in _types(node):
        if get_origin(kind) in (list, tuple, Sequence) and get_args(kind):
            return get_args(kind)[0]
    return None


#: How deep the configuration being validated is nested in another (only the outermost
#: reports, so that the problems of every section come together).
_DEPTH: contextvars.ContextVar[int] = contextvars.ContextVar("config_depth", default=0)


@dataclass(config=CONFIG)
class ConfigBase:
    """Base of the configurations (``dataclasses.asdict`` and ``dataclasses.replace`` work on
    them). A subclass is a ``pydantic.dataclasses.dataclass(config=CONFIG)`` and checks fields
    that depend on each other in a ``model_validator(mode="after")`` that raises
    ``self.invalid(info, message)``.

    A configuration is checked when it is made and when a field is changed; a value that does
    not fit is a ``LeanloopError`` of one line naming the file (or class) and the field.
    """

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        # around the whole validation, the subclasses' own checks of their values included
        def report(data: Any, validate: Any, info: ValidationInfo) -> Any:
            return _validate(source, data, validate, info)

        return core_schema.with_info_wrap_validator_function(report, handler(source))

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
        return InvalidValues(_source(cls, info), message, hint)

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


def _validate(cls: type, data: Any, validate: Any, info: ValidationInfo) -> Any:
    """Validate ``data`` as a ``cls``; the outermost configuration reports every problem of
    its sections (``explain``), a section hands its problems to it."""
    depth = _DEPTH.get()
    token = _DEPTH.set(depth + 1)
    try:
        return validate(data)
    except ValidationError as exc:
        if depth:  # a section of another configuration: the outermost reports
            raise
        raise explain(exc, cls, _source(cls, info), data) from None
    except InvalidValues as exc:
        if depth:  # said at the section's place among the other problems
            raise ValueError(exc.problem + (f" ({exc.hint})" if exc.hint else "")) from None
        raise
    finally:
        _DEPTH.reset(token)


def _source(cls: type, info: ValidationInfo) -> str:
    return (info.context or {}).get("source") or cls.__name__
