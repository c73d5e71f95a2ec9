"""LeanDojo-v2's examples run with their ``lean_dojo_v2`` imports unchanged (the compatibility
package in ``compat/``): each test is this project's own copy of an example's call forms
(``examples/sft.py``, ``lora.py``, ``grpo.py``, ``lean_agent.py``, ``lean_progress.py``,
``external_api.py``, ``theorem_proving/generate_tactics.py``) with only the model swapped for a
tiny one built here and ``setup_github_repository`` (which needs Lean and the network) swapped
for ``setup_dataset`` on LeanDojo-v2's own export. Without Lean, ``prove()`` replays recorded
steps and says so."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from leanloop.data.records import AttemptStatus
from leanloop.errors import LeanloopError
from tests.tiny_causal import shared_tiny_model

# transformers itself calls its deprecated name while TRL trains
pytestmark = pytest.mark.filterwarnings(
    "ignore:`is_gradient_checkpointing` is deprecated:FutureWarning"
)


@pytest.fixture(autouse=True)
def fresh_notice(monkeypatch):
    """Each test is a fresh process as far as the one-line notice goes."""
    from lean_dojo_v2 import _notice

    monkeypatch.setattr(_notice, "_state", {"said": False, "quiet": False})
    monkeypatch.delenv("LEANLOOP_COMPAT_QUIET", raising=False)


@pytest.fixture
def v2(fixtures) -> Path:
    return fixtures / "leandojo_v2_files"


@pytest.fixture
def user_dir(tmp_path, monkeypatch, v2) -> Path:
    """A LeanDojo-v2 user's working directory: their dynamic_database.json beside the script."""
    monkeypatch.chdir(tmp_path)
    shutil.copyfile(v2 / "dynamic_database.json", tmp_path / "dynamic_database.json")
    return tmp_path


@pytest.fixture
def model(sample_dir) -> str:
    return str(shared_tiny_model(sample_dir))


def first_repository_export(v2: Path, out: Path, limit: int | None = None) -> Path:
    """LeanDojo-v2's export of its first repository alone (one curriculum step), or of its
    first ``limit`` theorems in random/train (a few training steps)."""
    source = v2 / "export_merged_data"
    metadata = json.loads((source / "metadata.json").read_text())
    first = metadata["repositories"][0]
    for scheme in ("random", "novel_premises"):
        (out / scheme).mkdir(parents=True)
        for split in ("train", "val", "test"):
            theorems = json.loads((source / scheme / f"{split}.json").read_text())
            kept = [t for t in theorems if t["url"] == first["url"]]
            if limit is not None:
                kept = kept[:limit] if (scheme, split) == ("random", "train") else []
            (out / scheme / f"{split}.json").write_text(json.dumps(kept))
    shutil.copyfile(source / "corpus.jsonl", out / "corpus.jsonl")
    (out / "metadata.json").write_text(json.dumps({**metadata, "repositories": [first]}))
    return out


@pytest.fixture
def mathlib_only(v2, tmp_path) -> Path:
    return first_repository_export(v2, tmp_path / "mathlib-export")


@pytest.fixture
def two_theorems(v2, tmp_path) -> Path:
    return first_repository_export(v2, tmp_path / "small-export", limit=2)


def notices(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "lean_dojo_v2"]


def check_replayed(reports, *, replays: bool = True) -> None:
    """prove() on repositories set up from a dataset: a replay, never a proof, nothing written
    (``replays``: at least one theorem was replayed; a dataset without a test split has none)."""
    assert reports and all(report.environment == "replay" for report in reports)
    assert any(report.rows for report in reports) == replays
    assert all(not report.written for report in reports)
    statuses = {row.status for report in reports for row in report.rows}
    assert statuses <= {AttemptStatus.REPLAYED, AttemptStatus.FAILED}


@pytest.mark.slow
def test_the_sft_example(user_dir, v2, model, caplog):
    from lean_dojo_v2.agent.hf_agent import HFAgent
    from lean_dojo_v2.trainer.sft_trainer import SFTTrainer

    before = (user_dir / "dynamic_database.json").read_bytes()
    with caplog.at_level(logging.WARNING):
        trainer = SFTTrainer(
            model_name=model,
            output_dir="outputs-deepseek",
            epochs_per_repo=1,
            batch_size=2,
            lr=2e-5,
        )

        agent = HFAgent(trainer=trainer)

        agent.setup_dataset(v2 / "export_merged_data")

        agent.train()
        reports = agent.prove()

    # the user's LeanDojo-v2 database was imported, not emptied
    assert (user_dir / "dynamic_database.json").read_bytes() == before
    names = {r.name for r in agent.database.get_repositories()}
    assert names == {r["name"] for r in json.loads(before)["repositories"]}  # the same repositories
    assert len(trainer.reports) == len(names)  # one curriculum step per repository
    latest = (user_dir / "outputs-deepseek" / "LATEST").read_text().strip()
    assert (user_dir / "outputs-deepseek" / latest / "config.json").is_file()
    assert agent.prover.name == "hf:outputs-deepseek" and not agent.prover.use_lora
    check_replayed(reports)
    # the differences are said once, however many objects were made
    (notice,) = notices(caplog)
    assert "never wiped" in notice and "Lean accepted" in notice and "GitHub token" in notice


