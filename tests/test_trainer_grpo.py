"""GRPOTrainer: dataset columns reach the reward functions, a constant reward gives zero
advantages and a warning, LoRA curriculum over two repositories, built-in rewards, and errors."""

from __future__ import annotations

import json
import logging
import warnings

import pytest

from leanloop.data.prompt import PromptFormat
from leanloop.data.records import strip_premise_marks
from leanloop.errors import LeanloopError
from leanloop.ml.models import latest_checkpoint
from leanloop.trainer.grpo import GRPOTrainer, ZeroAdvantageWarning
from leanloop.trainer.grpo_config import DEFAULT_NUM_GENERATIONS, generation_plan
from leanloop.trainer.rewards import (
    LengthPenalty,
    as_reward_list,
    combine,
    completion_text,
    exact_match_reward,
    format_reward,
    length_penalty,
)
from tests.helpers import sample_theorems
from tests.tiny_causal import (
    record_starts,
    same_weights,
    shared_tiny_model,
    two_repository_db,
    weights,
)

FAST = {
    "batch_size": 4,
    "num_generations": 4,
    "max_steps": 2,
    "max_completion_length": 8,
    "logging_steps": 1,
    "progress_bars": False,
}


# transformers itself calls its deprecated name while TRL trains
pytestmark = pytest.mark.filterwarnings(
    "ignore:`is_gradient_checkpointing` is deprecated:FutureWarning"
)


@pytest.fixture(scope="module")
def tiny_dir(sample_dir):
    return shared_tiny_model(sample_dir)


@pytest.fixture
def one_repo(tmp_path, sample_dir):
    database, repos = two_repository_db(tmp_path / "lean.db", sample_dir)
    return database, repos[:1]


def test_constant_reward_gives_zero_advantages_and_a_warning(sample_dir, one_repo, tmp_path):
    import torch

    database, repos = one_repo
    qwen3 = shared_tiny_model(sample_dir, "qwen3")

    def reward_func(completions, **kwargs):  # LeanDojo-v2's example reward
        return torch.tensor([1.0] * len(completions))

    trainer = GRPOTrainer(str(qwen3), reward_func, output_dir=tmp_path / "out", **FAST)
    assert trainer.model.config.model_type == "qwen3"
    with pytest.warns(ZeroAdvantageWarning, match="every advantage was zero"):
        trainer.train(repos, database, tmp_path / "data")
    assert len(trainer.advantages) == 2  # one generation batch per step
    for advantages in trainer.advantages:
        assert advantages.shape == (4,)
        assert torch.count_nonzero(advantages) == 0
    report = trainer.reports[0]
    assert report.metrics["zero_advantage_batches"] == report.metrics["generation_batches"] == 2
    assert latest_checkpoint(tmp_path / "out") == report.checkpoint
    # no evaluation pass unless asked: it samples completions for every validation prompt
    assert trainer.config.evaluate is False
    assert report.val_examples == 0 and not any(k.startswith("eval_") for k in report.metrics)


def test_columns_reach_the_reward_function(tiny_dir, one_repo, sample_dir, tmp_path, caplog):
    """... and the evaluation after training, when asked, says what it measures and how far
    it has come."""
    database, repos = one_repo
    examples = {
        (row.state, row.tactic) for row in PromptFormat().examples(sample_theorems(sample_dir))
    }
    calls: list[dict] = []

    def reward_func(completions, **kwargs):
        calls.append({"completions": completions, **kwargs})
        return [float(len(completion_text(c))) for c in completions]  # varies: gibberish

    trainer = GRPOTrainer(
        str(tiny_dir),
        reward_func,
        output_dir=tmp_path / "out",
        evaluate=True,
        eval_max_examples=3,
        **FAST,
    )
    caplog.set_level(logging.INFO, logger="leanloop.trainer")
    with warnings.catch_warnings():
        warnings.simplefilter("error", ZeroAdvantageWarning)
        trainer.train(repos, database, tmp_path / "data")
    train_calls = calls[:2]  # then evaluation on the val split: 3 prompts, one call each
    assert len(calls) == 2 + 3
    report = trainer.reports[0]
    assert report.val_examples == 3 and "eval_reward" in report.metrics
    said = [r.getMessage() for r in caplog.records]
    assert (
        "GRPOTrainer: evaluating 3 prompts of the val split: the mean reward (reward_func) of "
        "4 completions sampled for each" in said
    )
    progress = [line for line in said if line.startswith("evaluated ")]
    assert progress[0].startswith("evaluated 1 of 3 prompts (")
    assert progress[-1].startswith("evaluated 3 of 3 prompts (")
    assert any(line.startswith("GRPOTrainer: evaluation done in ") for line in said)
    for call in train_calls:
        n = len(call["completions"])
        assert n == 4
        for column in ("state", "tactic", "full_name", "prompts"):
            assert len(call[column]) == n, column
        for prompt, state, tactic in zip(
            call["prompts"], call["state"], call["tactic"], strict=True
        ):
            assert prompt[-1]["content"] == strip_premise_marks(state).strip()
            assert (state, tactic) in examples
        # one prompt per group of num_generations completions
        assert len(set(call["state"])) == 1
    assert any(bool(a.ne(0).any()) for a in trainer.advantages)


