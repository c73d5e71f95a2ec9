"""The main job: the whole loop on one dataset — data, database, curriculum and export; a premise
retriever and a tactic generator trained within a stated time budget (one on each core);
each evaluated against its baseline; proof search on the test theorems (replayed without Lean,
proved where Lean is installed); and a report."""

from __future__ import annotations

import functools
import logging
import multiprocessing
import shutil
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from leanloop.agent.pipeline_config import RunConfig
from leanloop.agent.run_report import (
    DataSummary,
    GeneratorResults,
    LeanResults,
    RetrieverResults,
    RunReport,
    SearchSummary,
    found_proofs,
)
from leanloop.database import DynamicDatabase, SplitConfig
from leanloop.errors import LeanloopError
from leanloop.words import count_of, percent, plural

log = logging.getLogger(__name__)

Say = Callable[[str], None]


def quiet_libraries() -> None:
    """Keep the libraries' own progress bars and notices off the job's output (its steps say
    what happens; errors still show)."""
    import warnings

    import datasets
    from transformers.utils import logging as transformers_logging

    transformers_logging.set_verbosity_error()
    transformers_logging.disable_progress_bar()
    datasets.disable_progress_bars()
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    import lightning.pytorch  # noqa: F401 - it sets its loggers' levels when imported

    for name in ("lightning.pytorch", "lightning.fabric", "lightning"):
        logging.getLogger(name).setLevel(logging.ERROR)


def resolve_data(config: RunConfig, say: Say) -> Path:
    """The dataset to run on: the configured one, the fixture sample, or the official
    benchmark where it can be downloaded; else a one-line error saying what to provide."""
    from leanloop.settings import Settings

    if config.data is not None:
        path = Path(config.data).expanduser()
        if not path.exists():
            raise LeanloopError(f"--data {path}: no such file or directory")
        return path
    settings = Settings.from_env()
    if settings.fixtures is not None and (settings.fixtures / "leandojo_benchmark_4").exists():
        return settings.fixtures / "leandojo_benchmark_4"
    from leanloop.data.leandojo.download import download_dataset
    from leanloop.errors import DownloadError

    say("no dataset given and no fixture sample: downloading LeanDojo Benchmark 4 ...")
    try:
        return download_dataset(
            "leandojo-benchmark-4", settings.cache_dir / "datasets", progress=False
        )
    except DownloadError:
        raise LeanloopError(
            "no dataset to run on: none given, no fixture sample, and the official benchmark "
            "cannot be downloaded from here",
            hint="pass --data DIR (a LeanDojo-format dataset) or set LEANLOOP_FIXTURES",
        ) from None


def plan(config: RunConfig) -> list[tuple[str, float]]:
    """The steps and how long each should take (seconds), for the user to read up front."""
    # measured on a 2-core CPU: loading and converting SmolLM2 ~40 s the first time, ~2 s per
    # state for a few beams
    generator_load = 5 if config.quick else 40
    per_generation = 0.3 if config.quick else 2.0
    retriever = config.retriever_seconds + 15
    generator = (
        generator_load
        + 2 * config.eval_steps * per_generation
        + config.generator_seconds
        # a theorem whose first tactics all fail ends after one expansion; found ones take more
        + config.search_theorems * min(config.search_seconds, 2.5 * per_generation)
    )
    return [
        ("import the data, split, export", 10),
        ("retriever: BM25, untrained and trained R@k (one core)", retriever),
        (
            "tactic generator: accuracy before, LoRA training, accuracy after, search (other core)",
            generator,
        ),
        ("replayed search with the recorded tactics (diagnostic)", 10),
        ("report", 5),
    ]


