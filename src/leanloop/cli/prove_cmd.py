"""``leanloop prove``: the command line's forms of a ``ProofJob``, run by the proving engine
(``leanloop.prover.engine``) — the theorems of a dataset split, on Lean (the REPL in the project
the dataset was traced from) or, with ``--replay``, on the recorded steps without Lean
(``prove_dataset``); the open sorries of a Lean project, written back where Lean accepts them
(``prove_project``); or a benchmark's statements (``leanloop.cli.benchmark_cmd``). The options
build the job (over ``--config``); its components come from ``leanloop.prover.assemble`` and its
run's name from the job's one rule, so that the agents and the main job resume the same runs.
Each result goes into the database as it comes, then a summary and a report (JSON and a plot;
for sorries also Markdown)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import typer
from rich.markup import escape
from rich.table import Table

import leanloop.prover.assemble as assemble
from leanloop.cli.common import (
    DB_OPTION,
    console,
    err_console,
    existing_path,
    on_interrupt,
    open_database,
    progress_bar,
    user_path,
)
from leanloop.cli.lean_cmd import TraceWatch
from leanloop.errors import LeanloopError
from leanloop.prover.config import ProofMode
from leanloop.prover.engine import Callbacks, JobInputs, ProofRun, run_job
from leanloop.prover.job import DatasetTargets, ProofJob, SorryTargets, load_job
from leanloop.words import plural, share

if TYPE_CHECKING:
    from leanloop.data.records import ProofAttempt


@dataclass(frozen=True)
class ProveRequest:
    """What ``leanloop prove`` does with a job's results: the database, JSON lines on stdout,
    where the report goes, and whether a generator was named."""

    db: str | None
    json_lines: bool
    out: Path
    generator_given: bool


@dataclass(frozen=True)
class ProveOptions:
    """The options of ``leanloop prove``, as given."""

    dataset: str | None
    split: str
    replay: bool
    generator: str | None
    mode: ProofMode | None
    benchmark: str | None
    samples: int | None
    stop_at_first: bool
    verifier: str
    prompt: str | None
    workers: int | None
    config: str | None
    db: str | None
    json_lines: bool
    run: str | None
    limit: int | None
    project: str | None
    commit: str | None
    branch: str | None
    base_url: str | None
    api_key_env: str
    address: str | None
    out: str
    lean: str | None

    def check(self) -> None:
        """Options that do not go together are refused, one line each."""
        given: object
        if self.benchmark is not None:
            for given, name in (
                (self.dataset, "--dataset"),
                (self.commit, "--commit"),
                (self.branch, "--branch"),
            ):
                if given:
                    raise LeanloopError(f"{name} does not go with --benchmark")
            if self.replay:
                raise LeanloopError(
                    "--replay replays a dataset's recorded steps; a benchmark has none",
                    hint="offline, use --generator recorded|samples:FILE --verifier recorded:FILE",
                )
            if self.split not in ("test", "valid", "all"):
                raise LeanloopError(
                    f"--split {self.split}: a benchmark's splits are test, valid or all"
                )
            return
        for given, name in (
            (self.samples, "--samples"),
            (self.prompt, "--prompt"),
            (self.stop_at_first or None, "--stop-at-first"),
            (None if self.verifier == "pool" else self.verifier, "--verifier"),
        ):
            if given:
                raise LeanloopError(f"{name} goes with --benchmark")
        if self.dataset is not None:
            for given, name in ((self.commit, "--commit"), (self.branch, "--branch")):
                if given:
                    raise LeanloopError(f"{name} goes with --project and no --dataset (sorries)")
        elif self.project is None:
            raise LeanloopError(
                "nothing to prove: give --dataset DIR (a split of a dataset) or --project "
                "DIR|URL (a Lean project's sorries)"
            )
        elif self.replay:
            raise LeanloopError(
                "--replay replays a dataset's recorded steps: it needs --dataset",
                hint="proving a project's sorries needs Lean",
            )

    def targets(self) -> dict[str, Any]:
        """The job's targets."""
        if self.benchmark is not None:
            return {"kind": "benchmark", "spec": self.benchmark, "split": self.split}
        if self.dataset is not None:
            return {"kind": "dataset", "path": str(user_path(self.dataset)), "split": self.split}
        assert self.project is not None
        return {
            "kind": "sorries",
            "project": self.project,
            "commit": self.commit,
            "branch": self.branch,
        }

    def job(self) -> ProofJob:
        """The job the options (over ``--config``) describe."""
        mode = self.mode or (ProofMode.WHOLE if self.benchmark is not None else ProofMode.SEARCH)
        sampling = self.benchmark is not None and mode is ProofMode.WHOLE
        targets = {**self.targets(), "limit": self.limit}
        options: dict[str, Any] = {
            "targets": targets,
            "mode": "sampling" if sampling else mode.value,
            "generator": self.generator or ("recorded" if self.replay else None),
            "base_url": self.base_url,
            "api_key_env": None if self.api_key_env.lower() == "none" else self.api_key_env,
            "attempts": self.samples,
            "stop_at_first": self.stop_at_first or None,
            "workers": self.workers,
            "address": self.address,
            "run": self.run,
        }
        if self.replay:
            options["lean"] = "replay"
        elif sampling and self.verifier != "pool":
            options["lean"] = self.verifier
        else:
            options["lean"] = self.lean
        if targets["kind"] != "sorries" and self.project is not None:
            options["project"] = str(user_path(self.project))
        if self.prompt is not None:
            options["sampling"] = {"prompt": self.prompt}
        given = {k: v for k, v in options.items() if v is not None}
        return load_job(user_path(self.config) if self.config else None, given)


