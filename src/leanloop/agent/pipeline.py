"""The main job: the whole loop on one dataset — data, database, curriculum and export; a premise
retriever and a tactic generator trained within a stated time budget (one on each core); each
measured against its baseline on the same test items (the generator's held-out loss and
accuracy before and after training, the retriever against BM25 and its untrained encoder);
proof search on the test theorems (replayed without Lean, proved where Lean is installed); and a
report. Each finished step is recorded (``run_steps``), so that a run started again reuses it
when its settings and inputs are the same; a step stopped half-way leaves nothing behind."""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from leanloop.agent.pipeline_config import RunConfig
from leanloop.agent.run_output import LOG_FILE, library_output, one_interrupt
from leanloop.agent.run_report import (
    DataSummary,
    GeneratorResults,
    LeanResults,
    RetrieverResults,
    RunReport,
    SearchSummary,
    TrainingCurve,
    found_proofs,
)
from leanloop.agent.run_results import describe_model
from leanloop.agent.run_steps import (
    STEP_WORDS,
    Decision,
    RunSteps,
    files_signature,
    fingerprint,
    keep_earlier_report,
    settings_differ,
)
from leanloop.agent.run_tracks import (
    SIDE_STEPS,
    SideProcess,
    StepSpec,
    best_possible_recall,
    generator_after,
    run_side_steps,
    train_generator,
)
from leanloop.atomic import remove_stale_staging, replace_directory
from leanloop.database import DynamicDatabase, SplitConfig
from leanloop.errors import LeanloopError
from leanloop.trainer.evaluation import CompletionLoss, TacticAccuracy
from leanloop.words import count_of, plural

if TYPE_CHECKING:
    from leanloop.prover.job import ProofJob

__all__ = ["best_possible_recall", "describe_model", "effective_config", "plan", "run"]

log = logging.getLogger(__name__)

Say = Callable[[str], None]

#: The job's directories that are written aside and renamed into place.
STAGED = ("export", "retriever", "generator")


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


def effective_config(config: RunConfig) -> RunConfig:
    """The settings the job runs with: ``quick`` turns a full-size configuration into
    ``quick_run()``'s."""
    if config.quick and config.generator_model != "tinycoder":
        return config.quick_run()
    return config


def machine_load() -> tuple[float, int, float]:
    """The machine's load (the last minute's average of running processes), its CPUs, and how
    many times slower than on idle cores the job's own work should run beside that load (its
    two processes sharing the CPUs with the others; at least 1)."""
    cores = os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # not on this system
        load = 0.0
    return load, cores, max(1.0, (load + 2) / cores)


def plan(
    config: RunConfig, reused: frozenset[str] = frozenset(), slowdown: float = 1.0
) -> list[tuple[str, float]]:
    """The job's parts and how long each should take (seconds), for the user to read up front.

    The budgets (training times, the untrained generator's evaluation times) are what they
    say, whatever the load; the rest — starting processes, loading libraries and models,
    preparing data, saving, searching — is what it took on an idle 2-core CPU, times
    ``slowdown`` (see ``machine_load``). Steps in ``reused`` take seconds."""
    quick, f = config.quick, slowdown
    load = 2 if quick else 8  # a generator's weights
    item = 0.5 if quick else 5  # the evaluation step under way when its time is up
    step = 1 if quick else 10  # training stops after the optimizer step that ends past its time
    evaluation = config.loss_seconds + config.eval_seconds
    side = 30 * f  # the other process: starting, loading its libraries
    if "generator-before" not in reused:
        side += (load + 2 * item) * f + evaluation
    if "retriever" not in reused:
        side += 30 * f + config.retriever_seconds
    here = 0.0
    if "generator" not in reused:
        here += (40 + step) * f + config.generator_seconds
    if "generator-after" not in reused:
        here += load * f + evaluation
    here += (5 + min(config.search_theorems, 10) * (1 if quick else 6)) * f
    return [
        ("import the data, split, export", (2 if "data" in reused else 8) * f),
        (
            "other core: the untrained generator's held-out loss and top-k accuracy, then the "
            "retriever (BM25, untrained, training, trained)",
            side,
        ),
        (
            "this core: the generator's LoRA training, its held-out loss and top-k accuracy on "
            "the same test steps, replayed search",
            here,
        ),
        ("report", 5 * f),
    ]


