"""``prover.assemble``: the one reader of generator, sampler and Lean backend specs — each spec
gives its component (nothing is loaded or started until used), a wrong spec is one line that
says what is expected, and what a job proves is read from its dataset."""

from __future__ import annotations

import json

import pytest

import leanloop.prover.assemble as assemble
from leanloop.errors import LeanloopError
from leanloop.lean.kimina import KiminaVerifier
from leanloop.lean.verification import RecordedVerifier
from leanloop.prover.external import ExternalProver
from leanloop.prover.hf import HFProver
from leanloop.prover.job import BenchmarkTargets, DatasetTargets, ProofJob
from leanloop.prover.recorded import RecordedProver
from leanloop.prover.replay import ReplayServer
from leanloop.prover.samplers import EndpointSampler, RecordedProofs, RecordedSamples

BENCH = BenchmarkTargets(spec="minif2f")


@pytest.fixture
def no_lean(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    monkeypatch.setenv("ELAN_HOME", str(tmp_path / "no-elan"))


def test_each_generator_spec_gives_its_prover_under_the_job_s_settings(
    sample_dir, tmp_path, monkeypatch
):
    dataset = DatasetTargets(path=sample_dir)
    job = ProofJob(targets=dataset, lean="replay", allow_native=True, attempts=3)
    recorded = assemble.prover(job)
    assert isinstance(recorded, RecordedProver)
    assert recorded.config.allow_native and recorded.config.num_attempts == 3
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "checkpoints" / "x").mkdir(parents=True)
    hf = assemble.prover(ProofJob(generator="hf:~/checkpoints/x"))
    assert isinstance(hf, HFProver) and hf.name == f"hf:{tmp_path / 'checkpoints/x'}"
    local = ProofJob(generator="external:m", base_url="http://h/v1", api_key_env="none")
    external = assemble.prover(local)
    assert isinstance(external, ExternalProver) and external.name == "external:m"
    assert assemble.identity(external) == "external:m"
    for wrong in ("recorded", "hf", "vllm:m"):  # recorded needs a dataset to replay
        with pytest.raises(LeanloopError, match="expected recorded, hf:PATH or external:MODEL"):
            assemble.prover(ProofJob(generator=wrong))


def test_each_sampler_spec_gives_its_sampler(tmp_path):
    answers = tmp_path / "answers.jsonl"
    answers.write_text(json.dumps({"name": "t", "answer": "by simp"}) + "\n")
    sampling = {"targets": BENCH, "mode": "sampling", "lean": "recorded:v.jsonl"}
    assert isinstance(assemble.sampler(ProofJob(**sampling)), RecordedProofs)
    recorded = assemble.sampler(ProofJob(**sampling, generator=f"samples:{answers}"))
    assert isinstance(recorded, RecordedSamples) and recorded.answers["t"] == ["by simp"]
    endpoint = assemble.sampler(ProofJob(**sampling, generator="external:m", api_key_env=None))
    assert isinstance(endpoint, EndpointSampler)
    with pytest.raises(LeanloopError, match="samples:FILE"):
        assemble.sampler(ProofJob(**sampling, generator="samples"))


def test_each_backend_spec_gives_its_verifier_or_servers(tmp_path, sample_dir, no_lean):
    verdicts = tmp_path / "verdicts.jsonl"
    verdicts.write_text("")
    sampling = {"targets": BENCH, "mode": "sampling"}
    recorded = assemble.verifier(ProofJob(**sampling, lean=f"recorded:{verdicts}"))
    assert isinstance(recorded, RecordedVerifier) and recorded.source == "recorded"
    kimina = assemble.verifier(ProofJob(**sampling, lean="kimina:http://127.0.0.1:9"))
    assert isinstance(kimina, KiminaVerifier)
    kimina.close()
    with pytest.raises(LeanloopError, match="needs Lean") as caught:
        assemble.verifier(ProofJob(**sampling, lean="repl"))  # Lean itself is said first
    assert "kimina:URL" in (caught.value.hint or "")
    replay = ProofJob(targets=DatasetTargets(path=sample_dir), lean="replay")
    server = assemble.servers(replay)()
    assert isinstance(server, ReplayServer) and not server.checks_with_lean
    with pytest.raises(LeanloopError, match="needs Lean"):
        assemble.servers(ProofJob(targets=DatasetTargets(path=sample_dir)))


def test_a_dataset_split_s_theorems_each_once_within_the_limit(sample_dir):
    every = assemble.dataset_theorems(DatasetTargets(path=sample_dir, split="test"), replay=False)
    keys = [(t.key, t.commit) for t in every.theorems]
    assert len(keys) == len(set(keys)) > 5
    assert every.chosen is None or "random/test" in every.chosen
    replayed = assemble.dataset_theorems(
        DatasetTargets(path=sample_dir, split="test", limit=5), replay=True
    )
    assert len(replayed.theorems) == 5 and all(t.traced_tactics for t in replayed.theorems)
    with pytest.raises(LeanloopError, match="no split 'nope'"):
        assemble.dataset_theorems(DatasetTargets(path=sample_dir, split="nope"), replay=True)