DATASET_OPTION = typer.Option(
    None,
    "--dataset",
    metavar="DIR",
    help="A LeanDojo-format dataset directory to prove a split of [default: none: prove the "
    "open sorries of --project].",
    show_default=False,
)
SPLIT_OPTION = typer.Option(
    "test",
    "--split",
    metavar="SPLIT",
    help="The split to prove: test, val, train (of the random scheme) or SCHEME/SPLIT; "
    "with --benchmark: test, valid or all.",
)
REPLAY_OPTION = typer.Option(
    False,
    "--replay",
    help="No Lean: replay the recorded steps of the traces. What is found is 'replayed "
    "(recorded proof found)', never proved.",
)
GENERATOR_OPTION = typer.Option(
    None,
    "--generator",
    metavar="recorded|hf:PATH|external:MODEL",
    help="What proposes tactics: the recorded diagnostic, a checkpoint (a trainer's "
    "output_dir) or a model behind an OpenAI-compatible endpoint [default: recorded with "
    "--replay].",
    show_default=False,
)
MODE_OPTION = typer.Option(
    None,
    "--mode",
    help="search: tactic by tactic through Lean; whole: whole proofs written by the model, "
    "each checked by Lean [default: whole with --benchmark, else search].",
    show_default=False,
)
BENCHMARK_OPTION = typer.Option(
    None,
    "--benchmark",
    metavar="FILE|minif2f|proofnet",
    help="Prove a statement-only benchmark and report pass@k: a JSONL file (name, split, "
    "header, informal_prefix, formal_statement) or a .lean file whose theorems end in "
    "sorry; minif2f and proofnet are found in LEANLOOP_BENCHMARKS (or downloaded).",
    show_default=False,
)
SAMPLES_OPTION = typer.Option(
    None,
    "--samples",
    min=1,
    metavar="N",
    help="With --benchmark: whole proofs sampled per statement (the n of pass@k; search: "
    "attempts) [default: samples of the config, 1].",
    show_default=False,
)
STOP_AT_FIRST_OPTION = typer.Option(
    False,
    "--stop-at-first",
    help="With --benchmark: stop sampling a statement at its first verified proof (then "
    "only pass@N is reported).",
)
VERIFIER_OPTION = typer.Option(
    "pool",
    "--verifier",
    metavar="pool|kimina:URL|recorded:FILE",
    help="With --benchmark: who checks the proofs: leanloop's REPLs in --project, a Kimina "
    "Lean Server, or Lean's verdicts recorded earlier (offline; labelled recorded).",
)
PROMPT_OPTION = typer.Option(
    None,
    "--prompt",
    metavar="complete|chat",
    help="With --benchmark: the prompt format (or set 'prompt' in --config) [default: complete].",
    show_default=False,
)
WORKERS_OPTION = typer.Option(
    None,
    "--workers",
    min=1,
    metavar="N",
    help="Theorems proved at once, one Ray worker each [default: num_workers of the config]; "
    "with --benchmark: verification workers (threads, or Ray workers with --address).",
    show_default=False,
)
CONFIG_OPTION = typer.Option(
    None,
    "--config",
    metavar="FILE",
    help="A ProofJob YAML or JSON file (targets, generator, mode, lean, search, sampling, "
    "...; a ProverConfig or BenchmarkConfig file is read as its search or sampling); the "
    "options given override it.",
)
JSON_LINES_OPTION = typer.Option(
    False, "--json", help="One JSON object per theorem on stdout (the summary on stderr)."
)
RUN_OPTION = typer.Option(
    None,
    "--run",
    metavar="NAME",
    help="The run's name in the database; a rerun of a run skips its finished theorems "
    "[default: the job's one rule: the generator, the targets, the mode and the policy, as "
    "the agents and the main job name the same job].",
    show_default=False,
)
LIMIT_OPTION = typer.Option(
    None, "--limit", min=1, metavar="N", help="Prove only the first N theorems."
)
PROJECT_OPTION = typer.Option(
    None,
    "--project",
    metavar="DIR|URL",
    help="With --dataset (without --replay): the Lean project the dataset was traced from, "
    "checked out at its commit and built. Without --dataset: the Lean project (a directory "
    "or a git URL) whose open sorries are proved; it is traced first if the database does "
    "not hold it, and each proof is written into its file only after Lean accepted it "
    "there and its axioms passed the audit (the original kept under .leanloop-backups/).",
)
COMMIT_OPTION = typer.Option(
    None, "--commit", metavar="SHA", help="The commit of a --project URL [default: HEAD]."
)
BRANCH_OPTION = typer.Option(
    None,
    "--branch",
    metavar="NAME",
    help="Check and commit each proof on this git branch of the project, in a worktree "
    "of its own (created from HEAD; never the branch checked out); your files get a proof "
    "too only where they still match the branch.",
)
BASE_URL_OPTION = typer.Option(
    None, "--base-url", metavar="URL", help="The endpoint of external:MODEL (.../v1)."
)
API_KEY_ENV_OPTION = typer.Option(
    "auto",
    "--api-key-env",
    metavar="NAME",
    help="The variable holding the endpoint's API key ('auto': HF_TOKEN for Hugging "
    "Face's router, where a hub name goes without --base-url, else OPENAI_API_KEY; "
    "'none': send no key).",
)
ADDRESS_OPTION = typer.Option(
    None,
    "--address",
    metavar="ray://HOST:PORT|local",
    help="Run the workers on this Ray cluster ('local': a Ray started on this machine); with "
    "--benchmark, the checks run there and generation stays here.",
)
OUT_OPTION = typer.Option(
    "build/prove", "--out", metavar="DIR", help="Where the report (JSON and PNG) goes."
)
LEAN_OPTION = typer.Option(
    None,
    "--lean",
    metavar="repl|pantograph",
    help="The Lean backend leanloop starts (the job's lean: in --config) [default: repl].",
    show_default=False,
)


