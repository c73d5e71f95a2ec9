"""SFTTrainer: completion-only labels on real examples, curriculum training over two repositories
(full model and LoRA), checkpoints that reload, continuity between repositories, and errors."""

from __future__ import annotations

import json

import pytest

from leanloop.data.prompt import PromptExample, PromptFormat
from leanloop.data.records import Repository
from leanloop.database import DynamicDatabase
from leanloop.errors import LeanloopError
from leanloop.ml.causal import end_token_ids
from leanloop.ml.device import Hardware
from leanloop.ml.generation import CHECKPOINT_INFO
from leanloop.ml.models import latest_checkpoint, resolve_model
from leanloop.trainer.base import CurriculumStep
from leanloop.trainer.hf_common import CURVES_PNG, LOG_HISTORY
from leanloop.trainer.sft import SFTTrainer
from tests.helpers import sample_theorems, with_sorry
from tests.tiny_causal import (
    record_starts,
    same_weights,
    shared_tiny_model,
    two_repository_db,
    weights,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


# transformers itself calls its deprecated name while TRL trains
pytestmark = pytest.mark.filterwarnings(
    "ignore:`is_gradient_checkpointing` is deprecated:FutureWarning"
)


@pytest.fixture(scope="module")
def tiny_dir(sample_dir):
    return shared_tiny_model(sample_dir)


def real_rows(sample_dir, count: int) -> list[PromptExample]:
    fmt = PromptFormat()
    rows = list(fmt.examples(sample_theorems(sample_dir)))
    step = max(1, len(rows) // count)
    return rows[::step][:count]


@pytest.mark.parametrize("model", ["tiny", "tinycoder"])
def test_labels_mask_the_prompt_and_keep_the_completion(model, tiny_dir, sample_dir, tmp_path):
    name = str(tiny_dir) if model == "tiny" else "tinycoder"
    trainer = SFTTrainer(name, output_dir=tmp_path / "out", max_length=4096, progress_bars=False)
    from datasets import Dataset

    multi_line = next(
        e for e in PromptFormat().examples(sample_theorems(sample_dir)) if "\n" in e.tactic
    )
    rows = [*real_rows(sample_dir, 7), multi_line]  # a multi-line tactic is taught whole
    trl_trainer = trainer.build_trl_trainer(
        Dataset.from_list([trainer.example_row(r) for r in rows]), None, tmp_path / "work"
    )
    batch = trl_trainer.data_collator([trl_trainer.train_dataset[i] for i in range(len(rows))])
    tok = trainer.tokenizer
    for i, row in enumerate(rows):
        prompt_text = tok.apply_chat_template(
            row.prompt, tokenize=False, add_generation_prompt=True
        )
        full_text = tok.apply_chat_template(row.prompt + row.completion, tokenize=False)
        assert full_text.startswith(prompt_text)
        completion_text = full_text[len(prompt_text) :]
        assert completion_text.startswith(row.tactic)
        prompt_ids = tok(prompt_text, add_special_tokens=False)["input_ids"]
        full_ids = tok(full_text, add_special_tokens=False)["input_ids"]
        assert full_ids[: len(prompt_ids)] == prompt_ids
        expected = full_ids[len(prompt_ids) :]  # the completion, tokenized in its context
        assert tok.decode(expected).strip() == completion_text.strip()
        if model == "tiny":  # a byte-level BPE tokenizes the completion alone the same way
            assert expected == tok(completion_text, add_special_tokens=False)["input_ids"]
        length = int(batch["attention_mask"][i].sum())
        labels = batch["labels"][i].tolist()
        input_ids = batch["input_ids"][i].tolist()
        prompt_length = length - len(expected)
        assert prompt_length == len(prompt_ids)
        # the prompt part is the prompt exactly as generation sees it, and all of it is masked
        assert input_ids[:prompt_length] == prompt_ids
        assert all(label == -100 for label in labels[:prompt_length])
        assert all(label == -100 for label in labels[length:])  # padding
        # the labelled tokens are exactly the tokenized completion, end of turn included
        assert labels[prompt_length:length] == expected
        assert input_ids[prompt_length:length] == expected
        assert [x for x in labels if x != -100] == expected
        # the completion ends with a token generation stops on: <|im_end|> where the vocabulary
        # has it (the tiny model), the end-of-sequence token where it does not (tinycoder has
        # no chat template of its own)
        end = "<|im_end|>" if model == "tiny" else tok.eos_token
        assert tok.convert_tokens_to_ids(end) in expected
        assert tok.convert_tokens_to_ids(end) in end_token_ids(trainer.model, tok)


def test_two_repositories_full_model(tiny_dir, sample_dir, tmp_path, monkeypatch):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    database, repos = two_repository_db(tmp_path / "lean.db", sample_dir)
    out = tmp_path / "out"
    trainer = SFTTrainer(
        str(tiny_dir),
        output_dir=out,
        batch_size=4,
        lr=1e-3,
        max_steps=3,
        logging_steps=1,
        progress_bars=False,
    )
    initial = weights(trainer.model)
    starts = record_starts(trainer, monkeypatch)

    checkpoints = trainer.train(repos, database, tmp_path / "data")

    assert [c.parent for c in checkpoints] == [out, out]
    assert (out / "LATEST").read_text().strip() == checkpoints[1].name
    assert latest_checkpoint(out) == checkpoints[1]
    assert resolve_model(out) == str(checkpoints[1])
    for checkpoint in checkpoints:
        for name in ("config.json", "model.safetensors", "tokenizer.json", CHECKPOINT_INFO):
            assert (checkpoint / name).is_file(), name
        assert (checkpoint / CURVES_PNG).read_bytes().startswith(PNG_MAGIC)
        history = json.loads((checkpoint / LOG_HISTORY).read_text())
        assert any("loss" in entry for entry in history)
        assert json.loads((checkpoint / CHECKPOINT_INFO).read_text())["adapter"] is False
    saved = [weights(AutoModelForCausalLM.from_pretrained(c)) for c in checkpoints]
    assert same_weights(starts[0], initial)
    assert same_weights(starts[1], saved[0])  # repository 2 started from repository 1's model
    assert not same_weights(saved[0], initial)
    assert not same_weights(saved[1], saved[0])
    assert same_weights(saved[1], weights(trainer.model))
    # as with LeanDojo-v2, output_dir itself loads as the newest model
    assert same_weights(weights(AutoModelForCausalLM.from_pretrained(out)), saved[1])
    assert AutoTokenizer.from_pretrained(out).get_vocab() == trainer.tokenizer.get_vocab()
    reloaded_tok = AutoTokenizer.from_pretrained(checkpoints[1])
    messages = PromptFormat().prompt("⊢ True")
    assert reloaded_tok.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=True
    ) == trainer.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    first, second = trainer.reports
    assert second.train_examples > first.train_examples  # the merged export grew
    assert first.global_steps == second.global_steps == 3
    assert second.val_examples > 0 and "eval_loss" in second.metrics
    assert second.train_tokens and second.train_tokens > 0


def test_two_repositories_lora_adapter(tiny_dir, sample_dir, tmp_path, monkeypatch):
    import torch
    from peft import LoraConfig, PeftModel

    from leanloop.ml.causal import load_causal_lm
    from leanloop.ml.generation import TacticGenerator

    database, repos = two_repository_db(tmp_path / "lean.db", sample_dir, second_size=20)
    lora = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=["q_proj", "v_proj"])
    out = tmp_path / "out"
    trainer = SFTTrainer(
        str(tiny_dir),
        output_dir=out,
        batch_size=4,
        lr=5e-3,
        lora_config=lora,
        max_steps=3,
        progress_bars=False,
        evaluate=False,
    )
    assert trainer.use_lora and isinstance(trainer.model, PeftModel)
    base_before = {k: v for k, v in weights(trainer.model).items() if "lora_" not in k}
    starts = record_starts(trainer, monkeypatch, only="lora_")

    checkpoints = trainer.train(repos, database, tmp_path / "data")

    assert latest_checkpoint(out) == checkpoints[1]
    adapters = []
    for checkpoint in checkpoints:
        assert (checkpoint / "adapter_config.json").is_file()
        assert (checkpoint / "adapter_model.safetensors").is_file()
        assert not (checkpoint / "model.safetensors").exists()  # the adapter only
        config = json.loads((checkpoint / "adapter_config.json").read_text())
        assert config["base_model_name_or_path"] == str(tiny_dir)
        loaded = load_causal_lm(checkpoint)
        assert loaded.adapter and isinstance(loaded.model, PeftModel)
        adapters.append(weights(loaded.model, "lora_"))
    assert adapters[0] and any(k.endswith("lora_B.default.weight") for k in adapters[0])
    assert any(bool(v.ne(0).any()) for k, v in adapters[0].items() if "lora_B" in k)
    assert same_weights(starts[1], adapters[0])  # repository 2 continued the same adapter
    assert not same_weights(adapters[1], adapters[0])
    assert same_weights(adapters[1], weights(trainer.model, "lora_"))
    # output_dir itself holds the newest adapter, loadable with PEFT as LeanDojo-v2 users do
    assert (out / "adapter_model.safetensors").samefile(
        checkpoints[1] / "adapter_model.safetensors"
    )
    assert not (out / "model.safetensors").exists()
    mirrored = PeftModel.from_pretrained(load_causal_lm(tiny_dir).model, out)
    assert same_weights(weights(mirrored, "lora_"), adapters[1])
    base_after = {k: v for k, v in weights(trainer.model).items() if "lora_" not in k}
    assert same_weights(base_before, base_after)  # LoRA leaves the base weights alone
    assert lora.base_model_name_or_path is None  # the caller's config was not modified

    states = [r.state for r in real_rows(sample_dir, 4)]
    options = {"method": "greedy", "max_new_tokens": 12}
    in_memory = TacticGenerator.from_model(trainer.model, trainer.tokenizer, **options)
    from_disk = TacticGenerator(out, **options)  # LATEST -> adapter -> base + adapter
    expected = in_memory.generate_batch(states, k=1)
    got = from_disk.generate_batch(states, k=1)
    assert [[t.tactic for t in r] for r in got] == [[t.tactic for t in r] for r in expected]
    for got_row, expected_row in zip(got, expected, strict=True):
        for g, e in zip(got_row, expected_row, strict=True):
            assert g.score == pytest.approx(e.score, abs=1e-4)
    # the adapter matters: the reloaded model's logits differ from its base model's
    ids = from_disk.tokenizer(from_disk.prompt_text(states[0]), return_tensors="pt")
    with torch.no_grad():  # (the adapter is merged into the reloaded model for generation)
        adapted = from_disk.model(**ids).logits
        plain = load_causal_lm(tiny_dir).model(**ids).logits
    assert not torch.allclose(adapted, plain)


