"""Load a text encoder with its tokenizer (an encoder model, or the encoder half of a T5/ByT5
encoder-decoder as ReProver reads it), turn texts into token ids (symbols the vocabulary lacks
spelt out by their Unicode names), and token states into sentence embeddings (mean pooling, L2
normalisation)."""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Iterable
from typing import Any

from leanloop.errors import LeanloopError
from leanloop.ml.pretrained import load_pretrained

#: LeanDojo-v2's default retriever (ReProver's ByT5 encoder, on the Hugging Face hub).
LEANDOJO_RETRIEVER = "kaiyuy/leandojo-lean4-retriever-byt5-small"

#: Encoder-only classes of the encoder-decoder families the retriever reads (ReProver's retriever
#: is a ByT5 model read by ``T5EncoderModel``): the decoder is never loaded.
ENCODER_ONLY = {"t5": "T5EncoderModel", "mt5": "MT5EncoderModel", "umt5": "UMT5EncoderModel"}


def load_encoder(name_or_path: str | os.PathLike) -> tuple[Any, Any]:
    """The tokenizer and the bare encoder of ``name_or_path``: ``AutoModel`` for an encoder
    (BERT, MiniLM...), the encoder half alone for a T5-family encoder-decoder (T5, ByT5, mT5,
    UMT5; ``T5EncoderModel`` as ReProver loads it), with the model's own tokenizer (the byte
    tokenizer for ByT5).

    Raises:
        LeanloopError: The model cannot be found or read, or it is an encoder-decoder of
            another family.
    """
    import transformers
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    config = load_pretrained(AutoConfig, name_or_path)
    loader: Any = AutoModel
    name = ENCODER_ONLY.get(getattr(config, "model_type", ""))
    if name is not None:
        loader = getattr(transformers, name)
    elif getattr(config, "is_encoder_decoder", False):
        raise LeanloopError(
            f"model {os.fspath(name_or_path)!r} is a {config.model_type} encoder-decoder: "
            "the retriever reads the encoder of T5-family models only",
            hint=f"use an encoder (BERT, MiniLM) or a T5/ByT5 model such as {LEANDOJO_RETRIEVER}",
        )
    tokenizer = load_pretrained(AutoTokenizer, name_or_path)
    encoder = load_pretrained(loader, name_or_path, config=config)
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
