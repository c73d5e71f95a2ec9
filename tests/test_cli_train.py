"""``leanloop train sft|grpo|retrieval|progress`` and ``leanloop evaluate ...``: the YAML config
mirrors the Python arguments and options override it, training runs on the database's
repositories (tiny models, a few steps), the evaluation reads what was trained, every option is
documented, and bad input is one line."""

from __future__ import annotations

import json

import pytest
import typer
from typer.core import TyperOption

from leanloop.cli.app import app, main
from leanloop.ml.generation import CHECKPOINT_INFO
from tests.conftest import REPO_ROOT
from tests.helpers import assert_one_line_error, moved, run_cli, sample_theorems, write_dataset
from tests.tiny_causal import shared_tiny_model

pytestmark = pytest.mark.filterwarnings(
    "ignore:`is_gradient_checkpointing` is deprecated:FutureWarning"
)

COMMANDS = [
    ("train", "sft"),
    ("train", "grpo"),
    ("train", "retrieval"),
    ("train", "progress"),
    ("evaluate", "tactics"),
    ("evaluate", "retrieval"),
    ("evaluate", "progress"),
    ("prove",),
]


@pytest.fixture(scope="module")
def db(sample_dir, tmp_path_factory) -> str:
    """The real sample as two repositories (its first 100 theorems, the other 77)."""
    root = tmp_path_factory.mktemp("train-db")
    theorems = sample_theorems(sample_dir)
    first = [moved(t, url="https://github.com/example/lean-a", commit="a" * 40) for t in theorems]
    second = [
        moved(t, url="https://github.com/example/lean-b", commit="b" * 40) for t in theorems[100:]
    ]
    path = str(root / "lean.db")
    for name, part in (("a", first[:100]), ("b", second)):
        dataset = write_dataset(root / name, {"random/test": part})
        assert main(["db", "import", str(dataset), "--db", path]) == 0
    return path


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_option_is_documented(command, capsys):
    group = typer.main.get_command(app)
    found = group
    for name in command:
        found = found.commands[name]
    options = [p for p in found.params if isinstance(p, TyperOption)]
    assert options and all(p.help for p in options), [p.name for p in options if not p.help]
    code, out, _ = run_cli(capsys, *command, "--help")
    assert code == 0 and found.help.split()[0] in out
    for option in options:
        assert option.opts[0] in out


def test_sft_from_a_config_with_options_on_top(capsys, db, sample_dir, tmp_path):
    config = tmp_path / "sft.yaml"
    out = tmp_path / "sft"
    config.write_text(
        f"model_name: {shared_tiny_model(sample_dir)}\noutput_dir: {tmp_path / 'elsewhere'}\n"
        "batch_size: 8\nmax_steps: 5\nprogress_bars: false\nevaluate: false\n"
        "plot_curves: false\n"
    )
    argv = ["train", "sft", "--config", config, "--db", db, "--output-dir", out]
    code, stdout, err = run_cli(
        capsys, *argv, "--batch-size", "2", "--max-steps", "2", "--repo", "example/lean-b"
    )
    assert code == 0, err
    assert "training on 1 repository: example/lean-b@bbbbbbbbbbbb" in stdout
    assert "1. example/lean-b@bbbbbbbbbbbb:" in stdout and "2 steps" in stdout
    (checkpoint,) = [p for p in out.iterdir() if p.name.startswith("repo00-")]
    info = json.loads((checkpoint / CHECKPOINT_INFO).read_text())
    assert info["config"]["batch_size"] == 2 and info["config"]["max_steps"] == 2
    assert not (tmp_path / "elsewhere").exists()
    assert (out / "data" / "random" / "train.json").is_file()

    code, stdout, err = run_cli(
        capsys,
        "evaluate",
        "tactics",
        "--checkpoint",
        out,
        "--db",
        db,
        "--data",
        tmp_path / "export",
        "--k",
        "2",
        "--max-steps",
        "6",
        "--json",
    )
    assert code == 0, err
    result = json.loads(stdout)
    assert result["kind"] == "tactics" and result["steps"] == 6 and result["k"] == 2
    assert result["checkpoint"] == str(checkpoint) and result["split"] == "random/test"
    assert (tmp_path / "export" / "random" / "test.json").is_file()