def expected_seconds(config: RunConfig, steps: list[tuple[str, float]]) -> float:
    """The job's expected time: its two cores side by side (one after the other when
    ``parallel`` is off)."""
    data, side, here, report = (seconds for _, seconds in steps)
    return data + (max(side, here) if config.parallel else side + here) + report


def step_specs(
    config: RunConfig, dataset: Path, database: DynamicDatabase, out: Path
) -> dict[str, StepSpec]:
    """Each step's settings, inputs and outputs, and whether an earlier run's record of it is
    reused (the same settings and inputs, its outputs still there)."""
    steps = RunSteps(out)
    specs: dict[str, StepSpec] = {}

    def add(name: str, settings: dict[str, Any], inputs: dict[str, str], outputs: list[str]) -> str:
        decision = steps.decide(name, settings, inputs, outputs)
        if name == "data" and decision.record is not None:
            decision = _data_still_there(decision, database, out)
        specs[name] = StepSpec(settings, inputs, outputs, decision)
        return decision.fingerprint

    data = add(
        "data",
        {
            "dataset": str(dataset.resolve()),
            "dataset_files": fingerprint({"files": files_signature(dataset)}, {}),
            "database": database.url.render_as_string(hide_password=True),
            "val": config.val,
            "test": config.test,
            "seed": config.seed,
        },
        {},
        ["export"],
    )
    evaluation = {
        "generator_model": config.generator_model,
        "eval_k": config.eval_k,
        "eval_max_new_tokens": config.eval_max_new_tokens,
    }
    before = add(
        "generator-before",
        {
            **evaluation,
            "loss_steps": config.loss_steps,
            "loss_seconds": config.loss_seconds,
            "eval_steps": config.eval_steps,
            "eval_seconds": config.eval_seconds,
        },
        {"data": data},
        [],
    )
    add(
        "retriever",
        {
            "retriever_model": config.retriever_model,
            "retriever_seconds": config.retriever_seconds,
            "retriever_batch_size": config.retriever_batch_size,
            "retriever_max_seq_len": config.retriever_max_seq_len,
            "seed": config.seed,
        },
        {"data": data},
        ["retriever"],
    )
    trained = add(
        "generator",
        {
            "generator_model": config.generator_model,
            "generator_seconds": config.generator_seconds,
            "generator_batch_size": config.generator_batch_size,
            "generator_lr": config.generator_lr,
            "lora_r": config.lora_r,
            "seed": config.seed,
        },
        {"data": data},
        ["generator"],
    )
    add("generator-after", evaluation, {"generator": trained, "generator-before": before}, [])
    return specs


def _data_still_there(decision: Decision, database: DynamicDatabase, out: Path) -> Decision:
    """The data step's record is reused only while its export is as it left it and the
    database still holds its theorems."""
    record = decision.record
    assert record is not None
    summary = DataSummary.model_validate(record.result["summary"])
    if files_signature(out / "export") != record.result.get("export_files"):
        return Decision(decision.step, None, "redone: export/ changed", decision.fingerprint)
    if database.stats().theorems < summary.theorems:
        why = "redone: the database no longer holds its theorems"
        return Decision(decision.step, None, why, decision.fingerprint)
    return decision


