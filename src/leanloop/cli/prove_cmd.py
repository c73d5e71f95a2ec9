"""``leanloop prove``: two thin forms over the proving engine (``leanloop.prover.run``) — the
theorems of a dataset split, on Lean (the REPL in the project the dataset was traced from) or,
with ``--replay``, on the recorded steps without Lean (``prove_dataset``); or the open sorries
of a Lean project, written back where Lean accepts them (``prove_project``). Each result goes
into the database as it comes, then a summary and a report (JSON and a plot; for sorries also
Markdown)."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import orjson
import typer
from rich.markup import escape
from rich.table import Table

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
from leanloop.prover.config import ProofMode, ProverConfig
from leanloop.words import plural, share

if TYPE_CHECKING:
    from leanloop.data.records import ProofAttempt, Theorem


@dataclass(frozen=True)
class ProveRequest:
    """What ``leanloop prove`` was asked, options checked: the two forms read it."""

    generator: str | None
    settings: ProverConfig
    mode: ProofMode
    db: str | None
    run: str | None
    limit: int | None
    workers: int | None
    address: str | None
    base_url: str | None
    api_key_env: str
    json_lines: bool
    out: Path

    def prover(self, dataset_dir: Path | None):
        return _prover(self.generator, dataset_dir, self.settings, self.base_url, self.api_key_env)


def prove(
    dataset: str | None = typer.Option(
        None,
        "--dataset",
        metavar="DIR",
        help="A LeanDojo-format dataset directory to prove a split of [default: none: prove the "
        "open sorries of --project].",
        show_default=False,
    ),
    split: str = typer.Option(
        "test",
        "--split",
        metavar="SPLIT",
        help="The split to prove: test, val, train (of the random scheme) or SCHEME/SPLIT; "
        "with --benchmark: test, valid or all.",
    ),
    replay: bool = typer.Option(
        False,
        "--replay",
        help="No Lean: replay the recorded steps of the traces. What is found is 'replayed "
        "(recorded proof found)', never proved.",
    ),
    generator: str | None = typer.Option(
        None,
        "--generator",
        metavar="recorded|hf:PATH|external:MODEL",
        help="What proposes tactics: the recorded diagnostic, a checkpoint (a trainer's "
        "output_dir) or a model behind an OpenAI-compatible endpoint [default: recorded with "
        "--replay].",
        show_default=False,
    ),
    mode: ProofMode | None = typer.Option(
        None,
        "--mode",
        help="search: tactic by tactic through Lean; whole: whole proofs written by the model, "
        "each checked by Lean [default: whole with --benchmark, else search].",
        show_default=False,
    ),
    benchmark: str | None = typer.Option(
        None,
        "--benchmark",
        metavar="FILE|minif2f|proofnet",
        help="Prove a statement-only benchmark and report pass@k: a JSONL file (name, split, "
        "header, informal_prefix, formal_statement) or a .lean file whose theorems end in "
        "sorry; minif2f and proofnet are found in LEANLOOP_BENCHMARKS (or downloaded).",
        show_default=False,
    ),
    samples: int | None = typer.Option(
        None,
        "--samples",
        min=1,
        metavar="N",
        help="With --benchmark: whole proofs sampled per statement (the n of pass@k; search: "
        "attempts) [default: samples of the config, 1].",
        show_default=False,
    ),
    stop_at_first: bool = typer.Option(
        False,
        "--stop-at-first",
        help="With --benchmark: stop sampling a statement at its first verified proof (then "
        "only pass@N is reported).",
    ),
    verifier: str = typer.Option(
        "pool",
        "--verifier",
        metavar="pool|kimina:URL|recorded:FILE",
        help="With --benchmark: who checks the proofs: leanloop's REPLs in --project, a Kimina "
        "Lean Server, or Lean's verdicts recorded earlier (offline; labelled recorded).",
    ),
    prompt: str | None = typer.Option(
        None,
        "--prompt",
        metavar="complete|chat",
        help="With --benchmark: the prompt format (or set 'prompt' in --config) [default: "
        "complete].",
        show_default=False,
    ),
    workers: int | None = typer.Option(
        None,
        "--workers",
        min=1,
        metavar="N",
        help="Theorems proved at once, one Ray worker each [default: num_workers of the config].",
        show_default=False,
    ),
    config: str | None = typer.Option(
        None,
        "--config",
        metavar="FILE",
        help="A ProverConfig YAML or JSON file (with --benchmark and whole proofs: a "
        "BenchmarkConfig).",
    ),
    db: str | None = DB_OPTION,
    json_lines: bool = typer.Option(
        False, "--json", help="One JSON object per theorem on stdout (the summary on stderr)."
    ),
    run: str | None = typer.Option(
        None,
        "--run",
        metavar="NAME",
        help="The run's name in the database; a rerun of a run skips its finished theorems "
        "[default: from the generator, dataset and split].",
        show_default=False,
    ),
    limit: int | None = typer.Option(
        None, "--limit", min=1, metavar="N", help="Prove only the first N theorems."
    ),
    project: str | None = typer.Option(
        None,
        "--project",
        metavar="DIR|URL",
        help="With --dataset (without --replay): the Lean project the dataset was traced from, "
        "checked out at its commit and built. Without --dataset: the Lean project (a directory "
        "or a git URL) whose open sorries are proved; it is traced first if the database does "
        "not hold it, and each proof is written into its file only after Lean accepted it "
        "there and its axioms passed the audit (the original kept under .leanloop-backups/).",
    ),
    commit: str | None = typer.Option(
        None, "--commit", metavar="SHA", help="The commit of a --project URL [default: HEAD]."
    ),
    branch: str | None = typer.Option(
        None,
        "--branch",
        metavar="NAME",
        help="Check and commit each proof on this git branch of the project, in a worktree "
        "of its own (created from HEAD; never the branch checked out); your files get a proof "
        "too only where they still match the branch.",
    ),
    base_url: str | None = typer.Option(
        None, "--base-url", metavar="URL", help="The endpoint of external:MODEL (.../v1)."
    ),
    api_key_env: str = typer.Option(
        "auto",
        "--api-key-env",
        metavar="NAME",
        help="The variable holding the endpoint's API key ('auto': HF_TOKEN for Hugging "
        "Face's router, where a hub name goes without --base-url, else OPENAI_API_KEY; "
        "'none': send no key).",
    ),
    address: str | None = typer.Option(
        None, "--address", metavar="ray://HOST:PORT", help="Run the workers on this Ray cluster."
    ),
    out: str = typer.Option(
        "build/prove", "--out", metavar="DIR", help="Where the report (JSON and PNG) goes."
    ),
    lean: str | None = typer.Option(
        None,
        "--lean",
        metavar="repl|pantograph",
        help="The Lean backend leanloop starts (lean_backend of the config) [default: repl].",
        show_default=False,
    ),
) -> None:
    """Prove the theorems of a dataset split and report pass@1, outcomes and times; with
    --benchmark, sample whole proofs of a benchmark's statements and report pass@k; or, with
    --project alone, prove a Lean project's open sorries and write back the proofs Lean
    accepts."""
    mode = mode or (ProofMode.WHOLE if benchmark is not None else ProofMode.SEARCH)
    prover_config = config is not None and (benchmark is None or mode is ProofMode.SEARCH)
    settings = (
        ProverConfig.from_yaml(user_path(config))
        if prover_config and config is not None
        else ProverConfig()
    )
    if lean is not None:
        settings = dataclasses.replace(settings, lean_backend=lean)
    request = ProveRequest(
        generator=generator or ("recorded" if replay else None),
        settings=settings,
        mode=mode,
        db=db,
        run=run,
        limit=limit,
        workers=workers,
        address=address,
        base_url=base_url,
        api_key_env=api_key_env,
        json_lines=json_lines,
        out=user_path(out),
    )
    given: object  # options of several types, checked below
    if benchmark is not None:
        from leanloop.cli.benchmark_cmd import BenchmarkRequest, prove_benchmark

        for given, name in ((dataset, "--dataset"), (commit, "--commit"), (branch, "--branch")):
            if given:
                raise LeanloopError(f"{name} does not go with --benchmark")
        if replay:
            raise LeanloopError(
                "--replay replays a dataset's recorded steps; a benchmark has none",
                hint="offline, use --generator recorded|samples:FILE --verifier recorded:FILE",
            )
        asked = BenchmarkRequest(
            spec=benchmark,
            split=split,
            samples=samples,
            stop_at_first=stop_at_first,
            verifier=verifier,
            prompt=prompt,
            config=user_path(config) if config and not prover_config else None,
            project=project,
        )
        prove_benchmark(request, asked)
        return
    for given, name in (
        (samples, "--samples"),
        (prompt, "--prompt"),
        (stop_at_first or None, "--stop-at-first"),
        (None if verifier == "pool" else verifier, "--verifier"),
    ):
        if given:
            raise LeanloopError(f"{name} goes with --benchmark")
    if dataset is not None:
        for given, name in ((commit, "--commit"), (branch, "--branch")):
            if given:
                raise LeanloopError(f"{name} goes with --project and no --dataset (sorries)")
        prove_dataset(request, existing_path(dataset, "dataset"), split, replay, project)
    elif project is None:
        raise LeanloopError(
            "nothing to prove: give --dataset DIR (a split of a dataset) or --project "
            "DIR|URL (a Lean project's sorries)"
        )
    elif replay:
        raise LeanloopError(
            "--replay replays a dataset's recorded steps: it needs --dataset",
            hint="proving a project's sorries needs Lean",
        )
    else:
        prove_project(request, project, commit, branch)


def prove_dataset(
    request: ProveRequest, dataset_dir: Path, split: str, replay: bool, project: str | None
) -> None:
    """``prove --dataset``: a split's theorems through the proving engine, then the summary
    and the report."""
    from leanloop.prover.run import run_proofs

    if request.generator is None:
        raise LeanloopError(
            "choose what proposes tactics with --generator",
            hint="hf:PATH (a trained checkpoint) or external:MODEL; --replay runs without Lean",
        )
    servers = _replay_servers(dataset_dir) if replay else _lean_servers(project, request)
    database = open_database(request.db)  # before the model is loaded and the split read
    prover = request.prover(dataset_dir)
    theorems, term_mode = _theorems(dataset_dir, split, replay=replay, limit=request.limit)
    if term_mode:
        err_console.print(
            f"{term_mode} theorems without traced tactics are left out: the replay has no "
            "recorded step of a term-mode proof",
            highlight=False,
        )
    if not theorems:
        raise LeanloopError(f"{dataset_dir}: no theorem to prove in split {split!r}")
    tag = request.settings.policy_tag
    run_name = request.run or (
        f"{request.generator}:{dataset_dir.name}/{split}"
        + (":whole" if request.mode is ProofMode.WHOLE else "")
        + (f":{tag}" if tag and not replay else "")
        + (":replay" if replay else "")
    )
    show = _json_printer(request.json_lines)
    with (
        on_interrupt(proving_stopped(database, run_name)),
        progress_bar(f"proving {plural(len(theorems), 'theorem')} ({run_name})") as update,
    ):
        outcome = run_proofs(
            theorems,
            prover,
            servers,
            mode=request.mode,
            project_root=None if replay or project is None else user_path(project),
            database=database,
            run=run_name,
            num_workers=request.workers,
            address=request.address,
            progress=update,
            on_result=show,
        )
    for attempt in outcome.skipped:
        show(attempt)
    report = outcome.report()
    _summary(report, len(outcome.skipped), err_console if request.json_lines else console)
    _write_report(report, request.out, run_name)


def prove_project(request: ProveRequest, project: str, commit: str | None, branch: str | None):
    """``prove --project``: trace the project if needed, prove its open sorries through the
    proving engine and write back what Lean accepts (the engine's hook)."""
    from leanloop.agent.proving import prove_sorries
    from leanloop.agent.repositories import require_lean, setup_project
    from leanloop.lean.project import is_remote

    if request.generator is None or request.generator.startswith("recorded"):
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
        entry = setup_project(database, project, commit, progress=watch.wrap(bar))
    root = entry.open_project().root
    servers = lean_launcher(root, request.settings)
    theorems = database.get_sorry_theorems(entry.repository)[: request.limit]
    prover = request.prover(None)
    tag = request.settings.policy_tag
    name = request.run or (
        f"sorries:{request.generator}"
        + (":whole" if request.mode is ProofMode.WHOLE else "")
        + (f":{tag}" if tag else "")
    )
    stopped = proving_stopped(database, name, written_back=True)
    with (
        on_interrupt(stopped),
        progress_bar(f"proving {plural(len(theorems), 'sorry')} of {entry.repository}") as update,
    ):
        report = prove_sorries(
            theorems,
            prover,
            root,
            servers=servers,
            database=database,
            branch=branch,
            mode=request.mode,
            run=name,
            num_workers=request.workers,
            address=request.address,
            progress=update,
        )
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
    written = report.write(request.out / entry.slug)
    err_console.print(f"report: {', '.join(map(str, written))}", highlight=False)


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


REPLAY_INSTEAD = "--replay replays the recorded proofs without Lean"


def lean_launcher(
    root: str | Path | None,
    settings: ProverConfig | None = None,
    *,
    timeout: float | None = None,
    memory_limit_mb: float | None = None,
    instead: str | None = REPLAY_INSTEAD,
):
    """The Lean servers of a project, of the backend ``settings`` names (each request bounded
    by ``timeout``, else the tactic timeout of ``settings``), after checking that Lean is there
    (a machine without Lean hears that first, in one line: what is missing, how to install it,
    and what to do ``instead``); with no project, only the check of elan, lake and lean (the
    backend is looked for in the project)."""
    from leanloop.lean.backends import LeanOptions, open_servers
    from leanloop.lean.errors import ServerNotFound, ToolchainNotFound
    from leanloop.lean.toolchain import require_tools

    try:
        if root is None:
            return require_tools()
        config = settings or ProverConfig()
        options = LeanOptions(
            timeout=config.tactic_timeout if timeout is None else timeout,
            memory_limit_mb=memory_limit_mb,
            sandbox=config.sandbox,
        )
        return open_servers(config.lean_backend, root, options)
    except (ToolchainNotFound, ServerNotFound) as exc:
        hint = "; ".join(h for h in (exc.hint, f"or: {instead}" if instead else None) if h)
        raise LeanloopError(
            f"proving needs Lean, which is not installed here ({exc.message})", hint=hint
        ) from None


def _prover(generator, dataset_dir, settings, base_url, api_key_env):
    kind, _, argument = generator.partition(":")
    if kind == "recorded" and not argument and dataset_dir is not None:
        from leanloop.prover.recorded import RecordedProver

        return RecordedProver(dataset_dir, config=settings)
    if kind == "hf" and argument:
        from leanloop.prover.hf import HFProver

        return HFProver(user_path(argument), config=settings)
    if kind == "external" and argument:
        from leanloop.prover.external import ExternalProver

        key = None if api_key_env.lower() == "none" else api_key_env
        return ExternalProver(argument, base_url, key, config=settings)
    raise LeanloopError(f"--generator {generator}: expected recorded, hf:PATH or external:MODEL")


def _replay_servers(dataset_dir: Path):
    from leanloop.prover.replay import ReplayServer

    return functools.partial(ReplayServer.from_dataset, dataset_dir)


def _lean_servers(project: str | None, request: ProveRequest):
    """Lean REPLs in the project the dataset was traced from (Lean checked first)."""
    if project is None:
        lean_launcher(None, request.settings)  # says first when Lean itself is missing
        raise LeanloopError(
            "proving with Lean needs --project DIR",
            hint="the Lean project the dataset was traced from, at its commit, built",
        )
    return lean_launcher(user_path(project), request.settings)


def _theorems(dataset_dir: Path, split: str, *, replay: bool, limit: int | None):
    """The split's theorems (each once) and how many were left out as term-mode proofs."""
    from leanloop.data.leandojo import LeanDojoDataset

    data = LeanDojoDataset(dataset_dir)
    scheme, _, name = split.rpartition("/")
    files = [f for f in data.split_files if f.split == name and (not scheme or f.scheme == scheme)]
    if not files:
        found = ", ".join(data.describe().split(", ")) or "nothing"
        raise LeanloopError(
            f"{dataset_dir}: no split {split!r} (found: {found})",
            hint="--split test, val, train or SCHEME/SPLIT such as random/test",
        )
    schemes = sorted({f.scheme for f in files if f.scheme is not None})
    if not scheme and len(schemes) > 1:  # one scheme's split, not several mixed together
        chosen = "random" if "random" in schemes else schemes[0]
        files = [f for f in files if f.scheme == chosen]
        others = ", ".join(f"{s}/{name}" for s in schemes if s != chosen)
        err_console.print(
            f"proving {chosen}/{name} (--split {others} for the other split scheme)",
            highlight=False,
        )
    seen: set = set()
    theorems: list[Theorem] = []
    term_mode = 0
    for item in data.iter_theorem_items(files):
        theorem = item.parse()
        if theorem.key in seen:
            continue
        seen.add(theorem.key)
        if replay and not theorem.traced_tactics:
            term_mode += 1
            continue
        theorems.append(theorem)
        if limit is not None and len(theorems) >= limit:
            break
    return theorems, term_mode


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