@pytest.mark.filterwarnings("ignore:GRPO on example/lean-b")  # 1 step: rewards may all tie
def test_grpo_rewards_by_name(capsys, db, sample_dir, tmp_path, monkeypatch):
    config = tmp_path / "grpo.yaml"
    config.write_text(
        f"model_name: {shared_tiny_model(sample_dir)}\nreward_func: [exact_match]\n"
        "max_completion_length: 8\nbatch_size: 2\nnum_generations: 2\nmax_steps: 1\n"
        "progress_bars: false\nevaluate: false\nplot_curves: false\n"
    )
    out = tmp_path / "grpo"
    code, stdout, err = run_cli(
        capsys,
        "train",
        "grpo",
        "--config",
        config,
        "--db",
        db,
        "--repo",
        "example/lean-b",
        "--output-dir",
        out,
        "--reward",
        "format",
        "--reward",
        "length",
    )
    assert code == 0, err
    assert "1. example/lean-b@bbbbbbbbbbbb:" in stdout and "1 step in" in stdout
    assert (out / "LATEST").is_file()
    # a reward that needs Lean says so, in one line
    code, _, err = run_cli(
        capsys, "train", "grpo", "--config", config, "--db", db, "--reward", "lean"
    )
    assert_one_line_error(code, err, "--lean-project")
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))  # no Lean, wherever the test runs
    monkeypatch.setenv("ELAN_HOME", str(tmp_path / "no-elan"))
    code, _, err = run_cli(
        capsys, "train", "grpo", "--config", config, "--db", db, "--reward", "lean",
        "--lean-project", REPO_ROOT / "examples" / "lean-project",
    )  # fmt: skip
    assert_one_line_error(code, err, "no Lean toolchain", "elan")
    code, _, err = run_cli(capsys, "train", "grpo", "--config", config, "--db", db, "--reward", "x")
    assert_one_line_error(code, err, "unknown reward 'x'", "exact_match")


def test_retrieval_records_the_lifelong_matrix(capsys, db, tiny_encoder, tmp_path):
    config = tmp_path / "retrieval.yaml"
    out = tmp_path / "retriever"
    config.write_text(
        f"model_name: {tiny_encoder}\noutput_dir: {out}\nmax_epochs: 1\nwarmup_steps: 1\n"
        "max_seq_len: 96\nnum_retrieved: 20\nfisher_max_samples: 16\n"
        "enable_progress_bar: false\n"
    )
    code, stdout, err = run_cli(
        capsys, "train", "retrieval", "--config", config, "--db", db, "--max-steps", "2"
    )
    assert code == 0, err
    assert "training on 2 repositories" in stdout and "lifelong R@10" in stdout
    matrix = json.loads((out / "lifelong.json").read_text())
    assert [len(row) for row in matrix["recall"]] == [1, 2]
    code, stdout, err = run_cli(
        capsys, "evaluate", "retrieval", "--checkpoint", out, "--dataset", out / "data", "--json"
    )
    assert code == 0, err
    result = json.loads(stdout)
    assert result["kind"] == "retrieval" and result["steps"] > 0
    assert 0 <= result["recall_at_1"] <= result["recall_at_10"] <= 1


def test_progress_trains_on_the_database_and_evaluates(capsys, db, tiny_encoder, tmp_path):
    out = tmp_path / "progress"
    code, stdout, err = run_cli(
        capsys,
        "train",
        "progress",
        "--db",
        db,
        "--model",
        tiny_encoder,
        "--output-dir",
        out,
        "--epochs",
        "1",
        "--batch-size",
        "32",
    )
    assert code == 0, err
    assert f"progress rows from 2 repositories in {out / 'data' / 'progress.jsonl'}" in stdout
    assert "validation MSE" in stdout
    code, stdout, err = run_cli(
        capsys, "evaluate", "progress", "--checkpoint", out, "--db", db, "--data",
        tmp_path / "export", "--json",
    )  # fmt: skip
    assert code == 0, err
    result = json.loads(stdout)
    assert result["kind"] == "progress" and result["rows"] > 0 and result["mae"] >= 0


def test_bad_input_is_one_line(capsys, db, tmp_path):
    code, _, err = run_cli(capsys, "train", "sft", "--db", db)
    assert_one_line_error(code, err, "field 'model_name': the field is missing")
    config = tmp_path / "bad.yaml"
    config.write_text("model_name: tinycoder\nlearning_rate: 0.1\n")
    code, _, err = run_cli(capsys, "train", "sft", "--config", config, "--db", db)
    assert_one_line_error(code, err, f"{config}, line 2, field 'learning_rate': unknown field")
    code, _, err = run_cli(capsys, "train", "sft", "--model", "m", "--db", tmp_path / "none.db")
    assert_one_line_error(code, err, "no database at")
    code, _, err = run_cli(capsys, "train", "retrieval", "--db", db, "--repo", "nobody/nothing")
    assert_one_line_error(code, err, "no repository 'nobody/nothing'")
    code, _, err = run_cli(
        capsys, "train", "sft", "--config", tmp_path / "missing.yaml", "--db", db
    )
    assert_one_line_error(code, err, "the configuration file does not exist")

    code, _, err = run_cli(capsys, "evaluate", "tactics", "--db", db)
    assert_one_line_error(code, err, "field 'checkpoint': the field is missing")
    code, _, err = run_cli(
        capsys, "evaluate", "tactics", "--checkpoint", tmp_path, "--dataset", tmp_path
    )
    assert_one_line_error(code, err, "missing data split file")
    (tmp_path / "random").mkdir()
    (tmp_path / "random" / "test.json").write_text("[]")
    code, _, err = run_cli(
        capsys, "evaluate", "progress", "--checkpoint", tmp_path / "none", "--dataset", tmp_path
    )
    assert_one_line_error(code, err, "checkpoint", "none: no such file or directory")
    code, _, err = run_cli(capsys, "evaluate", "retrieval", "--checkpoint", "x", "--k", "5")
    assert code == 2 and "Traceback" not in err  # a usage error: R@10 needs 10
