"""Ctrl-C in ``leanloop run`` and running it again, on tiny models and the real sample: the
stopped run says in one line which finished steps it kept and where, leaves no half-written
directory (its own nor the other core's process's), and a run started again reuses each
finished step whose settings and inputs are the same, redoes the others and says which; the
report of a run with other settings is kept under a new name, never overwritten.

The first run is a subprocess given a real SIGINT (the terminal's handler, as in
test_cli_interrupt.py) once the generator's training has finished in its staging directory and
the other core's process is training the retriever in its own; the runs after it are in-process
and one after the other (``parallel: false``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.helpers import run_cli

pytestmark = pytest.mark.slow

#: ``leanloop ARGV`` with the SFT trainer's ``train_step`` pausing once it has returned (the
#: checkpoint saved in the staging directory, not renamed into place), saying so on stdout
#: (stderr is the run's log).
HOLD = """
import signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)  # as a terminal gives it
import leanloop.trainer.sft as where
from leanloop.cli.app import main
original = where.SFTTrainer.train_step
def held(self, *args, **kwargs):
    result = original(self, *args, **kwargs)
    print("paused", file=sys.__stdout__, flush=True)
    time.sleep(600)
    return result
where.SFTTrainer.train_step = held
sys.exit(main(sys.argv[1:]))
"""


def settings(tmp_path: Path, sample_dir: Path, tiny_encoder: Path, name: str, **changes) -> Path:
    from tests.tiny_causal import shared_tiny_model

    config = {
        "data": str(sample_dir),
        "generator_model": str(shared_tiny_model(sample_dir)),
        "retriever_model": str(tiny_encoder),
        "retriever_seconds": 2,
        "retriever_batch_size": 8,
        "retriever_max_seq_len": 32,
        "generator_seconds": 1,
        "generator_batch_size": 4,
        "loss_steps": 4,
        "loss_seconds": 1,
        "eval_steps": 2,
        "eval_seconds": 1,
        "eval_k": 2,
        "eval_max_new_tokens": 8,
        "search_theorems": 1,
        "search_expansions": 1,
        "search_seconds": 2,
        "parallel": False,
        **changes,
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def staging_left(out: Path) -> list[str]:
    """Directories written aside that were never renamed into place (nor removed)."""
    return [
        str(p.relative_to(out))
        for p in out.rglob("*")
        if p.name.endswith((".new", ".old")) or p.name.startswith((".trl-", ".repo"))
    ]


def wait_for(condition, what: str, process: subprocess.Popen, seconds: float = 600) -> None:
    """Wait until ``condition()`` holds (an event in the run's output directory)."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert process.poll() is None, f"the run ended before {what}"
        assert time.monotonic() < deadline, f"no {what} after {seconds} s"
        time.sleep(0.2)


def test_ctrl_c_keeps_the_finished_steps_and_a_rerun_reuses_them(
    capsys, tmp_path, sample_dir, tiny_encoder
):
    out = tmp_path / "run"
    first = settings(
        tmp_path, sample_dir, tiny_encoder, "first", parallel=True, retriever_seconds=600
    )
    env = {**os.environ, "LEANLOOP_FIXTURES": str(sample_dir.parent), "HF_HUB_OFFLINE": "1"}
    process = subprocess.Popen(
        [sys.executable, "-c", HOLD, "run", "--config", str(first), "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        said = []
        while not said or said[-1].strip() != "paused":
            line = process.stdout.readline()
            assert line, "".join(said) + process.stderr.read()
            said.append(line)
        # the other core's process is training the retriever in its staging directory
        wait_for(
            lambda: any(p.name.startswith(".retriever.") for p in out.iterdir()),
            "retriever staging directory",
            process,
        )
        assert any(p.name.startswith(".generator.") for p in out.iterdir())
        process.send_signal(signal.SIGINT)
        rest, err = process.communicate(timeout=600)
    finally:
        process.kill()
    assert process.returncode == 130 and "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines == [
        f"interrupted: kept in {out}: the data (imported, split and exported to export/); the "
        "untrained generator's held-out loss and accuracy (not finished, nothing of them "
        "left: retriever, generator, generator-after); running the same command again reuses "
        "what was kept"
    ], err
    # nothing half-written: neither the generator this process trained nor the retriever the
    # other one was training, and only the finished steps' records
    assert staging_left(out) == []
    assert not (out / "generator").exists() and not (out / "retriever").exists()
    assert sorted(p.name for p in (out / "steps").iterdir()) == [
        "data.json",
        "generator-before.json",
    ]
    assert "Traceback" not in "".join(said) + rest

    # started again (with a shorter retriever): what was kept is reused, the rest is done
    second = settings(tmp_path, sample_dir, tiny_encoder, "second")
    code, said, err = run_cli(capsys, "run", "--config", second, "--out", out)
    assert code == 0, err
    assert "reused from an earlier run (same settings and inputs): data, generator-before" in said
    assert "data: 177 theorems from 1 repository, random split train 141, val 18, test 18 " in said
    assert "(reused)" in said and "tactic generator: LoRA training for 1 s" in said
    assert staging_left(out) == []
    report = json.loads((out / "report.json").read_text())
    kept = json.loads((out / "steps" / "generator-before.json").read_text())
    assert report["generator"]["loss_before"]["per_step"] == kept["result"]["loss"]["per_step"]
    assert report["steps"]["data"] == "reused: same settings and inputs"
    assert report["steps"]["retriever"] == "not done before"

    # the same settings once more: every step is reused, nothing is trained again
    code, again, err = run_cli(capsys, "run", "--config", second, "--out", out)
    assert code == 0, err
    assert (
        "reused from an earlier run (same settings and inputs): data, generator-before, "
        "retriever, generator, generator-after"
    ) in again
    assert "tactic generator: LoRA training for" not in again
    assert "retriever: R@10 on" not in again and "held-out loss and accuracy of" not in again
    rerun = json.loads((out / "report.json").read_text())
    assert rerun["comparisons"] == report["comparisons"]
    assert not list(out.glob("report-*"))  # the same settings: the report is the same run's

    # other settings: the steps they touch are redone (and said so), the others reused, and
    # the earlier report is kept under a new name
    third = settings(tmp_path, sample_dir, tiny_encoder, "third", generator_seconds=2)
    code, other, err = run_cli(capsys, "run", "--config", third, "--out", out)
    assert code == 0, err
    assert "generator: redone: settings changed (generator_seconds 1 → 2)" in other
    assert "generator-after: redone: generator changed" in other
    assert "reused from an earlier run (same settings and inputs): data, generator-before, " in (
        other
    )
    assert "it will be kept under a new name" in other
    (earlier,) = out.glob("report-*.md")
    assert f"the earlier report, of a run with other settings, is kept as {earlier}" in other
    assert json.loads(earlier.with_suffix(".json").read_text())["config"]["generator_seconds"] == 1
    assert json.loads((out / "report.json").read_text())["config"]["generator_seconds"] == 2
