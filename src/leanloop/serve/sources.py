"""Where each local model's checkpoint comes from, checked when the server starts (without loading
anything and without the network): a path that is there, a model shipped in an installed package
(``leanloop.ml.models``: ``tinycoder``, ``all-minilm-l6-v2``, ...), or a Hugging Face name —
which, with the hub off (``HF_HUB_OFFLINE=1``), must be in the local cache. Anything else stops
the start with one line naming the model's entry, instead of failing every request later (after
the hub's retries)."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from leanloop.errors import DataFormatError
from leanloop.ml.models import PACKAGED_MODELS, PackagedModel, hub_offline
from leanloop.ml.pretrained import looks_like_path
from leanloop.serve.config import ModelConfig, ServeConfig

#: A file every Hugging Face model directory holds (what the cache lookup asks for).
_HUB_FILE = "config.json"


def check_sources(
    config: ServeConfig, source: str = "the server configuration", *, skip: Collection[str] = ()
) -> None:
    """Fail with one line (naming ``source`` and ``models[NAME].model``) for the first local
    model whose checkpoint cannot be found; models named in ``skip`` (replaced by the caller)
    are not looked at."""
    for model in config.models:
        if not model.local or model.name in skip:
            continue
        problem = _problem(model)
        if problem is not None:
            message, hint = problem
            raise DataFormatError(source, message, field=f"models[{model.name}].model", hint=hint)


def _problem(model: ModelConfig) -> tuple[str, str] | None:
    """What is wrong with the model's ``model`` (and what to do), or None."""
    text = model.model
    if Path(text).expanduser().exists():
        return None
    packaged = _packaged(text)
    if packaged is not None:
        by_hub_name = text.lower() != packaged.name
        if by_hub_name and (not hub_offline() or _in_hub_cache(text)):
            return None  # the hub's copy is used
        if packaged.package_dir() is None:
            return (
                f"{text!r} is a packaged model, but the package that ships it "
                f"({packaged.package}) is not installed",
                packaged.install,
            )
        return None
    expected = (
        "expected an existing model directory or checkpoint, a packaged model "
        f"({', '.join(m.name for m in PACKAGED_MODELS)}) or a Hugging Face model name"
    )
    if looks_like_path(text):
        return f"{text!r} does not exist and is not a packaged model", expected
    if hub_offline() and not _in_hub_cache(text):
        return (
            f"{text!r} is no local path, no packaged model, and not in the Hugging Face cache; "
            "the hub is off (HF_HUB_OFFLINE=1)",
            expected + " that is in the cache",
        )
    return None  # a hub name: fetched when the model is first loaded


def _packaged(text: str) -> PackagedModel | None:
    lowered = text.lower()
    for model in PACKAGED_MODELS:
        if lowered in (model.name, (model.hub_name or "").lower()):
            return model
    return None


def _in_hub_cache(name: str) -> bool:
    """Whether the Hugging Face cache holds the model (a local lookup, no network)."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - transformers depends on it
        return False
    try:
        found = try_to_load_from_cache(name, _HUB_FILE)
    except Exception:  # a name the hub would refuse (e.g. bad characters)
        return False
    return isinstance(found, str)
