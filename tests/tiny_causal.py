"""Test material for the tactic-generator tests: a tiny causal language model (a Llama or Qwen3
config with a few hundred thousand parameters and a byte-level BPE tokenizer trained on the fly on
the sample's states and tactics, ChatML template, ``<|im_end|>`` as end token), a SQLite database
holding the real sample plus a second repository made of renamed copies, and weight snapshots."""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

from leanloop.data.prompt import PromptFormat
from leanloop.data.records import Repository, Theorem
from leanloop.ml.models import CHATML_TEMPLATE
from tests.helpers import renamed, sample_theorems

SECOND_REPOSITORY = Repository(
    url="https://github.com/leanloop-tests/second-project", commit="5e" * 20
)

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def corpus(theorems: Iterable[Theorem], prompt_format: PromptFormat | None = None) -> list[str]:
    """The texts the tokenizer learns from: rendered prompts and tactics of the real steps."""
    prompt_format = prompt_format or PromptFormat()
    texts = [prompt_format.system]
    for row in prompt_format.examples(theorems):
        texts.append(row.state)
        texts.append(row.tactic)
    return texts


#: The special tokens of a tokenizer without a chat template of its own (a base model's).
PLAIN_SPECIAL_TOKENS = ["<|endoftext|>", "</s>"]


def build_tokenizer(texts: list[str], vocab_size: int = 1500, *, chat: bool = True):
    """A byte-level BPE tokenizer of ``texts``: ChatML's tokens and template, ``<|im_end|>``
    its end token; or (``chat=False``) a base model's, ``</s>`` its end token and no template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    special = SPECIAL_TOKENS if chat else PLAIN_SPECIAL_TOKENS
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=special,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token="<|im_end|>" if chat else "</s>",
        pad_token="<|endoftext|>",
        bos_token=None,
    )
    if chat:
        fast.chat_template = CHATML_TEMPLATE
    return fast


def build_tiny_causal(
    directory: Path,
    theorems: Iterable[Theorem],
    *,
    arch: str = "llama",
    hidden: int = 64,
    layers: int = 2,
    vocab_size: int = 1500,
    seed: int = 0,
    chat: bool = True,
) -> Path:
    """Save a freshly initialised tiny model and its tokenizer to ``directory`` (``chat=False``:
    a tokenizer without chat template or ChatML tokens, see ``build_tokenizer``)."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig, Qwen3Config

    tokenizer = build_tokenizer(corpus(theorems), vocab_size=vocab_size, chat=chat)
    common = {
        "vocab_size": len(tokenizer),
        "hidden_size": hidden,
        "intermediate_size": hidden * 2,
        "num_hidden_layers": layers,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 2048,
        "bos_token_id": None,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
        "tie_word_embeddings": False,
    }
    if arch == "llama":
        config = LlamaConfig(**common)
    elif arch == "qwen3":
        config = Qwen3Config(**common, head_dim=hidden // 4)
    else:
        raise ValueError(f"unknown architecture {arch}")
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def parameter_count(directory: Path) -> int:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(directory)
    return sum(p.numel() for p in model.parameters())


@functools.cache
def shared_tiny_model(sample_dir: Path, arch: str = "llama") -> Path:
    """One tiny model per architecture and test process (built in about a second, removed at
    exit)."""
    directory = Path(tempfile.mkdtemp(prefix="leanloop-tiny-"))
    atexit.register(shutil.rmtree, directory, True)
    return build_tiny_causal(directory / "model", sample_theorems(sample_dir), arch=arch)


def two_repository_db(path: Path, sample_dir: Path, *, second_size: int = 60):
    """A SQLite database with the real sample (one repository) and a second repository holding
    renamed copies of its first ``second_size`` theorems (identical copies would be exported
    once, as copies of a theorem in a fork are); returns the database and both repositories in
    training order."""
    from leanloop.database import DynamicDatabase

    database = DynamicDatabase(path)
    database.import_leandojo(sample_dir)
    (first,) = database.get_repositories()
    second = SECOND_REPOSITORY
    copies = [
        renamed(t, "_second", url=second.url, commit=second.commit)
        for t in sample_theorems(sample_dir)[:second_size]
    ]
    database.add_repository(second, copies)
    return database, [first, second]


def weights(model, only: str | None = None) -> dict:
    return {
        name: tensor.detach().clone().cpu()
        for name, tensor in model.state_dict().items()
        if only is None or only in name
    }


def same_weights(a: dict, b: dict) -> bool:
    import torch

    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def record_starts(trainer, monkeypatch, only: str | None = None) -> list[dict]:
    """The weights the TRL trainer of each repository is handed (what training starts from)."""
    starts: list[dict] = []
    build = trainer.build_trl_trainer

    def spy(*args, **kwargs):
        starts.append(weights(trainer.model, only))
        trl_trainer = build(*args, **kwargs)
        assert trl_trainer.model is trainer.model
        return trl_trainer

    monkeypatch.setattr(trainer, "build_trl_trainer", spy)
    return starts
