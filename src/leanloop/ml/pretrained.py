"""Load a Hugging Face model or tokenizer by name or path (through ``resolve_model``), with one
wording for the three ways it fails: the path is missing, the path holds no model, or the name is
neither local nor cached and the hub cannot give it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from leanloop.errors import LeanloopError
from leanloop.ml.models import hub_offline, names_local_path, packaged_models, resolve_model


def load_pretrained(
    loader: Any, name_or_path: str | os.PathLike, *, cache_dir: Path | None = None, **kwargs: Any
) -> Any:
    """``loader.from_pretrained(resolve_model(name_or_path), **kwargs)`` (``loader`` is e.g.
    ``AutoTokenizer`` or ``AutoModel``); a failure to find or read the model becomes a
    ``LeanloopError`` that names what the user gave."""
    name = os.fspath(name_or_path)
    source = resolve_model(name, cache_dir=cache_dir)
    local = Path(source).expanduser()
    if not local.exists() and names_local_path(name):
        raise LeanloopError(f"model path {name} does not exist", hint=_hint())
    if local.is_file():
        raise LeanloopError(f"model path {local} is a file, not a model directory", hint=_hint())
    try:
        return loader.from_pretrained(source, **kwargs)
    except (OSError, ValueError) as exc:
        detail = first_line(exc)
        if "Unrecognized configuration class" in detail:
            raise LeanloopError(
                f"model {name!r}: {getattr(loader, '__name__', loader)} cannot load this kind of "
                f"model ({detail})",
                hint="check that the model is of the kind this component needs",
            ) from None
        if local.is_dir():
            raise LeanloopError(
                f"model path {local} holds no model ({detail})", hint=_hint()
            ) from None
        raise model_not_found(name, detail) from None


def model_not_found(name: str, detail: str = "") -> LeanloopError:
    """The error for a name that is neither a local path nor in the Hugging Face cache, when the
    hub cannot give it either."""
    if hub_offline():
        hub = "the hub is unreachable (HF_HUB_OFFLINE=1)"
    else:
        hub = "the hub is unreachable or does not have it" + (f" ({detail})" if detail else "")
    return LeanloopError(
        f"unknown model {name!r}: neither a local path nor in the Hugging Face cache, and {hub}",
        hint=_hint(),
    )


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _hint() -> str:
    names = ", ".join(
        f"{m.name}{'' if installed else ' (not installed)'}" for m, installed in packaged_models()
    )
    return f"give a model directory, or one of the packaged offline models: {names}"
