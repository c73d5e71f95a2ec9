"""Where each local model's checkpoint comes from, checked when the server starts (without loading
anything): a path that is there, a model shipped in an installed package (``leanloop.ml.models``:
``tinycoder``, ``all-minilm-l6-v2``, ...), or a Hugging Face name in the local cache or, with the
hub on, one the hub says it has (asked once, without retries). Anything else — a path that is not
there, such as ``out/generator`` when ``out/`` is a folder here, or a name the hub cannot give —
stops the start with one line naming the model's entry, instead of failing every request later
(after the hub's retries). ``leanloop.ml.models.model_problem`` decides, as it does for the
trainers and provers."""

from __future__ import annotations

from collections.abc import Collection

from leanloop.ml.models import require_model
from leanloop.serve.config import ServeConfig


def check_sources(
    config: ServeConfig, source: str = "the server configuration", *, skip: Collection[str] = ()
) -> None:
    """Fail with one line (naming ``source`` and ``models[NAME].model``) for the first local
    model whose checkpoint cannot be found; models named in ``skip`` (replaced by the caller)
    are not looked at.

    Raises:
        DataFormatError: A local model cannot load (see ``leanloop.ml.models.model_problem``).
    """
    for model in config.models:
        if not model.local or model.name in skip:
            continue
        require_model(model.model, source, f"models[{model.name}].model")