def run(config: RunConfig, *, say: Say = print, verbose: bool = True) -> RunReport:
    """Run the main job and write its report (report.json, report.md, report.png).

    The job first says what it will do, how long that should take, and which steps an earlier
    run in the same output directory finished with the same settings and inputs (those are
    reused; the others are done again). A step stopped half-way (Ctrl-C, an error) leaves
    nothing behind, and ``RunSteps(output).kept_note()`` says what was kept. An earlier report of
    a run with other settings is kept under a new name.

    Args:
        config: The job's settings.
        say: Where the job's own lines go.
        verbose: Show the libraries' warnings and notices (False: they go to run.log in the
            output directory).

    Returns:
        The report.

    Raises:
        LeanloopError: The output is not a directory, the data cannot be found, or a step
            failed (the message says which and why).
    """
    config = effective_config(config)
    started = time.perf_counter()
    out = Path(config.output).expanduser()
    if out.exists() and not out.is_dir():
        raise LeanloopError(
            f"output {out}: a file is there; the job needs a directory",
            hint="give a new or existing directory",
        )
    dataset = resolve_data(config, say)
    out.mkdir(parents=True, exist_ok=True)
    for name in STAGED:
        remove_stale_staging(out, name)  # what a killed run left
    database = DynamicDatabase(config.database or out / "leanloop.db")
    specs = step_specs(config, dataset, database, out)
    reused = frozenset(name for name, spec in specs.items() if spec.decision.reused)
    load, cores, slowdown = machine_load()
    steps = plan(config, reused, slowdown)
    expected = expected_seconds(config, steps)
    _announce(config, out, specs, steps, expected, say, verbose)
    if slowdown > 1.2:
        say(
            f"  (the machine is busy: load {load:.1f} on {plural(cores, 'core')}; all but the "
            f"budgets are estimated {slowdown:.1f} times slower than on idle cores)"
        )
    report = RunReport(
        config=config.to_dict(),
        expected_seconds=expected,
        steps={name: spec.decision.why for name, spec in specs.items()},
    )
    with one_interrupt(), library_output(out / LOG_FILE, verbose=verbose):
        report.data = _data_step(database, dataset, out, config, specs["data"], say)
        _timed(report, "data", started)
        _models(config, database, out, specs, report, say, verbose)
        _timed(report, "models and search", started)
        report.lean = _lean_part(config, database, out, say)
        report.seconds = time.perf_counter() - started
        kept = keep_earlier_report(out, report.config)
        report.write(out)
    if kept is not None:
        say(f"the earlier report, of a run with other settings, is kept as {kept}")
    lines = report.summary_lines()
    if lines:
        say(
            "trained models against their baselines (a difference counts only when its 95 % "
            "bootstrap interval over the test items excludes 0):"
        )
        for line in lines:
            say(line)
    return report


def _announce(
    config: RunConfig,
    out: Path,
    specs: dict[str, StepSpec],
    steps: list[tuple[str, float]],
    expected: float,
    say: Say,
    verbose: bool,
) -> None:
    say(
        f"leanloop run{' --quick' if config.quick else ''}: about {expected / 60:.0f} min "
        f"({expected:.0f} s), in {out}"
    )
    for name, seconds in steps:
        say(f"  - {name}: ~{seconds:.0f} s")
    say(
        f"models: tactic generator {describe_model(config.generator_model)} with a LoRA adapter "
        f"(rank {config.lora_r}); premise retriever {describe_model(config.retriever_model)}"
    )
    reused = [name for name, spec in specs.items() if spec.decision.reused]
    if reused:
        say(f"reused from an earlier run (same settings and inputs): {', '.join(reused)}")
    for name, spec in specs.items():
        if spec.decision.why.startswith("redone"):
            say(f"{name}: {spec.decision.why}")
    differ = settings_differ(out, config.to_dict())
    if differ:
        say(
            f"{out / 'report.md'} is the report of a run with other settings "
            f"({', '.join(differ)}): it will be kept under a new name"
        )
    if not verbose:
        say(f"library warnings and notices go to {out / LOG_FILE} (-v shows them here)")


def _timed(report: RunReport, step: str, started: float) -> None:
    report.timings[step] = round(time.perf_counter() - started - sum(report.timings.values()), 1)