def test_two_repositories_lora_with_weighted_rewards(tiny_dir, sample_dir, tmp_path, monkeypatch):
    from peft import LoraConfig

    from leanloop.ml.causal import load_causal_lm

    database, repos = two_repository_db(tmp_path / "lean.db", sample_dir, second_size=20)
    lora = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=["q_proj", "v_proj"])
    out = tmp_path / "out"
    trainer = GRPOTrainer(
        str(tiny_dir),
        [format_reward, LengthPenalty(free_chars=5, max_chars=40)],
        output_dir=out,
        lr=5e-3,
        lora_config=lora,
        reward_weights=[1.0, 0.5],
        evaluate=False,
        **{**FAST, "num_generations": 2},
    )
    starts = record_starts(trainer, monkeypatch, only="lora_")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ZeroAdvantageWarning)
        checkpoints = trainer.train(repos, database, tmp_path / "data")

    assert latest_checkpoint(out) == checkpoints[1]
    assert (out / "LATEST").read_text().strip() == checkpoints[1].name
    adapters = []
    for checkpoint in checkpoints:
        assert (checkpoint / "adapter_model.safetensors").is_file()
        assert not (checkpoint / "model.safetensors").exists()
        info = json.loads((checkpoint / "leanloop_checkpoint.json").read_text())
        assert info["trainer"] == "grpo" and info["adapter"] is True
        history = json.loads((checkpoint / "log_history.json").read_text())
        assert any("rewards/format_reward/mean" in entry for entry in history)
        assert any("rewards/length_penalty/mean" in entry for entry in history)
        loaded = load_causal_lm(checkpoint)
        assert loaded.adapter and loaded.base_model == str(tiny_dir)
        adapters.append(weights(loaded.model, "lora_"))
    assert same_weights(starts[1], adapters[0])
    assert same_weights(adapters[1], weights(trainer.model, "lora_"))


def test_reward_output_is_checked(tiny_dir, one_repo, tmp_path):
    database, repos = one_repo

    def short_rewards(completions, **kwargs):
        return [0.0]

    trainer = GRPOTrainer(str(tiny_dir), short_rewards, output_dir=tmp_path / "out", **FAST)
    with pytest.raises(LeanloopError, match="'short_rewards' returned 1 rewards for 4"):
        trainer.train(repos, database, tmp_path / "data")
    assert latest_checkpoint(tmp_path / "out") is None


def test_generation_plan():
    assert generation_plan(1) == (DEFAULT_NUM_GENERATIONS, DEFAULT_NUM_GENERATIONS)
    assert generation_plan(8) == (4, 8)
    assert generation_plan(6) == (4, 12)
    assert generation_plan(4, 1, 2) == (2, 4)
    assert generation_plan(2, 4, 8) == (8, 8)
    assert generation_plan(1, 1, 8, 16) == (8, 16)
    with pytest.raises(LeanloopError, match="batch_size=3 × gradient_accumulation_steps=1"):
        generation_plan(3, 1, 4)
    with pytest.raises(LeanloopError, match="num_generations=1"):
        generation_plan(4, 1, 1)
    with pytest.raises(LeanloopError, match="does not divide by num_generations=4"):
        generation_plan(2, 1, 4, 6)
    with pytest.raises(LeanloopError, match="not a multiple of batch_size=4"):
        generation_plan(4, 1, 2, 6)


def test_bad_arguments_fail_before_the_model_loads(tmp_path):
    # the model name is unknown too: these checks come first, so they are what the user sees
    missing = "no-such-org/no-such-model"
    with pytest.raises(LeanloopError, match="reward_func is not callable"):
        GRPOTrainer(missing, "not a function", output_dir=tmp_path)
    with pytest.raises(LeanloopError, match=r"reward_func\[1\] is not callable"):
        GRPOTrainer(missing, [format_reward, 3], output_dir=tmp_path)
    with pytest.raises(LeanloopError, match="does not divide by num_generations=4"):
        GRPOTrainer(missing, format_reward, output_dir=tmp_path, batch_size=3, num_generations=4)
    with pytest.raises(LeanloopError, match="num_generations=1"):
        GRPOTrainer(missing, format_reward, output_dir=tmp_path, num_generations=1)
    with pytest.raises(LeanloopError, match="2 weights for 1 reward functions"):
        GRPOTrainer(missing, format_reward, output_dir=tmp_path, reward_weights=[1.0, 2.0])
    with pytest.raises(LeanloopError, match="GRPOTrainer, field 'model_name': 'no-such-org/"):
        GRPOTrainer(missing, format_reward, output_dir=tmp_path)


