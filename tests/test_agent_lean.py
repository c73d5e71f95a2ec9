"""LeanAgent: the retriever trained on two repositories in curriculum order with the matrix of R@10
by (trained up to, evaluated on) recorded after each, its figures (average accuracy, backward
transfer, forgetting) as the continual-learning literature defines them, evaluation, proving
with RetrievalProver over the replay, and ``python -m leanloop.agent.lean_agent`` from YAML."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from leanloop.agent import LeanAgent, LifelongMatrix, RetrievalEvaluation
from leanloop.agent.lean_agent import LeanAgentConfig, main
from leanloop.data.records import AttemptStatus
from leanloop.errors import LeanloopError
from tests.conftest import REPO_ROOT
from tests.helpers import moved, sample_theorems, write_dataset
from tests.tiny_causal import shared_tiny_model

REPO_A = ("https://github.com/example/lean-a", "a" * 40)
REPO_B = ("https://github.com/example/lean-b", "b" * 40)


@pytest.fixture(scope="module")
def datasets(sample_dir, tmp_path_factory):
    """The real sample as two repositories' datasets (its first 100 theorems, the other 77)."""
    root = tmp_path_factory.mktemp("two")
    theorems = sample_theorems(sample_dir)
    first = [moved(t, url=REPO_A[0], commit=REPO_A[1]) for t in theorems[:100]]
    second = [moved(t, url=REPO_B[0], commit=REPO_B[1]) for t in theorems[100:]]
    return (
        write_dataset(root / "a", {"random/test": first}),
        write_dataset(root / "b", {"random/test": second}),
    )


def training(encoder, output_dir, **changes) -> dict:
    return {
        "model_name": str(encoder),
        "output_dir": str(output_dir),
        "max_epochs": 1,
        "max_steps": 3,
        "warmup_steps": 1,
        "batch_size": 8,
        "max_seq_len": 96,
        "num_retrieved": 20,
        "fisher_max_samples": 16,
        "enable_progress_bar": False,
        **changes,
    }


def test_lifelong_figures_follow_their_definitions():
    matrix = LifelongMatrix()
    assert matrix.figures() == {
        "average_accuracy": None,
        "backward_transfer": None,
        "forgetting": None,
    }
    matrix.add_row("a", "c0", [0.5], [10])
    matrix.add_row("b", "c1", [0.75, 0.4], [10, 8])
    matrix.add_row("c", "c2", [0.25, None, 0.9], [10, 0, 5])
    # A = mean of the last row over the cells that have a value
    assert matrix.average_accuracy == pytest.approx((0.25 + 0.9) / 2)
    # BWT = mean over j < T-1 of R[T-1][j] - R[j][j]; repository b has no last value
    assert matrix.backward_transfer == pytest.approx(0.25 - 0.5)
    # F = mean over j < T-1 of max_{j<=l<T-1} R[l][j] - R[T-1][j]
    assert matrix.forgetting == pytest.approx(0.75 - 0.25)


def test_forgetting_is_negative_where_the_last_checkpoint_is_best():
    """Chaudhry et al.'s forgetting is not clamped at 0: a repository the last checkpoint
    handles better than every earlier one counts with a negative term."""
    matrix = LifelongMatrix()
    matrix.add_row("a", "c0", [0.25], [10])
    matrix.add_row("b", "c1", [0.5, 0.5], [10, 8])
    matrix.add_row("c", "c2", [0.75, 0.25, 0.9], [10, 8, 5])
    # a: best earlier 0.5, last 0.75 -> -0.25; b: best earlier 0.5, last 0.25 -> 0.25
    assert matrix.forgetting == pytest.approx((-0.25 + 0.25) / 2)
    clamped = (max(0.0, 0.5 - 0.75) + max(0.0, 0.5 - 0.25)) / 2
    assert matrix.forgetting != pytest.approx(clamped)
    two = LifelongMatrix()
    two.add_row("a", "c0", [0.4], [10])
    two.add_row("b", "c1", [0.6, 0.3], [10, 8])
    assert two.forgetting == pytest.approx(-0.2)
    assert two.figures()["forgetting"] == pytest.approx(-two.backward_transfer)


