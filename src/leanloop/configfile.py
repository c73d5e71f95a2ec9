"""Read a configuration file (YAML, or JSON, which YAML also reads) into plain data, with an error
that names the file and line when it is missing or malformed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from leanloop.errors import DataFormatError


def read_config_file(path: str | Path) -> Any:
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