def prove(
    dataset: str | None = DATASET_OPTION,
    split: str = SPLIT_OPTION,
    replay: bool = REPLAY_OPTION,
    generator: str | None = GENERATOR_OPTION,
    mode: ProofMode | None = MODE_OPTION,
    benchmark: str | None = BENCHMARK_OPTION,
    samples: int | None = SAMPLES_OPTION,
    stop_at_first: bool = STOP_AT_FIRST_OPTION,
    verifier: str = VERIFIER_OPTION,
    prompt: str | None = PROMPT_OPTION,
    workers: int | None = WORKERS_OPTION,
    config: str | None = CONFIG_OPTION,
    db: str | None = DB_OPTION,
    json_lines: bool = JSON_LINES_OPTION,
    run: str | None = RUN_OPTION,
    limit: int | None = LIMIT_OPTION,
    project: str | None = PROJECT_OPTION,
    commit: str | None = COMMIT_OPTION,
    branch: str | None = BRANCH_OPTION,
    base_url: str | None = BASE_URL_OPTION,
    api_key_env: str = API_KEY_ENV_OPTION,
    address: str | None = ADDRESS_OPTION,
    out: str = OUT_OPTION,
    lean: str | None = LEAN_OPTION,
) -> None:
    """Prove the theorems of a dataset split and report pass@1, outcomes and times; with
    --benchmark, sample whole proofs of a benchmark's statements and report pass@k; or, with
    --project alone, prove a Lean project's open sorries and write back the proofs Lean
    accepts."""
    options = ProveOptions(**locals())
    options.check()
    job = options.job()
    request = ProveRequest(db, json_lines, user_path(out), generator is not None or replay)
    if isinstance(job.targets, DatasetTargets):
        prove_dataset(job, request)
    elif isinstance(job.targets, SorryTargets):
        prove_project(job, request)
    else:
        from leanloop.cli.benchmark_cmd import prove_benchmark

        prove_benchmark(job, request)