def run(config: RunConfig, *, say: Say = print) -> RunReport:
    """Run the main job and write its report (report.json, report.md, report.png)."""
    if config.quick and not _is_quick_sized(config):
        config = config.quick_run()
    started = time.perf_counter()
    out = Path(config.output).expanduser()
    if out.exists() and not out.is_dir():
        raise LeanloopError(
            f"output {out}: a file is there; the job needs a directory",
            hint="give a new or existing directory",
        )
    dataset = resolve_data(config, say)
    out.mkdir(parents=True, exist_ok=True)
    steps = plan(config)
    expected = steps[0][1] + max(steps[1][1], steps[2][1]) + steps[3][1] + steps[4][1]
    say(f"leanloop run{' --quick' if config.quick else ''}: about {expected / 60:.0f} min")
    for name, seconds in steps:
        say(f"  - {name}: ~{seconds:.0f} s")
    report = RunReport(config=config.to_dict(), expected_seconds=expected)

    database = DynamicDatabase(config.database or out / "leanloop.db")
    report.data = _prepare(database, dataset, out / "export", config, say)
    _timed(report, "data", started)

    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        url = database.url.render_as_string(hide_password=False)
        retriever = pool.submit(retriever_track, config.to_dict(), url, str(out))
        report.generator = generator_track(config, database, out, say)
        report.search = _search(config, database, out, say)
        say("waiting for the retriever (training on the other core) ...")
        report.retriever = RetrieverResults.model_validate(retriever.result())
    _timed(report, "models and search", started)

    report.lean = _lean_part(config, database, out, say)
    report.seconds = time.perf_counter() - started
    report.write(out)
    findings = report.findings()
    if findings:
        say("trained models against their baselines:")
        for finding in findings:
            say(f"  - {finding}")
    return report


def _is_quick_sized(config: RunConfig) -> bool:
    return config.generator_model == "tinycoder"


def _timed(report: RunReport, step: str, started: float) -> None:
    report.timings[step] = round(time.perf_counter() - started - sum(report.timings.values()), 1)


def _prepare(
    database: DynamicDatabase, dataset: Path, export: Path, config: RunConfig, say: Say
) -> DataSummary:
    counts = database.import_dataset(dataset)
    repositories = database.sort_repositories_by_difficulty()
    split = SplitConfig(val=config.val, test=config.test, seed=config.seed)
    exported = database.export_merged_data(repositories, export, split_config=split)
    for warning in exported.warnings:
        say(f"warning: {warning}")
    say(
        f"data: {plural(exported.theorems, 'theorem')} from "
        f"{plural(len(repositories), 'repository')} ({counts.theorems_added} new), random split "
        + ", ".join(f"{k} {v}" for k, v in exported.split_sizes["random"].items())
    )
    return DataSummary(
        dataset=str(dataset),
        repositories=[str(r) for r in repositories],
        theorems=exported.theorems,
        tactics=database.stats().tactics,
        splits=exported.split_sizes["random"],
        export=str(export),
    )


# -- the retriever, on its own core ----------------------------------------------------------


def retriever_track(config_data: dict[str, Any], database_url: str, out: str) -> dict[str, Any]:
    """BM25, the untrained encoder and the trained retriever on the test split, among the same
    candidate pool (``evaluation_data``: corpus.jsonl, or the train split's premises), in a
    process of its own, on one core."""
    from leanloop.ml.device import limit_threads

    limit_threads(1)
    config = RunConfig.from_dict(config_data)
    from leanloop.retrieval.bm25 import evaluate_bm25
    from leanloop.retrieval.model import PremiseRetriever
    from leanloop.trainer.retrieval import RetrievalTrainer
    from leanloop.trainer.retrieval_config import TrainingConfig
    from leanloop.trainer.retrieval_evaluation import evaluate_retriever, evaluation_data

    quiet_libraries()
    out_dir = Path(out)
    export = out_dir / "export"
    test_steps, pool = evaluation_data(export, "random", "test")
    reachable, best_possible = best_possible_recall(test_steps, pool.corpus)
    bm25 = evaluate_bm25(pool.corpus, test_steps)
    started = time.perf_counter()
    untrained = evaluate_retriever(
        PremiseRetriever.load(config.retriever_model, max_seq_len=config.retriever_max_seq_len),
        export,
    )
    _say_line(
        f"retriever: R@10 on {plural(len(test_steps), 'test step')}: BM25 "
        f"{percent(bm25.recall_at_10)}, untrained {percent(untrained.recall_at_10)}; training "
        f"for {config.retriever_seconds:.0f} s ..."
    )
    minutes, seconds = divmod(int(config.retriever_seconds), 60)
    trainer = RetrievalTrainer(
        TrainingConfig(
            model_name=config.retriever_model,
            output_dir=out_dir / "retriever",
            run_progressive_training=False,  # one run, no later repository to protect
            max_epochs=50,
            max_time=f"00:00:{minutes:02d}:{seconds:02d}",
            batch_size=config.retriever_batch_size,
            max_seq_len=config.retriever_max_seq_len,
            num_gpus=0,
            enable_progress_bar=False,  # lines instead, on the job's output
            seed=config.seed,
        ),
        progress=_say_line,
    )
    database = DynamicDatabase(database_url)
    repositories = database.sort_repositories_by_difficulty()
    train_started = time.perf_counter()
    trainer.train(repositories, database, out_dir / "train-data" / "retriever")
    train_seconds = time.perf_counter() - train_started
    trained = trainer.evaluate(export)
    _say_line(f"retriever: trained R@10 {percent(trained['R@10'])}")
    last = trainer.reports[-1] if trainer.reports else None
    return {
        "test_steps": len(test_steps),
        "pool": pool.source,
        "pool_premises": pool.size,
        "reachable_steps": reachable,
        "best_possible_r10": best_possible,
        "bm25": bm25.as_dict(),
        "untrained": untrained.as_dict(),
        "trained": trained,
        "train_steps": last.train_steps if last else 0,
        "optimizer_steps": last.optimizer_steps if last else 0,
        "epochs": last.epochs if last else 0.0,
        "best_val_r10": last.best_checkpoint_score if last else None,
        "device": "cpu",  # num_gpus=0
        "train_seconds": train_seconds,
        "seconds": time.perf_counter() - started,
    }


