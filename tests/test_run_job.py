"""The main job in its one-minute version, in a fresh directory: every step runs on the real
sample, the report says what each gave, and replayed proofs are never called proved."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from leanloop.agent.pipeline_config import RunConfig
from leanloop.agent.run_report import RetrieverResults, RunReport
from leanloop.errors import LeanloopError


@pytest.mark.slow
def test_run_quick_in_a_fresh_directory(tmp_path, sample_dir):
    env = {**os.environ, "LEANLOOP_FIXTURES": str(sample_dir.parent), "HF_HUB_OFFLINE": "1"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}/usr/bin{os.pathsep}/bin"  # no Lean
    result = subprocess.run(
        [sys.executable, "-m", "leanloop", "run", "--quick"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    out = result.stdout
    # it says up front what it will do and how long that takes
    assert out.index("leanloop run --quick: about") < out.index("data: 177 theorems")
    assert "data: 177 theorems from 1 repository (177 new)" in out
    # the retriever, on the other core, says how its training goes while it runs
    assert "retriever: R@10 on 33 test steps: BM25 " in out
    assert "retriever: epoch 1 ended at step " in out
    assert "retriever: trained R@10 " in out
    # counts as counts: "top-1 0 of 4 steps (0 %)", never a fraction "0.000"
    assert "top-1 0.0" not in out and re.search(r"top-1 \d of 4 steps \(\d+ %\)", out)
    report = json.loads((tmp_path / "build" / "run" / "report.json").read_text())
    assert report["data"]["theorems"] == 177
    assert report["data"]["splits"] == {"train": 141, "val": 18, "test": 18}
    retriever = report["retriever"]
    assert retriever["test_steps"] > 0
    assert 0 < retriever["bm25"]["R@10"] <= 1 and 0 < retriever["trained"]["R@10"] <= 1
    # the sample has no corpus.jsonl: the candidates are the train split's premises, the same
    # pool for BM25, the untrained and the trained retriever, on the same steps
    assert retriever["pool"] == "train split" and retriever["pool_premises"] > 0
    for name in ("bm25", "untrained", "trained"):
        assert retriever[name]["steps"] == retriever["test_steps"]
    generator = report["generator"]
    assert generator["train_steps"] >= 1 and generator["before"]["steps"] == 4
    search = report["search"]
    # the recorded diagnostic finds every recorded proof of the test theorems it tries
    assert search["diagnostic"]["status_counts"] == {"replayed": search["diagnostic"]["theorems"]}
    assert "proved" not in search["model"]["status_counts"]
    assert report["lean"]["status"] == "skipped" and "no Lean toolchain" in report["lean"]["reason"]
    markdown = (tmp_path / "build" / "run" / "report.md").read_text()
    assert "not called proved" in markdown and "| retriever R@10" in markdown
    # each trained model against its baselines, said plainly in the JSON, the Markdown and on
    # the console, with the likely reasons where it did not beat them
    comparisons = report["comparisons"]
    assert [(c["subject"], c["baseline"]) for c in comparisons] == [
        ("trained retriever", "BM25"),
        ("trained retriever", "the untrained encoder"),
        ("trained generator", "the untrained tinycoder"),
        ("trained generator's search", "the recorded diagnostic"),
    ]
    assert "## Trained models against their baselines" in markdown
    for comparison in comparisons:
        verdict = "beat" if comparison["better"] else "did not beat"
        if comparison["goal"] == "reach":
            verdict = "reached" if comparison["better"] else "did not reach"
        line = f"The {comparison['subject']} {verdict} {comparison['baseline']}: "
        assert f"- **{line[:-2]}**" in markdown and f"  - {line}" in out
        assert bool(comparison["reasons"]) != comparison["better"]
        if not comparison["better"]:
            assert "Likely why: short training: " in out or comparison["goal"] == "reach"
    assert (
        f"ranked among the {retriever['pool_premises']} premises that the train split's proofs "
        "use (no corpus.jsonl" in markdown
    )
    assert (tmp_path / "build" / "run" / "report.png").read_bytes().startswith(b"\x89PNG")
    assert "Traceback" not in result.stderr


def test_the_report_states_the_retrievers_candidate_pool():
    figures = {"R@1": 0.1, "R@10": 0.4, "MRR": 0.2, "steps": 33}
    retriever = {
        "test_steps": 33,
        "bm25": figures,
        "untrained": figures,
        "trained": figures,
        "train_steps": 210,
        "train_seconds": 1.0,
        "seconds": 2.0,
    }
    pools = {
        "train split": "the 291 premises that the train split's proofs use (no corpus.jsonl",
        "corpus.jsonl": "the 291 premises of corpus.jsonl.",
    }
    for pool, words in pools.items():
        report = RunReport(
            config={},
            expected_seconds=1,
            retriever=RetrieverResults(**retriever, pool=pool, pool_premises=291),
        )
        assert report.rows()[0][0] == f"retriever R@10 (33 test steps, 291 candidates: {pool})"
        assert f"each test step's premises are ranked among {words}" in report.markdown()
    assert "train split" not in report.markdown()  # the last one: corpus.jsonl
    unknown = RunReport(config={}, expected_seconds=1, retriever=RetrieverResults(**retriever))
    assert "ranked among" not in unknown.markdown()


def test_quick_settings_and_bad_settings(tmp_path):
    quick = RunConfig().quick_run()
    assert quick.generator_model == "tinycoder" and quick.generator_seconds <= 10
    path = tmp_path / "run.yaml"
    path.write_text("retriever_seconds: -1\n")
    with pytest.raises(LeanloopError, match=r"run.yaml.*retriever_seconds"):
        RunConfig.from_yaml(path)
    path.write_text("generator_secs: 5\n")
    with pytest.raises(LeanloopError, match="generator_secs"):
        RunConfig.from_yaml(path)
