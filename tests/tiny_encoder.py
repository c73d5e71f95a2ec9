"""A tiny BERT encoder for tests: a WordPiece vocabulary learnt from the real sample's text and a
randomly initialised 2-layer model, saved as a normal Hugging Face checkpoint."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from leanloop.data.records import Theorem


def sample_texts(theorems: Iterable[Theorem]) -> list[str]:
    """Proof states, tactics and premise names of the theorems."""
    texts: list[str] = []
    for theorem in theorems:
        texts.append(theorem.full_name)
        for step in theorem.traced_tactics:
            texts.extend((step.state_before, step.tactic))
            texts.extend(p.full_name for p in step.premises)
    return texts


def build_tiny_encoder(
    directory: Path,
    texts: Iterable[str],
    *,
    vocab_size: int = 800,
    hidden_size: int = 32,
    num_layers: int = 2,
    max_length: int = 128,
    seed: int = 0,
) -> Path:
    """Write a tokenizer and a ``BertModel`` into ``directory``; return it."""
    import torch
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertConfig, BertModel, BertTokenizer

    directory.mkdir(parents=True, exist_ok=True)
    wordpiece = BertWordPieceTokenizer(lowercase=False, strip_accents=False)
    wordpiece.train_from_iterator(list(texts), vocab_size=vocab_size, min_frequency=1)
    tokenizer = BertTokenizer(
        vocab=wordpiece.get_vocab(),
        do_lower_case=False,
        strip_accents=False,
        model_max_length=max_length,
    )
    tokenizer.save_pretrained(directory)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=2,
        intermediate_size=2 * hidden_size,
        max_position_embeddings=max_length,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    BertModel(config).save_pretrained(directory)
    return directory


def build_tiny_byt5(
    directory: Path, *, d_model: int = 32, num_layers: int = 2, seed: int = 0
) -> Path:
    """Write ByT5's byte tokenizer (it needs no files) and a randomly initialised 2-layer
    ``T5EncoderModel`` into ``directory``, as ReProver's retriever is stored; return it."""
    import torch
    from transformers import ByT5Tokenizer, T5Config, T5EncoderModel

    directory.mkdir(parents=True, exist_ok=True)
    tokenizer = ByT5Tokenizer()
    tokenizer.save_pretrained(directory)
    config = T5Config(
        vocab_size=len(tokenizer),
        d_model=d_model,
        d_kv=d_model // 4,
        d_ff=2 * d_model,
        num_layers=num_layers,
        num_heads=4,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(seed)
    T5EncoderModel(config).save_pretrained(directory)
    return directory