def _data_step(
    database: DynamicDatabase, dataset: Path, out: Path, config: RunConfig, spec: StepSpec, say: Say
) -> DataSummary:
    """Import, order by curriculum and export (aside, renamed into ``out/export``), or reuse
    an earlier run's."""
    record = spec.decision.record
    if record is not None:
        summary = DataSummary.model_validate(record.result["summary"])
        say(f"data: {_data_words(summary)} (reused)")
        return summary
    started = time.perf_counter()
    counts = database.import_dataset(dataset)
    repositories = database.sort_repositories_by_difficulty()
    split = SplitConfig(val=config.val, test=config.test, seed=config.seed)
    export = out / "export"
    with replace_directory(
        export, may_replace=lambda p: (p / "metadata.json").is_file()
    ) as staging:
        exported = database.export_merged_data(repositories, staging, split_config=split)
    for warning in exported.warnings:
        say(f"warning: {warning}")
    summary = DataSummary(
        dataset=str(dataset),
        repositories=[str(r) for r in repositories],
        theorems=exported.theorems,
        tactics=database.stats().tactics,
        splits=exported.split_sizes["random"],
        export=str(export),
    )
    say(f"data: {_data_words(summary)} ({counts.theorems_added} new)")
    result = {"summary": summary.model_dump(), "export_files": files_signature(export)}
    RunSteps(out).finish(spec.decision, spec.settings, spec.inputs, spec.outputs, result, started)
    return summary


def _data_words(summary: DataSummary) -> str:
    return (
        f"{plural(summary.theorems, 'theorem')} from "
        f"{plural(len(summary.repositories), 'repository')}, random split "
        + ", ".join(f"{k} {v}" for k, v in summary.splits.items())
    )


# -- the models, on two cores ----------------------------------------------------------------


def _models(
    config: RunConfig,
    database: DynamicDatabase,
    out: Path,
    specs: dict[str, StepSpec],
    report: RunReport,
    say: Say,
    verbose: bool,
) -> None:
    """The untrained generator's evaluation and the retriever on the other core (or first,
    without ``parallel``), the generator's training, its evaluation and the search here."""
    started = time.perf_counter()
    steps = RunSteps(out)
    url = database.url.render_as_string(hide_password=False)
    results = {
        name: _reused(specs[name], say)
        for name in SIDE_STEPS
        if specs[name].decision.record is not None
    }
    side = {name: specs[name] for name in SIDE_STEPS if name not in results}
    worker = None
    if side and config.parallel:
        worker = SideProcess(config, url, out, side, verbose)
    elif side:
        run_side_steps(config, url, out, side, say, results.__setitem__)
    try:
        trained = _step(
            specs["generator"], steps, say, lambda: train_generator(config, database, out, say)
        )
        before = results.get("generator-before")
        if before is None:
            assert worker is not None
            before = worker.wait_for("generator-before", results)
        after = _step(
            specs["generator-after"], steps, say, lambda: generator_after(config, out, before, say)
        )
        report.generator = _generator_results(
            config, before, trained, after, time.perf_counter() - started
        )
        report.search = _search(config, database, out, say)
        if "retriever" not in results:
            assert worker is not None
            say("waiting for the retriever (training on the other core) ...")
            worker.wait_for("retriever", results)
    except BaseException:
        if worker is not None:
            worker.close(interrupt=True)
        raise
    if worker is not None:
        worker.close(interrupt=False)
    retriever = {**results["retriever"], "model": describe_model(config.retriever_model)}
    report.retriever = RetrieverResults.model_validate(retriever)


def _reused(spec: StepSpec, say: Say) -> dict[str, Any]:
    record = spec.decision.record
    assert record is not None
    say(f"{STEP_WORDS[record.step]}: reused from the run of {record.finished}")
    return record.result


def _step(
    spec: StepSpec, steps: RunSteps, say: Say, do: Callable[[], dict[str, Any]]
) -> dict[str, Any]:
    """An earlier run's result of a step, or the step done now and recorded."""
    if spec.decision.record is not None:
        return _reused(spec, say)
    started = time.perf_counter()
    result = do()
    steps.finish(spec.decision, spec.settings, spec.inputs, spec.outputs, result, started)
    return result