def best_possible_recall(steps, corpus) -> tuple[int, float]:
    """How many of ``steps`` use a premise among the candidates of ``corpus`` (the others are
    misses for every ranker), and the highest R@10 any ranking of them could give."""
    reachable = 0
    total = 0.0
    for step in steps:
        present = sum(name in corpus for name in set(step.positives))
        reachable += present > 0
        total += min(present, 10) / len(set(step.positives))
    return reachable, total / len(steps) if steps else 0.0


def _say_line(text: str) -> None:
    """A line of the retriever's process on the job's output (it runs in a process of its
    own, so it cannot use the job's ``say``)."""
    print(text, flush=True)


# -- the tactic generator, on this core ------------------------------------------------------


def generator_track(
    config: RunConfig, database: DynamicDatabase, out: Path, say: Say
) -> GeneratorResults:
    """Tactic accuracy of the base model, LoRA fine-tuning within the time budget, and the
    accuracy of the trained model, on the same test steps."""
    from peft import LoraConfig

    from leanloop.ml.device import limit_threads
    from leanloop.ml.generation import TacticGenerator
    from leanloop.trainer.evaluation import evaluate_tactics
    from leanloop.trainer.sft import SFTTrainer

    limit_threads(1)
    quiet_libraries()
    started = time.perf_counter()
    export = out / "export"
    decoding: dict[str, Any] = {"method": "beam", "max_new_tokens": config.eval_max_new_tokens}
    say(f"tactic generator: accuracy of {config.generator_model} before training ...")
    base = TacticGenerator(config.generator_model, device="cpu")
    before = evaluate_tactics(
        base, export, k=config.eval_k, max_steps=config.eval_steps, **decoding
    )
    del base
    say(f"  {before}")
    say(f"tactic generator: LoRA training for {config.generator_seconds:.0f} s ...")
    trainer = SFTTrainer(
        config.generator_model,
        output_dir=out / "generator",
        batch_size=config.generator_batch_size,
        lr=config.generator_lr,
        lora_config=LoraConfig(r=config.lora_r, lora_alpha=2 * config.lora_r),
        max_steps=100_000,
        max_seconds=config.generator_seconds,
        evaluate=False,
        progress_bars=False,
        seed=config.seed,
    )
    repositories = database.sort_repositories_by_difficulty()
    trainer.train(repositories, database, out / "train-data" / "generator")
    step = trainer.reports[-1]
    say(
        f"  {plural(step.global_steps, 'optimizer step')} on "
        f"{plural(step.train_examples, 'example')} in {step.train_seconds:.0f} s"
        + (f" ({step.train_tokens / step.train_seconds:.0f} tokens/s)" if step.train_tokens else "")
    )
    trained_model = TacticGenerator(out / "generator", device="cpu")
    after = evaluate_tactics(
        trained_model, export, k=config.eval_k, max_steps=config.eval_steps, **decoding
    )
    say(f"  after training: {after}")
    return GeneratorResults(
        model=config.generator_model,
        before=before,
        after=after,
        train_steps=step.global_steps,
        train_examples=step.train_examples,
        train_seconds=step.train_seconds,
        train_tokens=step.train_tokens,
        batch_size=config.generator_batch_size,
        device=trainer.hardware.device,
        seconds=time.perf_counter() - started,
    )