@pytest.mark.slow
def test_the_lora_example(tmp_path, monkeypatch, two_theorems, model):
    from peft import LoraConfig

    from lean_dojo_v2.agent.hf_agent import HFAgent
    from lean_dojo_v2.trainer.sft_trainer import SFTTrainer

    monkeypatch.chdir(tmp_path)
    lora_config = LoraConfig(
        r=16,
        lora_alpha=32,
        target_modules=["q_proj", "v_proj", "k_proj", "o_proj"],
        lora_dropout=0.1,
    )

    trainer = SFTTrainer(
        model_name=model,
        output_dir="outputs-deepseek-lora",
        epochs_per_repo=5,
        batch_size=2,
        lr=2e-5,
        lora_config=lora_config,
    )

    agent = HFAgent(trainer=trainer)
    agent.setup_dataset(two_theorems)
    (checkpoint,) = agent.train()
    reports = agent.prove()

    assert agent.use_lora and agent.prover.use_lora
    assert (checkpoint / "adapter_config.json").is_file()
    (report,) = trainer.reports
    assert report.global_steps == 5 * -(-report.train_examples // 2)  # 5 epochs of batches of 2
    check_replayed(reports, replays=False)


@pytest.mark.slow
def test_the_grpo_example(tmp_path, monkeypatch, two_theorems, model):
    import torch

    from lean_dojo_v2.agent.hf_agent import HFAgent
    from lean_dojo_v2.trainer.grpo_trainer import GRPOTrainer
    from leanloop.trainer.grpo import ZeroAdvantageWarning

    monkeypatch.chdir(tmp_path)
    calls = []

    def reward_func(completions, **kwargs):
        calls.append(len(completions))
        return torch.tensor([1.0] * len(completions))

    trainer = GRPOTrainer(
        model_name=model,
        output_dir="outputs-deepseek",
        reward_func=reward_func,
        epochs_per_repo=1,
        batch_size=8,
        lr=2e-5,
    )

    agent = HFAgent(trainer=trainer)
    agent.setup_dataset(two_theorems)
    with pytest.warns(ZeroAdvantageWarning):  # the example's constant reward teaches nothing
        agent.train()
    reports = agent.prove()

    assert calls and all(n > 0 for n in calls)  # the reward saw the sampled completions
    (report,) = trainer.reports
    assert report.global_steps > 0
    check_replayed(reports, replays=False)


def test_the_lean_agent_example(tmp_path, monkeypatch, v2, mathlib_only, tiny_encoder, model):
    """LeanDojo-v2's LeanAgent took its generator from a fixed file; leanloop's asks for one,
    and says so in one line. The configuration is LeanDojo-v2's file of both parts, with the
    retriever swapped for the tiny encoder, a few training steps and small search budgets."""
    import yaml

    from lean_dojo_v2.agent.lean_agent import LeanAgent
    from lean_dojo_v2.lean_agent.config import ProverConfig, TrainingConfig

    both = yaml.safe_load((v2 / "ldv2_both.yaml").read_text())
    both["training"].update(
        model_name=str(tiny_encoder),
        precision="32-true",
        max_steps=2,
        batch_size=4,
        max_seq_len=64,
        fisher_max_samples=8,
        num_workers=0,
        enable_progress_bar=False,
    )
    both["prover"].update(num_sampled_tactics=4, max_expansions=4, num_workers=1)  # no Ray
    monkeypatch.chdir(tmp_path)
    Path("configs.yaml").write_text(yaml.safe_dump(both))

    agent = LeanAgent(
        training_config=TrainingConfig.from_yaml("configs.yaml"),
        prover_config=ProverConfig.from_yaml("configs.yaml"),
    )
    agent.setup_dataset(mathlib_only)  # a repository whose proofs use premises

    checkpoints = agent.train()
    with pytest.raises(LeanloopError, match="LeanAgent proves with a tactic generator") as error:
        agent.prove()
    assert "LeanAgent(generator=...)" in str(error.value)

    assert len(checkpoints) == len(agent.database.get_repositories())
    assert agent.prover_config.batch_size == both["prover"]["batch_size"]
    assert agent.lifelong is not None and len(agent.lifelong.recall) == len(checkpoints)
    agent.generator = model  # what leanloop asks for
    check_replayed(agent.prove())


def test_the_lean_progress_example(tmp_path, monkeypatch, tiny_encoder):
    """examples/lean_progress.py after ``python -m lean_dojo_v2.lean_progress.
    create_sample_dataset``; then the scorer reads the model as LEANPROGRESS_MODEL names it."""
    import os

    monkeypatch.chdir(tmp_path)
    sample_dataset_path = Path("raid/data/sample_leanprogress_dataset.jsonl")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "lean_dojo_v2.lean_progress.create_sample_dataset",
            "--output",
            str(sample_dataset_path),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    from lean_dojo_v2.lean_progress import create_sample_dataset

    rows = [json.loads(line) for line in sample_dataset_path.read_text().splitlines()]
    assert rows == create_sample_dataset.SAMPLE_DATA

    from lean_dojo_v2.trainer.progress_trainer import ProgressTrainer

    trainer = ProgressTrainer(
        model_name=str(tiny_encoder),
        data_path=str(sample_dataset_path),
        output_dir="outputs-progress",
    )

    metrics = trainer.train()
    assert len(metrics["history"]) == 3  # LeanDojo-v2's default of 3 epochs

    from lean_dojo_v2.external_api.python.leanprogress import LeanProgressScorer

    monkeypatch.setenv("LEANPROGRESS_MODEL", "outputs-progress")
    scorer = LeanProgressScorer()
    row = rows[2]
    value = scorer.predict(row["goal"], row["tactic"], row["prefix"])
    assert value >= 0 and value == scorer.predict(
        goal=row["goal"], tactic=row["tactic"], prefix=row["prefix"]
    )


def test_train_steps_model_from_the_command_line(tmp_path, monkeypatch, tiny_encoder):
    """``train_steps_model --dataset --output-dir --model-name``, run as a module."""
    import runpy

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["create_sample_dataset", "--output", "rows.jsonl"])
    runpy.run_module("lean_dojo_v2.lean_progress.create_sample_dataset", run_name="__main__")
    argv = [
        "train_steps_model",
        "--dataset",
        "rows.jsonl",
        "--output-dir",
        "steps",
        "--model-name",
        str(tiny_encoder),
        "--epochs",
        "1",
        "--max-length",
        "64",
    ]
    monkeypatch.setattr(sys, "argv", argv)
    runpy.run_module("lean_dojo_v2.lean_progress.train_steps_model", run_name="__main__")
    saved = json.loads((tmp_path / "steps" / "progress_metrics.json").read_text())
    assert saved["model_name"] == str(tiny_encoder) and saved["train_rows"] > 0
    assert (tmp_path / "steps" / "config.json").is_file()