def test_a_failure_keeps_what_was_trained(tiny_dir, sample_dir, tmp_path, monkeypatch):
    from transformers import AutoModelForCausalLM

    database, repos = two_repository_db(tmp_path / "lean.db", sample_dir, second_size=10)
    out = tmp_path / "out"
    trainer = SFTTrainer(
        str(tiny_dir),
        output_dir=out,
        batch_size=2,
        lr=1e-3,
        max_steps=1,
        evaluate=False,
        progress_bars=False,
    )
    build = trainer.build_trl_trainer
    calls = []

    def fail_on_second(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("disk on fire")
        return build(*args, **kwargs)

    monkeypatch.setattr(trainer, "build_trl_trainer", fail_on_second)
    with pytest.raises(RuntimeError, match="disk on fire"):
        trainer.train(repos, database, tmp_path / "data")
    first = latest_checkpoint(out)
    assert first is not None and first.name.startswith("repo00-")
    # no half-written checkpoint of the second repository
    assert [p.name for p in out.iterdir() if p.is_dir()] == [first.name]
    assert (out / "LATEST").is_file()
    reloaded = weights(AutoModelForCausalLM.from_pretrained(first))
    assert same_weights(reloaded, weights(trainer.model))
    # output_dir itself still loads as the first repository's model
    assert same_weights(weights(AutoModelForCausalLM.from_pretrained(out)), reloaded)


def test_packaged_base_model_keeps_its_name(sample_dir, tmp_path):
    import torch
    from peft import LoraConfig

    from leanloop.ml.causal import load_causal_lm
    from leanloop.ml.generation import TacticGenerator

    database, repos = two_repository_db(tmp_path / "lean.db", sample_dir, second_size=10)
    lora = LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"])
    trainer = SFTTrainer(
        "tinycoder",
        output_dir=tmp_path / "out",
        batch_size=2,
        lr=1e-2,
        max_steps=1,
        lora_config=lora,
        evaluate=False,
        progress_bars=False,
    )
    (checkpoint,) = trainer.train(repos[1:], database, tmp_path / "data")
    config = json.loads((checkpoint / "adapter_config.json").read_text())
    assert config["base_model_name_or_path"] == "tinycoder"  # not a path in the cache
    generator = TacticGenerator(checkpoint, max_new_tokens=4)
    assert generator.source == str(checkpoint)
    # the packaged base with the trained adapter on top: the model the trainer left in memory
    ids = generator.tokenizer(generator.prompt_text("⊢ True"), return_tensors="pt")
    with torch.no_grad():
        reloaded = generator.model(**ids).logits
        trained = trainer.model.eval().to(generator.device)(**ids).logits
        base = load_causal_lm("tinycoder").model.to(generator.device)(**ids).logits
    assert torch.allclose(reloaded, trained, atol=1e-5)
    assert not torch.allclose(reloaded, base, atol=1e-5)  # the step changed the adapter


def test_trl_arguments_follow_the_hardware(tiny_dir, tmp_path):
    from trl import SFTConfig

    cpu = SFTTrainer(str(tiny_dir), output_dir=tmp_path, hardware=Hardware("cpu", False, False))
    args = cpu.trl_arguments(tmp_path / "work")
    config = SFTConfig(**args)
    assert config.bf16 is False and config.gradient_checkpointing is False
    assert config.completion_only_loss is True and config.use_cpu is True
    assert config.per_device_train_batch_size == 1 and config.learning_rate == 2e-5
    cuda = SFTTrainer(str(tiny_dir), output_dir=tmp_path, hardware=Hardware("cuda", True, True))
    args = cuda.trl_arguments(tmp_path / "work")
    assert args["bf16"] is True and args["use_cpu"] is False
    assert True in (args.get("activation_checkpointing"), args.get("gradient_checkpointing"))
    forced = SFTTrainer(
        str(tiny_dir),
        output_dir=tmp_path,
        hardware=Hardware("cuda", True, True),
        bf16=False,
        gradient_checkpointing=False,
        trl_args={"weight_decay": 0.5},
    )
    args = forced.trl_arguments(tmp_path / "work")
    assert args["bf16"] is False and True not in (
        args.get("activation_checkpointing"),
        args.get("gradient_checkpointing"),
    )
    assert args["weight_decay"] == 0.5


def test_from_config_file(tiny_dir, tmp_path):
    config = tmp_path / "sft.yaml"
    config.write_text(
        f"model_name: {tiny_dir}\nbatch_size: 2\nmax_steps: 5\nmax_length: 256\n"
        "lora: {r: 2, lora_alpha: 4, target_modules: [q_proj]}\n"
    )
    trainer = SFTTrainer.from_config(config, output_dir=tmp_path / "out")
    assert trainer.batch_size == 2 and trainer.config.max_steps == 5
    assert trainer.config.max_length == 256 and trainer.output_dir == tmp_path / "out"
    assert trainer.use_lora and trainer.lora_config.r == 2


def test_missing_split_file(tiny_dir, tmp_path):
    trainer = SFTTrainer(str(tiny_dir), output_dir=tmp_path / "out", progress_bars=False)
    repo = Repository(url="https://github.com/x/y", commit="a" * 40)
    step = CurriculumStep(0, repo, (repo,), tmp_path / "nothing", tmp_path / "out" / "c0")
    with pytest.raises(LeanloopError, match="missing data split file") as info:
        trainer.train_step(step)
    assert str(tmp_path / "nothing" / "random" / "train.json") in str(info.value)


def test_no_training_examples(tiny_dir, sample_dir, tmp_path):
    theorems = sample_theorems(sample_dir)
    sorries = [with_sorry(t) for t in theorems[:30]]
    repo = Repository(url=sorries[0].url, commit=sorries[0].commit)
    database = DynamicDatabase(tmp_path / "lean.db")
    database.add_repository(repo, sorries)
    out = tmp_path / "out"
    trainer = SFTTrainer(str(tiny_dir), output_dir=out, progress_bars=False)
    with pytest.raises(LeanloopError, match=r"no training examples in .*train\.json"):
        trainer.train([repo], database, tmp_path / "data")
    assert latest_checkpoint(out) is None
    assert not [p for p in out.iterdir() if not p.name.startswith(".")]


def test_unknown_model_names_the_offline_models(tmp_path):
    with pytest.raises(
        LeanloopError, match="SFTTrainer, field 'model_name': 'no-such-org/no-such-model' is no "
    ) as info:
        SFTTrainer("no-such-org/no-such-model", output_dir=tmp_path)
    message = str(info.value)
    assert "HF_HUB_OFFLINE" in message
    for name in ("smollm2-135m-instruct", "tinycoder", "all-minilm-l6-v2"):
        assert name in message
    with pytest.raises(LeanloopError, match=r"'model_name': '.*' does not exist"):
        SFTTrainer(str(tmp_path / "missing" / "model"), output_dir=tmp_path)
    with pytest.raises(LeanloopError, match="holds no model"):
        SFTTrainer(str(tmp_path), output_dir=tmp_path / "out")


def test_bad_options_are_named(tmp_path):
    with pytest.raises(
        LeanloopError, match=r"SFTTrainer, field 'max_lenght': unknown field.*'max_length'"
    ):
        SFTTrainer("tinycoder", output_dir=tmp_path, max_lenght=12)
    with pytest.raises(LeanloopError, match="SFTTrainer, field 'batch_size'"):
        SFTTrainer("tinycoder", output_dir=tmp_path, batch_size=0)
    with pytest.raises(LeanloopError, match=r"lora_config must be a peft\.LoraConfig"):
        SFTTrainer("tinycoder", output_dir=tmp_path, lora_config=42)


def test_a_time_limit_stops_training_early(tiny_dir, sample_dir, tmp_path):
    from leanloop.database import DynamicDatabase

    database = DynamicDatabase(tmp_path / "lean.db")
    database.import_leandojo(sample_dir)
    trainer = SFTTrainer(
        str(tiny_dir),
        output_dir=tmp_path / "out",
        batch_size=2,
        max_steps=10_000,  # far more than a second allows
        max_seconds=1.0,
        evaluate=False,
        plot_curves=False,
        progress_bars=False,
    )
    trainer.train(database.get_repositories(), database, tmp_path / "data")
    (report,) = trainer.reports
    assert 1 <= report.global_steps < 10_000
    assert report.train_seconds < 60  # stopped by the limit, not by the step count


def test_a_template_less_model_learns_to_end_its_reply(sample_dir, tmp_path):
    """A tokenizer without a chat template and without ``<|im_end|>`` as a token gets ChatML
    whose turns end with its end-of-sequence token: the trained completion's labels end with
    it, generation stops on it, so a learned reply ends instead of running to the limit."""
    from datasets import Dataset

    from leanloop.ml.generation import TacticGenerator
    from tests.tiny_causal import build_tiny_causal

    plain = build_tiny_causal(tmp_path / "plain", sample_theorems(sample_dir)[:60], chat=False)
    trainer = SFTTrainer(str(plain), output_dir=tmp_path / "out", progress_bars=False)
    tok = trainer.tokenizer
    assert "<|im_end|>" not in tok.get_vocab() and tok.eos_token == "</s>"
    example = real_rows(sample_dir, 1)[0]
    row = trainer.example_row(example)
    trl_trainer = trainer.build_trl_trainer(Dataset.from_list([row] * 4), None, tmp_path / "work")
    batch = trl_trainer.data_collator([trl_trainer.train_dataset[0]])
    labels = [x for x in batch["labels"][0].tolist() if x != -100]
    assert tok.eos_token_id in labels
    assert tok.decode(labels).startswith(example.tactic)
    assert tok.decode(labels[: labels.index(tok.eos_token_id) + 1]) == example.tactic + "</s>"
    assert tok.eos_token_id in end_token_ids(trainer.model, tok)

    # learned: the reply ends with the end token, well before the token limit
    trl_trainer.args.max_steps = 60
    trl_trainer.args.learning_rate = 5e-3
    trl_trainer.train()
    generator = TacticGenerator.from_model(trl_trainer.model, tok, method="greedy")
    ((text, _, length),) = generator.generate_counted(
        [generator.prompt_text(example.state)], k=1, max_new_tokens=64
    )[0]
    assert text.strip() == example.tactic
    assert length < 64


def test_padding_free_batches_compute_the_loss_of_padded_ones(tiny_dir, sample_dir, tmp_path):
    """Padding-free batches (one sequence of the examples, their positions restarting at each)
    give each token the loss it has in a padded batch, with sdpa on this CPU: each example
    attends to itself only."""
    import torch
    from datasets import Dataset

    rows = real_rows(sample_dir, 6)
    losses = {}
    for padding_free in (False, True):
        trainer = SFTTrainer(str(tiny_dir), output_dir=tmp_path / "out", padding_free=padding_free)
        args = trainer.trl_arguments(tmp_path / "work")
        assert args["padding_free"] is padding_free
        assert args["train_sampling_strategy"] == ("random" if padding_free else "group_by_length")
        assert args["max_length"] == (None if padding_free else 1024)  # fitted before TRL
        # fewer than 8 batches' worth of examples: nothing to group, the random order stays
        few = trainer.trl_arguments(tmp_path / "work", examples=7)
        assert few["train_sampling_strategy"] == "random"
        trl_trainer = trainer.build_trl_trainer(
            Dataset.from_list([trainer.example_row(r) for r in rows]), None, tmp_path / "work"
        )
        batch = trl_trainer.data_collator([trl_trainer.train_dataset[i] for i in range(6)])
        if padding_free:
            assert "attention_mask" not in batch and batch["input_ids"].shape[0] == 1
            lengths = [len(trl_trainer.train_dataset[i]["input_ids"]) for i in range(6)]
            assert batch["input_ids"].shape[1] == sum(lengths)  # not a token of padding
        model = trainer.model.eval()
        with torch.no_grad():
            inputs = {k: v for k, v in batch.items() if k != "labels"}
            logits = model(**inputs, use_cache=False).logits.float()
        labels = batch["labels"]
        shifted = torch.nn.functional.cross_entropy(
            logits[:, :-1].reshape(-1, logits.shape[-1]),
            labels[:, 1:].reshape(-1),
            reduction="sum",
            ignore_index=-100,
        )
        losses[padding_free] = (float(shifted), int((labels != -100).sum()))
    assert losses[True][1] == losses[False][1]  # the same tokens are taught
    assert losses[True][0] == pytest.approx(losses[False][0], rel=1e-4)