def prove_dataset(job: ProofJob, request: ProveRequest) -> None:
    """``prove --dataset``: a split's theorems through the proving engine, then the summary
    and the report."""
    if not request.generator_given:
        raise LeanloopError(
            "choose what proposes tactics with --generator",
            hint="hf:PATH (a trained checkpoint) or external:MODEL; --replay runs without Lean",
        )
    assert isinstance(job.targets, DatasetTargets)
    servers = assemble.servers(job)  # Lean is checked first
    database = open_database(request.db)  # before the model is loaded and the split read
    prover = assemble.prover(job)
    replay = job.lean_kind == "replay"
    found = assemble.dataset_theorems(job.targets, replay=replay)
    if found.chosen:
        err_console.print(found.chosen, highlight=False)
    if found.term_mode:
        err_console.print(
            f"{found.term_mode} theorems without traced tactics are left out: the replay has no "
            "recorded step of a term-mode proof",
            highlight=False,
        )
    if not found.theorems:
        raise LeanloopError(
            f"{job.targets.path}: no theorem to prove in split {job.targets.split!r}"
        )
    run_name = job.run_name(assemble.identity(prover))
    show = _json_printer(request.json_lines)
    with (
        on_interrupt(proving_stopped(database, run_name)),
        progress_bar(f"proving {plural(len(found.theorems), 'theorem')} ({run_name})") as update,
    ):
        inputs = JobInputs(
            database=database,
            theorems=found.theorems,
            callbacks=Callbacks(progress=update, on_result=show),
            prover=prover,
            servers=servers,
        )
        outcome = run_job(job, inputs)
    assert isinstance(outcome, ProofRun)
    for attempt in outcome.skipped:
        show(attempt)
    report = outcome.report()
    _summary(report, len(outcome.skipped), err_console if request.json_lines else console)
    _write_report(report, request.out, run_name)


def prove_project(job: ProofJob, request: ProveRequest) -> None:
    """``prove --project``: trace the project if needed, prove its open sorries through the
    proving engine and write back what Lean accepts (the engine's hook)."""
    from leanloop.agent.proving import SorryInputs, prove_sorry_job
    from leanloop.agent.repositories import require_lean, setup_project
    from leanloop.lean.project import is_remote

    assert isinstance(job.targets, SorryTargets) and job.targets.project is not None
    project = job.targets.project
    if not request.generator_given or job.generator.startswith("recorded"):
        raise LeanloopError(
            "proving sorries needs a model: --generator hf:PATH or external:MODEL",
            hint="the recorded diagnostic only replays a dataset's own proofs",
        )
    if not is_remote(project):
        existing_path(project, "project")  # a wrong path is said before anything else
    require_lean()
    database = open_database(request.db)  # checked before the project is cloned or traced
    watch = TraceWatch()
    with (
        on_interrupt(watch.note),
        progress_bar(f"tracing {project} (if the database does not hold it)") as bar,
    ):
        entry = setup_project(database, project, job.targets.commit, progress=watch.wrap(bar))
    root = entry.open_project().root
    targets = job.targets.model_copy(update={"project": str(root)})
    job = ProofJob.load(job, targets=targets)
    servers = assemble.lean_launcher(root, job.prover_config())
    theorems = database.get_sorry_theorems(entry.repository)[: job.targets.limit]
    prover = assemble.prover(job)
    name = job.run_name(assemble.identity(prover))
    stopped = proving_stopped(database, name, written_back=True)
    with (
        on_interrupt(stopped),
        progress_bar(f"proving {plural(len(theorems), 'sorry')} of {entry.repository}") as update,
    ):
        inputs = SorryInputs(theorems, servers, database, progress=update)
        report = prove_sorry_job(job, prover, inputs)
    _sorry_summary(report, request)
    written = report.write(request.out / entry.slug)
    err_console.print(f"report: {', '.join(map(str, written))}", highlight=False)


