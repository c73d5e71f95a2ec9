"""``ProofJob``: one typed job, loadable from YAML (targets as one union told apart by
``kind``), the soundness policy declared once, and the one rule that names a job's run."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import leanloop
from leanloop.errors import LeanloopError
from leanloop.prover.benchmark_config import BenchmarkConfig
from leanloop.prover.config import ProofMode, ProverConfig, SoundnessPolicy
from leanloop.prover.job import (
    BenchmarkTargets,
    DatasetTargets,
    ProofJob,
    SorryTargets,
    TheoremTargets,
    load_job,
)

SOURCE = Path(leanloop.__file__).parent


def test_a_job_file_names_its_targets_by_kind(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(
        "targets: {kind: dataset, path: data/sample, split: random/test, limit: 3}\n"
        "generator: hf:out/generator\n"
        "mode: whole\n"
        "lean: pantograph\n"
        "attempts: 2\n"
        "search: {timeout: 5, num_whole_proofs: 4}\n"
    )
    job = ProofJob.from_yaml(path)
    assert isinstance(job.targets, DatasetTargets) and job.targets.limit == 3
    assert job.proof_mode is ProofMode.WHOLE and job.count == 2
    settings = job.prover_config()
    assert settings.lean_backend == "pantograph" and settings.num_attempts == 2
    assert settings.timeout == 5 and settings.num_whole_proofs == 4
    kinds = {
        "sorries": SorryTargets,
        "benchmark": BenchmarkTargets,
        "theorems": TheoremTargets,
    }
    for kind, expected in kinds.items():
        extra = {"sorries": ", project: p", "benchmark": ", spec: minif2f"}.get(kind, "")
        path.write_text(f"targets: {{kind: {kind}{extra}}}\n")
        assert isinstance(ProofJob.from_yaml(path).targets, expected)


def test_a_wrong_job_is_one_line_naming_the_file_and_field(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text("targets: {kind: shelf}\n")
    with pytest.raises(LeanloopError, match=r"job\.yaml") as caught:
        ProofJob.from_yaml(path)
    assert "targets" in str(caught.value) and "\n" not in str(caught.value)
    path.write_text("lean: lsp\n")
    with pytest.raises(LeanloopError, match="lean: expected repl, pantograph"):
        ProofJob.from_yaml(path)
    path.write_text("mode: search\nlean: kimina:http://x\n")
    with pytest.raises(LeanloopError, match="goes with mode: sampling"):
        ProofJob.from_yaml(path)
    path.write_text("mode: sampling\nlean: repl\n")
    with pytest.raises(LeanloopError, match="benchmark"):
        ProofJob.from_yaml(path)
    bench = "targets: {kind: benchmark, spec: minif2f}\nmode: sampling\n"
    path.write_text(bench + "lean: replay\n")
    with pytest.raises(LeanloopError, match="replay cannot check sampled whole proofs"):
        ProofJob.from_yaml(path)
    path.write_text(bench + "lean: pantograph\n")  # a pool of Pantograph servers checks
    assert ProofJob.from_yaml(path).prover_config().lean_backend == "pantograph"


def test_the_soundness_policy_is_declared_once():
    """``allowed_axioms`` and ``allow_native`` are fields of one class; the configurations
    that judge proofs inherit them, and a job hands its policy to its search and sampling."""
    declared = []
    for path in SOURCE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            target = node.target if isinstance(node, ast.AnnAssign) else None
            if isinstance(target, ast.Name) and target.id in ("allowed_axioms", "allow_native"):
                declared.append(f"{path.relative_to(SOURCE)}:{target.id}")
    # (besides the policy's value, lean.axioms.AxiomPolicy, which every judgement reads)
    assert sorted(declared) == [
        "lean/axioms.py:allow_native",
        "prover/config.py:allow_native",
        "prover/config.py:allowed_axioms",
    ]
    assert issubclass(ProverConfig, SoundnessPolicy) and issubclass(
        BenchmarkConfig, SoundnessPolicy
    )
    job = ProofJob(allowed_axioms=("propext",), allow_native=True)
    for part in (job.prover_config(), job.sampling_config()):
        assert part.axiom_policy == job.axiom_policy
        assert part.axiom_policy.allowed == frozenset({"propext"}) and part.allow_native
    with pytest.raises(LeanloopError, match="the soundness policy is the job's"):
        ProofJob(search=ProverConfig(allow_native=True))


def test_one_rule_names_every_job_s_run():
    dataset = DatasetTargets(path=Path("data/sample"), split="test")
    assert ProofJob(targets=dataset).run_name("hf:m@v1") == "hf:m@v1:sample/test"
    whole = ProofJob(targets=dataset, mode="whole", allow_native=True)
    assert whole.run_name("hf:m") == "hf:m:sample/test:whole:axioms=native"
    replay = ProofJob(targets=dataset, lean="replay", allow_native=True)
    assert replay.run_name("recorded") == "recorded:sample/test:replay"  # no Lean, no policy
    sorries = ProofJob(targets=SorryTargets(project="/any/where"))
    assert sorries.run_name("hf:m") == "hf:m:sorries"
    sampling = ProofJob(
        targets=BenchmarkTargets(spec="bench/minif2f.jsonl", split="valid"),
        mode="sampling",
        lean="recorded:verdicts.jsonl",
        attempts=8,
        stop_at_first=True,
    )
    assert sampling.run_name("samples:a.jsonl") == "samples:a.jsonl:minif2f/valid:n8:first:recorded"
    named = ProofJob(targets=TheoremTargets(name="mine"), run="given")
    assert named.run_name("x") == "given"
    assert ProofJob(targets=TheoremTargets(name="mine")).run_name("x") == "x:mine"


def test_files_of_earlier_releases_are_the_job_s_search_or_sampling(tmp_path):
    prover = tmp_path / "prover.yaml"
    prover.write_text("timeout: 7\nnum_sampled_tactics: 3\nallow_native: true\n")
    job = load_job(prover, {"generator": "external:m"})
    assert job.search.timeout == 7 and job.search.num_sampled_tactics == 3
    assert job.allow_native and job.generator == "external:m"
    bench = tmp_path / "bench.yaml"
    bench.write_text("samples: 4\nprompt: chat\nstop_at_first: true\n")
    targets = {"kind": "benchmark", "spec": "minif2f"}
    job = load_job(bench, {"targets": targets, "mode": "sampling", "sampling": {"batch_size": 2}})
    config = job.sampling_config()
    assert config.samples == 4 and config.stop_at_first and config.batch_size == 2
    assert config.prompt.style == "chat"
    with pytest.raises(LeanloopError, match=r"bench\.yaml"):
        load_job(bench, {"targets": targets, "mode": "sampling", "sampling": {"samples": 0}})