def _generator_results(
    config: RunConfig,
    before: dict[str, Any],
    trained: dict[str, Any],
    after: dict[str, Any],
    seconds: float,
) -> GeneratorResults:
    curve = trained.get("curve")
    return GeneratorResults(
        model=config.generator_model,
        model_description=f"{describe_model(config.generator_model)} with a LoRA adapter "
        f"(rank {config.lora_r})",
        before=TacticAccuracy.model_validate(before["accuracy"]),
        after=TacticAccuracy.model_validate(after["accuracy"]),
        loss_before=CompletionLoss.model_validate(before["loss"]),
        loss_after=CompletionLoss.model_validate(after["loss"]),
        train_steps=trained["train_steps"],
        train_examples=trained["train_examples"],
        train_seconds=trained["train_seconds"],
        train_tokens=trained["train_tokens"],
        batch_size=trained["batch_size"],
        device=trained["device"],
        curve=None if curve is None else TrainingCurve.model_validate(curve),
        seconds=seconds,
    )


# -- proof search in the replay environment --------------------------------------------------


def search_jobs(config: RunConfig, out: Path) -> tuple[ProofJob, ProofJob]:
    """The main job's searches in the replay environment: the trained generator on the first
    ``search_theorems`` test theorems of the export, the recorded diagnostic on all — the
    jobs of ``leanloop prove --dataset OUT/export --split test --replay``, so that each
    resumes the other's run."""
    from leanloop.prover.config import ProverConfig
    from leanloop.prover.job import DatasetTargets, ProofJob

    settings = ProverConfig(
        timeout=config.search_seconds,
        max_expansions=config.search_expansions,
        num_sampled_tactics=config.eval_k,
        seed=config.seed,
    )
    test = DatasetTargets(path=out / "export", split="test")
    trained = ProofJob(
        targets=test.model_copy(update={"limit": config.search_theorems}),
        generator=f"hf:{out / 'generator'}",
        lean="replay",
        search=settings,
    )
    diagnostic = ProofJob(
        targets=test,
        generator="recorded",
        lean="replay",
        search=ProverConfig(timeout=30, seed=config.seed),
    )
    return trained, diagnostic


def sorry_job(config: RunConfig, project: Path) -> ProofJob:
    """The main job's proving of the example project's sorries: the job of ``leanloop prove
    --project`` and of an agent's ``prove()``, so that each resumes the other's run."""
    from leanloop.prover.config import ProverConfig
    from leanloop.prover.job import ProofJob, SorryTargets

    settings = ProverConfig(
        timeout=config.search_seconds,
        max_expansions=4 * config.search_expansions,
        num_sampled_tactics=config.eval_k,
        seed=config.seed,
    )
    return ProofJob(targets=SorryTargets(project=str(project)), search=settings)


def _search(config: RunConfig, database: DynamicDatabase, out: Path, say: Say) -> SearchSummary:
    """Search on the test theorems in the replay environment: the trained generator on the
    first ``search_theorems``, the recorded diagnostic on all (its outcome checks the data and
    the search together). What is found is replayed, not proved: no Lean checked it."""
    from leanloop.prover.engine import JobInputs, ProofRun, run_job
    from leanloop.prover.hf import HFProver

    trained, diagnostic = search_jobs(config, out)
    settings = trained.search
    say(
        f"search (replay environment, no Lean): the trained generator on the first "
        f"{config.search_theorems} test theorems ..."
    )
    prover = HFProver(out / "generator", config=settings)
    runs = [
        run_job(trained, JobInputs(database, prover=prover)),
        run_job(diagnostic, JobInputs(database)),
    ]
    assert all(isinstance(r, ProofRun) for r in runs)
    model, recorded = (r.report() for r in runs if isinstance(r, ProofRun))
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
    from leanloop.agent.proving import SorryInputs, prove_sorry_job
    from leanloop.prover.hf import HFProver

    project = out / "lean-project"  # a copy: filling sorries edits the files
    if project.exists():
        shutil.rmtree(project)
    shutil.copytree(source, project, ignore=shutil.ignore_patterns(".lake", ".leanloop-backups"))
    say(f"Lean found: tracing {project} and proving its sorries (checked by Lean) ...")
    traced = database.trace_repository(path=project, workers=1)
    theorems = database.get_sorry_theorems(traced.repository)
    job = sorry_job(config, project)
    prover = HFProver(out / "generator", config=job.search)
    report = prove_sorry_job(job, prover, SorryInputs(theorems, database=database))
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