def _sorry_summary(report, request: ProveRequest) -> None:
    out_console = err_console if request.json_lines else console
    if request.json_lines:
        for row in report.rows:
            typer.echo(row.model_dump_json())
    table = Table(title=f"run {report.run}", title_justify="left")
    for column in ("theorem", "outcome", "length", "seconds"):
        table.add_column(column)
    for row in report.rows:
        table.add_row(
            escape(row.full_name),
            escape(row.outcome),
            str(row.proof_length),
            f"{row.seconds + row.check_seconds:.2f}",
        )
    out_console.print(table)
    out_console.print(report.summary(), highlight=False)


def proving_stopped(database, run: str, *, written_back: bool = False) -> Callable[[], str]:
    """What a proving command stopped by Ctrl-C says: the run's attempts the database holds
    (each stored as it ended) and that the same command goes on (the proving engine skips the
    run's finished attempts and makes those that ended in an error again)."""
    from leanloop.database.attempts import RunProgress

    def note() -> str:
        stored = database.get_attempts(run)
        finished = len(RunProgress.of(stored).finished)
        kept = "; the proofs written back stay in their files" if written_back else ""
        return (
            f"run '{run}' has {len(stored)} attempts stored ({finished} finished, "
            f"{len(stored) - finished} ended in an error){kept}; run the same command again to "
            "continue: finished attempts are skipped, the others are made again"
        )

    return note


def _json_line(attempt: ProofAttempt) -> str:
    return orjson.dumps(
        {
            "full_name": attempt.full_name,
            "status": attempt.status.value,
            "proof": list(attempt.proof) if attempt.proof is not None else None,
            "expansions": attempt.expansions,
            "seconds": round(attempt.seconds, 4),
            "attempt": attempt.attempt,
            "error": attempt.error,
            "axioms": list(attempt.axioms) if attempt.axioms is not None else None,
            "environment": attempt.environment,
        }
    ).decode()


def _json_printer(enabled: bool):
    def show(attempt: ProofAttempt) -> None:
        if enabled:
            typer.echo(_json_line(attempt))

    return show


def _summary(report, skipped: int, out) -> None:
    from leanloop.data.records import AttemptStatus
    from leanloop.prover.result import describe_status

    table = Table(title=f"run {report.run}", title_justify="left")
    table.add_column("outcome")
    table.add_column("attempts", justify="right")
    for status in AttemptStatus:
        count = report.status_counts.get(status.value, 0)
        if count:
            table.add_row(escape(describe_status(status)), str(count))
    out.print(table)
    times = (
        f"{report.seconds_mean:.2f} s per attempt (median {report.seconds_median:.2f} s, "
        f"max {report.seconds_max:.2f} s)"
    )
    if report.proving:
        k = f", pass@{report.k} {report.pass_at_k:.3f}" if report.k > 1 else ""
        out.print(
            f"proved (checked by Lean, axioms audited): pass@1 {report.pass_at_1:.3f}{k} on "
            f"{plural(report.theorems, 'theorem')}; {times}",
            highlight=False,
        )
    else:
        found = round(report.rate_at_1 * report.theorems)
        out.print(
            f"recorded proofs found again ({report.environment}, not proving): about "
            f"{share(found, report.theorems, 'theorem')} per attempt; {times}",
            highlight=False,
        )
    if report.axioms_used:
        used = ", ".join(f"{name} ({count})" for name, count in report.axioms_used.items())
        out.print(f"axioms the proofs depend on (Lean's audit): {used}", highlight=False)
    for line in report.why_not():  # why the theorems without a proof have none
        out.print(f"without a proof: {escape(line)}", highlight=False)
    if skipped:
        out.print(
            f"{skipped} attempts were already finished in this run (not run again)",
            highlight=False,
        )
    if not report.proving:
        out.print(
            "replay: the recorded steps were replayed without Lean; no Lean checked these proofs",
            highlight=False,
        )


def _write_report(report, out: Path, run_name: str) -> None:
    from leanloop.prover.run_report import slug

    # a report of another run or other settings under this name is kept (written as -2, ...)
    written = report.write(out, stem=slug(run_name))
    if written[0].stem != slug(run_name):
        err_console.print(
            f"{out / slug(run_name)}.md holds a report of other settings: kept", highlight=False
        )
    err_console.print(f"report: {', '.join(str(p) for p in written)}", highlight=False)