def test_lean_agent_records_the_lifelong_matrix(datasets, tiny_encoder, sample_dir, tmp_path):
    out = tmp_path / "retriever"
    agent = LeanAgent(
        tmp_path / "lean.db",
        training(tiny_encoder, out),
        {"num_sampled_tactics": 4, "max_expansions": 3},
        generator=shared_tiny_model(sample_dir),
    )
    assert agent._get_build_deps() is True
    for dataset in datasets:
        agent.setup_dataset(dataset)
    order = agent.curriculum()
    checkpoints = agent.train()
    assert [c.parent for c in checkpoints] == [out, out]
    matrix = agent.lifelong
    assert matrix.repositories == [f"{r.name}@{r.commit[:8]}" for r in order]
    assert [len(row) for row in matrix.recall] == [1, 2]  # each repository trained on so far
    assert matrix.checkpoints == [str(c) for c in checkpoints]
    assert all(steps > 0 for row in matrix.steps for steps in row)
    assert all(0.0 <= v <= 1.0 for row in matrix.recall for v in row)
    stored = json.loads((out / "lifelong.json").read_text())
    assert stored["recall"] == matrix.recall
    assert stored["backward_transfer"] == pytest.approx(matrix.recall[1][0] - matrix.recall[0][0])
    # one earlier checkpoint: F is its value less the last one, negative when it improved
    assert stored["forgetting"] == pytest.approx(matrix.recall[0][0] - matrix.recall[1][0])
    assert (out / "lifelong.png").read_bytes()[:4] == b"\x89PNG"

    result = agent.evaluate()
    assert isinstance(result, RetrievalEvaluation) and result.steps > 0
    assert 0.0 <= result.recall_at_1 <= result.recall_at_10 <= 1.0

    reports = agent.prove(out_dir=tmp_path / "reports")
    assert [r.environment for r in reports] == ["replay", "replay"]
    assert agent.prover.name.startswith(f"retrieval:{out}+")
    for report in reports:
        assert report.rows and all(
            row.status in (AttemptStatus.REPLAYED, AttemptStatus.FAILED) for row in report.rows
        )


def test_lean_agent_without_a_generator_says_so(datasets, tiny_encoder, tmp_path):
    agent = LeanAgent(tmp_path / "lean.db", training(tiny_encoder, tmp_path / "out"))
    agent.setup_dataset(datasets[0])
    with pytest.raises(LeanloopError, match="LeanAgent proves with a tactic generator"):
        agent.prove()


def test_the_module_runs_lean_agent_from_yaml(datasets, tiny_encoder, sample_dir, tmp_path, capsys):
    config = tmp_path / "lean_agent.yaml"
    out = tmp_path / "retriever"
    lines = [
        f"database: {tmp_path / 'lean.db'}",
        f"generator: {shared_tiny_model(sample_dir)}",
        "repositories:",
        f"  - dataset: {datasets[0]}",
        f"  - dataset: {datasets[1]}",
        "training:",
        *(f"  {key}: {value}" for key, value in training(tiny_encoder, out).items()),
        "prover:",
        "  num_sampled_tactics: 2",
        "  max_expansions: 2",
    ]
    config.write_text("\n".join(lines) + "\n")
    assert main(["--config", str(config)]) == 0
    out_text = capsys.readouterr().out
    assert out_text.count("set up example/lean-") == 2
    assert "trained 2 repositories" in out_text and "lifelong R@10: average accuracy" in out_text
    assert out_text.count("replay of recorded steps, not proving") == 2
    assert (out / "lifelong.json").is_file()


def test_the_module_explains_its_configuration(tmp_path, capsys):
    # no configuration: what to provide, not a hard-coded GitHub repository
    result = subprocess.run(
        [sys.executable, "-m", "leanloop.agent.lean_agent"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env={"PYTHONPATH": str(REPO_ROOT / "src"), "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "needs --config FILE" in result.stderr and "repositories:" in result.stderr

    config = tmp_path / "bad.yaml"
    config.write_text("repositories:\n  - dataset: d\ntraining:\n  lr: -1\n")
    assert main(["--config", str(config)]) == 1
    err = capsys.readouterr().err
    assert f"{config}, line 4, field 'training.lr'" in err and len(err.strip().splitlines()) == 1

    config.write_text("repositories:\n  - url: https://example.org/x\n")
    assert main(["--config", str(config)]) == 1
    assert "field 'repositories[0]': commit goes with url" in capsys.readouterr().err
    config.write_text("training: {}\n")
    assert main(["--config", str(config)]) == 1
    assert "field 'repositories': the field is missing" in capsys.readouterr().err
    config.write_text("repositories: []\n")
    assert main(["--config", str(config)]) == 1
    assert "must list at least one repository" in capsys.readouterr().err
    config.write_text("repositories: [{path: p}]\nprover: {strategy: sideways}\n")
    with pytest.raises(LeanloopError, match=r"bad\.yaml, line \d+, field 'prover\.strategy'"):
        LeanAgentConfig.from_yaml(config)
