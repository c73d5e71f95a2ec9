"""``leanloop prove``: the replay of the real sample end to end (one JSON object per theorem,
outcomes called 'replayed (recorded proof found)', never 'proved'), reruns, the report files, and
one-line errors (no Lean without --replay, bad options)."""

from __future__ import annotations

import json

import pytest

from leanloop.database import DynamicDatabase
from tests.helpers import assert_one_line_error, run_cli
from tests.test_replay_server import UNREPLAYABLE


def test_replay_of_the_sample_as_json(capsys, sample_dir, tmp_path):
    db = str(tmp_path / "p.db")
    out_dir = tmp_path / "report"
    argv = ["prove", "--dataset", str(sample_dir), "--replay", "--db", db, "--json"]
    code, out, err = run_cli(capsys, *argv, "--out", str(out_dir))
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert len(rows) == 85  # the theorems with traced tactics
    assert all(set(r) >= {"full_name", "status", "proof", "expansions", "seconds"} for r in rows)
    assert {r["full_name"] for r in rows if r["status"] == "failed"} == set(UNREPLAYABLE)
    assert sum(r["status"] == "replayed" and bool(r["proof"]) for r in rows) == 81
    assert "92 theorems without traced tactics are left out" in err
    assert "replayed (recorded proof found)" in err and "proved" not in err
    found = "recorded proofs found again (replay, not proving): about 81 of 85 theorems (95 %)"
    assert found in err
    assert "pass@" not in err
    (report,) = out_dir.glob("*.json")
    data = json.loads(report.read_text())
    assert data["status_counts"] == {"replayed": 81, "failed": 4}
    # the report names its environment; a replay's rate is not called a pass rate
    assert data["environment"] == "replay" and data["replayed_at_1"] == pytest.approx(81 / 85)
    assert "pass_at_1" not in data and "pass_at_k" not in data
    assert len(list(out_dir.glob("*.png"))) == 1
    stored = DynamicDatabase(db).get_attempts("recorded:leandojo_benchmark_4/test:replay")
    assert len(stored) == 85

    # a rerun skips everything finished, and still shows every theorem
    code, out, err = run_cli(capsys, *argv, "--out", str(out_dir))
    assert code == 0 and len(out.splitlines()) == 85
    assert "85 attempts were already finished in this run" in err


def test_summary_table_and_options(capsys, sample_dir, tmp_path):
    config = tmp_path / "prover.yaml"
    config.write_text("num_sampled_tactics: 4\nstrategy: depth_first\nmax_expansions: 50\n")
    code, out, err = run_cli(
        capsys,
        "prove",
        "--dataset",
        str(sample_dir),
        "--split",
        "random/test",
        "--replay",
        "--generator",
        "recorded",
        "--config",
        str(config),
        "--limit",
        "5",
        "--run",
        "five",
        "--db",
        str(tmp_path / "t.db"),
        "--out",
        str(tmp_path / "o"),
    )
    assert code == 0, err
    assert "run five" in out and "replayed (recorded proof found)" in out
    assert "of 5 theorems" in out and "proved" not in out
    assert (tmp_path / "o" / "five.json").is_file()


def test_without_lean_and_without_replay_one_line_says_lean_is_needed(
    capsys, sample_dir, tmp_path, monkeypatch
):
    monkeypatch.setenv("PATH", str(tmp_path))  # no elan, lake or lean to be found
    monkeypatch.setenv("ELAN_HOME", str(tmp_path / "elan"))
    code, _, err = run_cli(
        capsys,
        "prove",
        "--dataset",
        str(sample_dir),
        "--generator",
        "recorded",
        "--db",
        str(tmp_path / "x.db"),
    )
    assert_one_line_error(code, err, "proving needs Lean", "--replay")


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--replay", "--generator", "gpt"], ["--generator gpt", "recorded, hf:PATH"]),
        (["--replay", "--split", "val"], ["no split 'val'", "random/test"]),
        (
            ["--replay", "--generator", "hf:/no/such/model"],
            ["HFProver, field 'ckpt_path': '/no/such/model' does not exist"],
        ),
        (["--replay", "--config", "missing.yaml"], ["missing.yaml", "does not exist"]),
        ([], ["choose what proposes tactics"]),
    ],
)
def test_bad_input_is_one_line(capsys, sample_dir, tmp_path, extra, words):
    code, _, err = run_cli(
        capsys, "prove", "--dataset", str(sample_dir), "--db", str(tmp_path / "b.db"), *extra
    )
    assert_one_line_error(code, err, *words)


def test_an_external_model_without_its_key_is_refused(capsys, sample_dir, tmp_path, monkeypatch):
    monkeypatch.delenv("LEANLOOP_TEST_KEY", raising=False)
    code, _, err = run_cli(
        capsys,
        "prove",
        "--dataset",
        str(sample_dir),
        "--replay",
        "--generator",
        "external:some-model",
        "--api-key-env",
        "LEANLOOP_TEST_KEY",
        "--db",
        str(tmp_path / "k.db"),
    )
    assert_one_line_error(code, err, "$LEANLOOP_TEST_KEY is not set")


def test_an_external_hub_model_reads_hf_token_as_the_external_prover_does(
    capsys, sample_dir, tmp_path, monkeypatch
):
    """``--generator external:OWNER/MODEL`` without ``--base-url`` goes to Hugging Face's router
    with ``HF_TOKEN`` (LeanDojo-v2's default provider), as ``ExternalProver`` does, without
    ``--api-key-env HF_TOKEN``; a plain name keeps ``OPENAI_API_KEY``."""
    from leanloop.prover import assemble
    from leanloop.prover.external import HF_ROUTER_URL
    from leanloop.prover.job import DatasetTargets, ProofJob

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    argv = ["prove", "--dataset", str(sample_dir), "--replay", "--db", str(tmp_path / "h.db")]
    code, _, err = run_cli(capsys, *argv, "--generator", "external:deepseek-ai/Prover:novita")
    assert_one_line_error(code, err, "$HF_TOKEN is not set")
    monkeypatch.setenv("HF_TOKEN", "hf_test")
    job = ProofJob(
        targets=DatasetTargets(path=sample_dir), generator="external:deepseek-ai/Prover:novita"
    )
    hub = assemble.prover(job)
    assert (hub.base_url, hub.api_key_env) == (HF_ROUTER_URL, "HF_TOKEN")
    code, _, err = run_cli(capsys, *argv, "--generator", "external:gpt-4o-mini")
    assert_one_line_error(code, err, "$OPENAI_API_KEY is not set")


def test_a_split_name_alone_proves_one_schemes_split(capsys, sample_dir, tmp_path):
    """``--split test`` of a dataset with two split schemes proves random/test (and says so),
    not both schemes' test splits mixed together."""
    from tests.helpers import sample_theorems, write_dataset

    traced = [t for t in sample_theorems(sample_dir) if t.traced_tactics][:6]
    data = write_dataset(
        tmp_path / "data", {"random/test": traced[:2], "novel_premises/test": traced[2:6]}
    )
    argv = ["prove", "--dataset", data, "--replay", "--json", "--db", tmp_path / "p.db",
            "--out", tmp_path / "o"]  # fmt: skip
    code, out, err = run_cli(capsys, *argv, "--split", "test")
    assert code == 0, err
    assert len(out.splitlines()) == 2  # random/test's two theorems
    assert "proving random/test (--split novel_premises/test for the other" in err
    code, out, err = run_cli(capsys, *argv, "--split", "novel_premises/test")
    assert code == 0 and len(out.splitlines()) == 4