# -- proof search in the replay environment --------------------------------------------------


def _search(config: RunConfig, database: DynamicDatabase, out: Path, say: Say) -> SearchSummary:
    """Search on the test theorems in the replay environment: the trained generator on the
    first ``search_theorems``, the recorded diagnostic on all (its outcome checks the data and
    the search together). What is found is replayed, not proved: no Lean checked it."""
    from leanloop.data import open_dataset
    from leanloop.prover.config import ProverConfig
    from leanloop.prover.hf import HFProver
    from leanloop.prover.recorded import RecordedProver
    from leanloop.prover.replay import ReplayServer
    from leanloop.prover.run import evaluate

    export = out / "export"
    test = [
        t for t in open_dataset(export / "random" / "test.json").iter_theorems() if t.traced_tactics
    ]
    servers = functools.partial(ReplayServer.from_dataset, export)
    settings = ProverConfig(
        timeout=config.search_seconds,
        max_expansions=config.search_expansions,
        num_sampled_tactics=config.eval_k,
        seed=config.seed,
    )
    say(
        f"search (replay environment, no Lean): the trained generator on "
        f"{min(config.search_theorems, len(test))} of {len(test)} test theorems ..."
    )
    prover = HFProver(out / "generator", config=settings)
    tried = test[: config.search_theorems]
    model = evaluate(tried, prover, servers, database=database, run=f"run:{prover.identity}:replay")
    recorded = evaluate(
        test,
        RecordedProver(export, config=ProverConfig(timeout=30, seed=config.seed)),
        servers,
        database=database,
        run="run:recorded:replay",
    )
    say(
        f"  recorded proofs found (replay, not proving): trained generator "
        f"{count_of(found_proofs(model), model.theorems)}, recorded diagnostic "
        f"{count_of(found_proofs(recorded), recorded.theorems)}"
    )
    return SearchSummary(model=model, diagnostic=recorded)


# -- where Lean is installed -----------------------------------------------------------------


def _lean_part(config: RunConfig, database: DynamicDatabase, out: Path, say: Say) -> LeanResults:
    """Trace and prove the sorries of the example project where a Lean toolchain is found;
    otherwise say so, and how to get one."""
    from leanloop.lean.toolchain import diagnose

    source = config.lean_project or _example_project()
    if source is None:
        return LeanResults(status="skipped", reason="no example Lean project found")
    toolchain = diagnose(None)
    if not toolchain.ok:
        missing = toolchain.missing()
        if [check.name for check in missing] == ["sandbox"]:
            reason = (
                f"Lean is here, but its processes cannot be sandboxed ({missing[0].detail}): "
                f"the example project is neither traced nor proved; {missing[0].fix}"
            )
        else:
            reason = (
                f"no Lean toolchain here ({', '.join(c.name for c in missing)} missing): the "
                "example project is neither traced nor proved; install elan "
                "(https://github.com/leanprover/elan) and see 'leanloop doctor'"
            )
        say(reason)
        return LeanResults(status="skipped", reason=reason)
    from leanloop.agent.proving import prove_sorries
    from leanloop.prover.config import ProverConfig
    from leanloop.prover.hf import HFProver

    project = out / "lean-project"  # a copy: filling sorries edits the files
    if project.exists():
        shutil.rmtree(project)
    shutil.copytree(source, project, ignore=shutil.ignore_patterns(".lake", ".leanloop-backups"))
    say(f"Lean found: tracing {project} and proving its sorries (checked by Lean) ...")
    traced = database.trace_repository(path=project, workers=1)
    theorems = database.get_sorry_theorems(traced.repository)
    prover = HFProver(
        out / "generator",
        config=ProverConfig(
            timeout=config.search_seconds,
            max_expansions=4 * config.search_expansions,
            num_sampled_tactics=config.eval_k,
            seed=config.seed,
        ),
    )
    report = prove_sorries(
        theorems, prover, project, database=database, run=f"run:lean:{prover.identity}"
    )
    report.write(out / "lean-report")
    say(f"  {report.summary()}")
    return LeanResults(
        status="done",
        proved=len(report.written),
        tried=len(report.rows),
        report=report.model_dump(mode="json"),
    )


def _example_project() -> Path | None:
    here = Path(__file__).resolve()
    for parent in here.parents:
        candidate = parent / "examples" / "lean-project"
        if (candidate / "lakefile.toml").is_file():
            return candidate
    return None