def test_seed_defaults_work(tiny_dir, tmp_path):
    trainer = GRPOTrainer(str(tiny_dir), format_reward, output_dir=tmp_path)
    from trl import GRPOConfig

    config = GRPOConfig(**trainer.trl_arguments(tmp_path / "work"))
    assert config.per_device_train_batch_size == 1
    assert config.num_generations == DEFAULT_NUM_GENERATIONS
    assert config.generation_batch_size == DEFAULT_NUM_GENERATIONS
    assert config.bf16 is False and config.gradient_checkpointing is False


def test_builtin_rewards():
    chat = [[{"role": "assistant", "content": "simp [h]"}], [{"role": "assistant", "content": ""}]]
    assert format_reward(chat) == [1.0, 0.0]
    replies = [
        "intro x",
        "have h : p := by\n  simp",  # a tactic of several lines, as taught
        "sorry",
        "have h : p := by\n  sorry",
        "exact h\n\nThis closes the goal.",  # text after the tactic
        "```lean\nsimp\n```",  # a fence around it
        "  ",
        "admit",
        "```",
    ]
    assert format_reward(replies) == [1.0, 1.0] + [0.0] * 7
    tactics = ["rw  [mul_comm]", "simp", "exact h"]
    completions = ["rw [mul_comm] ", [{"role": "assistant", "content": "simp only"}], "exact  h"]
    assert exact_match_reward(completions, tactic=tactics) == [1.0, 0.0, 1.0]
    # a multi-line tactic matches whole (line breaks and indentation aside), not its first line
    recorded = ["have h : p := by\n  simp"] * 3
    replies = ["have h : p := by", "have h : p := by  simp", "have h : p := by\n  rfl"]
    assert exact_match_reward(replies, tactic=recorded) == [0.0, 1.0, 0.0]
    with pytest.raises(LeanloopError, match=r"3 completions but 1 tactic$"):
        exact_match_reward(replies, tactic=recorded[:1])
    with pytest.raises(LeanloopError, match="needs the 'tactic' column"):
        exact_match_reward(completions)
    assert length_penalty(["x" * 10, "x" * 40, "x" * 120, "x" * 500]) == pytest.approx(
        [0.0, 0.0, -0.5, -1.0]
    )
    both = combine(format_reward, length_penalty, weights=[2.0, 1.0])
    assert both(completions=["intro x", "sorry", "x" * 120]) == pytest.approx([2.0, 0.0, 1.5])
    with pytest.raises(LeanloopError, match="2 reward functions but 1 weights"):
        combine(format_reward, length_penalty, weights=[1.0])


def test_rewards_read_the_columns_of_prompt_examples():
    """The columns reward functions take by name are columns of PromptExample."""
    import inspect

    from leanloop.data.prompt import PromptExample
    from leanloop.trainer.lean_reward import LeanCheckedReward

    columns = set(PromptExample.columns()) - {"prompt", "completion"}
    taken = set(inspect.signature(exact_match_reward).parameters) - {"completions", "kwargs"}
    assert taken and taken <= columns
    assert LeanCheckedReward(lambda: None).state_column in columns


def test_reward_lists_are_checked():
    import numpy as np
    import torch

    assert as_reward_list(torch.tensor([1.0, 0.5]), 2) == [1.0, 0.5]
    assert as_reward_list(np.array([0, 1]), 2) == [0.0, 1.0]
    assert as_reward_list([None, True, 2], 3) == [None, 1.0, 2.0]
    with pytest.raises(LeanloopError, match=r"shape \(2, 1\)"):
        as_reward_list(torch.zeros(2, 1), 2)
    with pytest.raises(LeanloopError, match="returned 1 rewards for 2"):
        as_reward_list([1.0], 2)
    with pytest.raises(LeanloopError, match="returned float"):
        as_reward_list(1.0, 1)
    with pytest.raises(LeanloopError, match="of type str"):
        as_reward_list(["1"], 1)


def test_progress_bars_say_what_they_count(capsys):
    """With progress bars on, the training bar names the repository and the evaluation bar
    says what the evaluation measures (it was an unlabelled bar)."""
    from transformers import TrainerControl, TrainerState, TrainingArguments

    from leanloop.trainer.hf_common import labelled_progress

    bars = labelled_progress(
        "example/project", "evaluating 2 prompts of the val split: the mean reward"
    )
    args = TrainingArguments(output_dir="unused", report_to="none", use_cpu=True)
    state, control = TrainerState(max_steps=1), TrainerControl()
    bars.on_train_begin(args, state, control)
    state.global_step = 1
    bars.on_step_end(args, state, control)
    bars.on_train_end(args, state, control)
    for _ in range(2):
        bars.on_prediction_step(args, state, control, eval_dataloader=[0, 1])
    bars.on_evaluate(args, state, control)
    err = capsys.readouterr().err
    assert "training on example/project" in err
    assert "evaluating 2 prompts of the val split: the mean reward" in err and "2/2" in err
