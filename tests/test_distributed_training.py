"""Training as several processes on this machine (CPU, gloo), started as users start it: the
launcher (``torch.distributed.run``, what ``torchrun`` runs) and ``leanloop train --nproc``. The
main process alone writes the export, the checkpoint and ``LATEST``; the processes end with the
same weights; one process that fails ends the run with one line naming its rank."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from leanloop.database import DynamicDatabase
from tests.tiny_causal import shared_tiny_model

pytestmark = pytest.mark.multiprocess

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "tests" / "distributed" / "sft_run.py"
RETRIEVAL_SCRIPT = REPO / "tests" / "distributed" / "retrieval_run.py"


def _env(**extra: str) -> dict[str, str]:
    env = {
        **os.environ,
        "PYTHONPATH": f"{REPO / 'src'}{os.pathsep}{REPO}",
        "OMP_NUM_THREADS": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "HF_HUB_OFFLINE": "1",
    }
    env.pop("WORLD_SIZE", None)
    env.pop("RANK", None)
    return {**env, **extra}


def _launch(
    nproc: int, args: list[str], script: Path = SCRIPT, **env: str
) -> subprocess.CompletedProcess:
    from leanloop.cli.launch import free_port

    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes=1",
        f"--nproc-per-node={nproc}",
        "--master-addr=127.0.0.1",
        f"--master-port={free_port()}",
        str(script),
        *args,
    ]
    return subprocess.run(
        command, env=_env(**env), capture_output=True, text=True, timeout=600, cwd=REPO
    )


@pytest.fixture(scope="module")
def prepared(sample_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("ddp")
    database = DynamicDatabase(root / "db.sqlite")
    database.import_leandojo(sample_dir)
    return root, shared_tiny_model(sample_dir)


def _run(prepared, name: str, nproc: int, batch: int, steps: int, **env: str):
    root, model = prepared
    out = root / name
    args = [
        str(model),
        str(root / "db.sqlite"),
        str(out / "model"),
        str(out / "data"),
        str(out / "digests"),
        str(batch),
        str(steps),
    ]
    if nproc == 1:
        result = subprocess.run(
            [sys.executable, str(SCRIPT), *args],
            env=_env(),
            capture_output=True,
            text=True,
            timeout=600,
            cwd=REPO,
        )
    else:
        result = _launch(nproc, args, **env)
    return out, result


def test_two_processes_make_one_complete_checkpoint(prepared):
    out, result = _run(prepared, "two", nproc=2, batch=2, steps=2)
    assert result.returncode == 0, result.stderr[-3000:]
    model = out / "model"
    latest = (model / "LATEST").read_text().strip()
    checkpoints = [p for p in model.iterdir() if p.is_dir() and p.name.startswith("repo")]
    assert [p.name for p in checkpoints] == [latest]  # one checkpoint, LATEST names it
    files = {p.name for p in (model / latest).iterdir()}
    assert "config.json" in files and "model.safetensors" in files, files
    assert not [p for p in model.iterdir() if p.name.startswith(".") and "staging" in p.name]
    info = json.loads((model / latest / "leanloop_checkpoint.json").read_text())
    assert info["report"]["global_steps"] == 2
    # one export, written by the main process
    assert (out / "data" / "random" / "train.json").is_file()
    digests = [json.loads((out / "digests" / f"rank{r}").read_text()) for r in (0, 1)]
    assert digests[0]["digest"] == digests[1]["digest"]  # the processes trained one model
    assert digests[0]["steps"] == 2
    # both processes saved through the TRL trainer (under FSDP or ZeRO-3 it gathers the
    # weights from all of them), into the one staging directory the main process wrote
    assert len(digests[0]["saves"]) == len(digests[1]["saves"]) == 1
    assert digests[0]["saves"] == digests[1]["saves"]
    assert f".{latest}." in digests[0]["saves"][0]

    # one process with the doubled batch: the same examples, and a loss within tolerance
    single, result = _run(prepared, "one", nproc=1, batch=4, steps=2)
    assert result.returncode == 0, result.stderr[-3000:]
    history = {}
    for name, place in (("two", out), ("one", single)):
        checkpoint = place / "model" / (place / "model" / "LATEST").read_text().strip()
        logged = json.loads((checkpoint / "log_history.json").read_text())
        history[name] = [h for h in logged if "loss" in h]
    assert [h["epoch"] for h in history["two"]] == pytest.approx(
        [h["epoch"] for h in history["one"]]
    )  # the same number of examples seen at each step: the data is sharded, not repeated
    first_two, first_one = history["two"][0]["loss"], history["one"][0]["loss"]
    assert first_two == pytest.approx(first_one, rel=0.15)


def test_a_failing_process_ends_the_run_naming_its_rank(prepared, tmp_path):
    root, model = prepared
    command = [
        sys.executable,
        "-m",
        "leanloop",
        "train",
        "sft",
        "--db",
        str(root / "db.sqlite"),
        "--model",
        str(model),
        "--output-dir",
        str(tmp_path / "model"),
        "--data",
        str(tmp_path / "data"),
        "--max-steps",
        "1",
        "--batch-size",
        "1",
        "--nproc",
        "2",
    ]
    # the process of rank 1 dies as it starts (the test's own sitecustomize, run by Python at
    # start-up in every process that has it on its path), as a process killed by the system
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(
        "import os\nif os.environ.get('RANK') == '1':\n    os._exit(3)\n"
    )
    env = _env()
    env["PYTHONPATH"] = f"{hooks}{os.pathsep}{env['PYTHONPATH']}"
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600, cwd=REPO)
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "rank 1 (of 2)" in lines[0], result.stderr[-3000:]


def test_two_processes_train_the_retriever_with_one_fisher(prepared, tiny_encoder):
    root, _ = prepared
    runs = {}
    for name, nproc, batch in (("two", 2, 4), ("one", 1, 8)):
        out = root / f"retriever-{name}"
        args = [
            str(tiny_encoder),
            str(root / "db.sqlite"),
            str(out / "model"),
            str(out / "data"),
            str(out / "digests"),
            str(batch),
            "-1",  # one whole epoch: it ends with a validation
        ]
        if nproc == 1:
            result = subprocess.run(
                [sys.executable, str(RETRIEVAL_SCRIPT), *args],
                env=_env(),
                capture_output=True,
                text=True,
                timeout=600,
                cwd=REPO,
            )
        else:
            result = _launch(nproc, args, script=RETRIEVAL_SCRIPT)
        assert result.returncode == 0, result.stderr[-3000:]
        runs[name] = out
    model = runs["two"] / "model"
    latest = (model / "LATEST").read_text().strip()
    checkpoints = [p for p in model.iterdir() if p.is_dir() and p.name.startswith("repo")]
    assert [p.name for p in checkpoints] == [latest]
    assert not [p for p in model.iterdir() if p.name.endswith(".work")]  # cleaned once
    ranks = [json.loads((runs["two"] / "digests" / f"rank{r}").read_text()) for r in (0, 1)]
    assert ranks[0]["digest"] == ranks[1]["digest"]  # DDP kept the processes' weights equal
    # the checkpoint holds those weights: saved by Lightning with every process taking part
    assert ranks[0]["saved"] == ranks[1]["saved"] == ranks[0]["digest"]
    assert ranks[0]["fisher"] == pytest.approx(ranks[1]["fisher"], rel=1e-5)  # one Fisher
    assert ranks[0]["covers"] == ranks[1]["covers"] and len(ranks[0]["covers"]) == 1
    assert ranks[0]["fisher_samples"] == ranks[1]["fisher_samples"] > 0
    (single,) = [json.loads((runs["one"] / "digests" / "rank0").read_text())]
    # the same samples (one epoch, 8 a step in both), but dealt into batches otherwise by the
    # distributed sampler, so the weights the Fisher is taken at differ (by up to ~30 % in the
    # Fisher, with the sample's splits of a run): within 45 % of one process's, which a Fisher
    # summed over the two processes (2x) or left at one process's half (0.5x) is not
    assert ranks[0]["fisher"] == pytest.approx(single["fisher"], rel=0.45)
    # validation: each process ranked its share of the val steps; the figures logged (and
    # monitored) are those of all the steps, the same on both processes, as one process
    # measures the saved model on the whole split
    from leanloop.retrieval.model import PremiseRetriever
    from leanloop.trainer.retrieval_evaluation import evaluate_retriever

    assert ranks[0]["val_r10"] is not None and ranks[0]["val_r10"] == ranks[1]["val_r10"]
    whole = evaluate_retriever(PremiseRetriever.load(model), runs["two"] / "data", split="val")
    assert whole.steps > 10
    logged = [
        row for row in csv.DictReader((model / latest / "metrics.csv").open()) if row["MRR_val"]
    ]
    assert len(logged) == 1 and float(logged[0]["Recall@10_val"]) == ranks[0]["val_r10"]
    # (the distributed sampler may repeat one step to give both processes as many)
    assert float(logged[0]["MRR_val"]) == pytest.approx(whole.mrr, abs=1.0 / whole.steps)
    assert ranks[0]["val_r10"] == pytest.approx(whole.recall_at_10, abs=1.0 / whole.steps)


def test_accelerate_launch_runs_the_same(prepared):
    """``accelerate launch --multi_gpu --num_processes 2`` (on a machine without GPUs its
    processes train on the CPU with gloo): one complete checkpoint, the processes agree."""
    from leanloop.cli.launch import free_port

    root, model = prepared
    out = root / "accelerate"
    accelerate = Path(sys.executable).with_name("accelerate")
    command = [
        str(accelerate),
        "launch",
        "--multi_gpu",
        "--num_processes",
        "2",
        "--num_machines",
        "1",
        "--main_process_ip",
        "127.0.0.1",
        "--main_process_port",
        str(free_port()),
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        str(SCRIPT),
        str(model),
        str(root / "db.sqlite"),
        str(out / "model"),
        str(out / "data"),
        str(out / "digests"),
        "2",
        "2",
    ]
    result = subprocess.run(
        command, env=_env(), capture_output=True, text=True, timeout=600, cwd=REPO
    )
    assert result.returncode == 0, result.stderr[-3000:]
    latest = (out / "model" / "LATEST").read_text().strip()
    assert (out / "model" / latest / "model.safetensors").is_file()
    digests = [json.loads((out / "digests" / f"rank{r}").read_text()) for r in (0, 1)]
    assert digests[0]["digest"] == digests[1]["digest"] and digests[0]["steps"] == 2


def test_leanloop_train_nproc_trains_the_progress_model_once(prepared, tiny_encoder, tmp_path):
    """``leanloop train progress --nproc 2``: the rows written once, one model saved with its
    metrics, the report printed once."""
    root, _ = prepared
    out = tmp_path / "progress"
    command = [
        sys.executable,
        "-m",
        "leanloop",
        "train",
        "progress",
        "--db",
        str(root / "db.sqlite"),
        "--model",
        str(tiny_encoder),
        "--output-dir",
        str(out),
        "--epochs",
        "1",
        "--batch-size",
        "32",
        "--nproc",
        "2",
    ]
    result = subprocess.run(
        command, env=_env(), capture_output=True, text=True, timeout=600, cwd=REPO
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.count("validation MSE") == 1  # the main process reports
    assert result.stdout.count("progress rows from") == 1
    metrics = json.loads((out / "progress_metrics.json").read_text())
    assert metrics["train_rows"] > 0
    assert (out / "model.safetensors").is_file() and (out / "config.json").is_file()


def test_two_processes_of_grpo_make_one_checkpoint(prepared):
    root, model = prepared
    out = root / "grpo"
    args = [
        str(model),
        str(root / "db.sqlite"),
        str(out / "model"),
        str(out / "data"),
        str(out / "digests"),
    ]
    result = _launch(2, args, script=REPO / "tests" / "distributed" / "grpo_run.py")
    assert result.returncode == 0, result.stderr[-3000:]
    latest = (out / "model" / "LATEST").read_text().strip()
    assert (out / "model" / latest / "model.safetensors").is_file()
    checkpoints = [p for p in (out / "model").iterdir() if p.is_dir() and p.name.startswith("repo")]
    assert [p.name for p in checkpoints] == [latest]
    digests = [json.loads((out / "digests" / f"rank{r}").read_text()) for r in (0, 1)]
    assert digests[0]["digest"] == digests[1]["digest"] and digests[0]["steps"] == 2