def test_the_lean_agent_on_both_repositories_skips_the_one_without_premises(
    tmp_path, monkeypatch, v2, tiny_encoder, caplog
):
    """LeanDojo-v2's export of two repositories, one whose proofs use no premise of the corpus:
    that one has nothing to train the retriever on; it is skipped with a message and recorded as
    skipped (its checkpoint is the model it started from), and the curriculum goes on."""
    from lean_dojo_v2.agent.lean_agent import LeanAgent
    from lean_dojo_v2.lean_agent.config import TrainingConfig

    monkeypatch.chdir(tmp_path)
    agent = LeanAgent(
        training_config=TrainingConfig(
            model_name=str(tiny_encoder),
            precision="32-true",
            max_steps=2,
            batch_size=4,
            max_seq_len=64,
            fisher_max_samples=8,
            num_workers=0,
            enable_progress_bar=False,
        )
    )
    agent.setup_dataset(v2 / "export_merged_data")
    with caplog.at_level(logging.WARNING):
        checkpoints = agent.train()

    repositories = agent.database.get_repositories()
    assert len(repositories) == 2 and len(checkpoints) == 2
    reports = {report.url: report for report in agent.trainer.reports}
    skipped = [report for report in reports.values() if report.skipped]
    trained = [report for report in reports.values() if not report.skipped]
    assert len(skipped) == 1 and len(trained) == 1
    assert skipped[0].train_steps == 0 and skipped[0].optimizer_steps == 0
    assert "uses a premise of the corpus" in skipped[0].skipped
    assert trained[0].train_steps > 0 and trained[0].optimizer_steps > 0
    assert all(checkpoint.is_dir() for checkpoint in checkpoints)
    said = [r.getMessage() for r in caplog.records if "nothing to train" in r.getMessage()]
    assert len(said) == 1 and skipped[0].repository in said[0]
