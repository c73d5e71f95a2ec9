"""``leanloop prove``: prove the theorems of a dataset split with a prover, on Lean (the REPL in the
project the dataset was traced from) or, with ``--replay``, on the recorded steps without Lean;
or, without ``--dataset``, prove the open sorries of a Lean project (``--project``) and write
back the proofs Lean accepts. Each result goes into the database as it comes, then a summary and
a report (JSON and a plot; for sorries also Markdown)."""

from __future__ import annotations

import functools
import re
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
    open_database,
    progress_bar,
    user_path,
)
from leanloop.errors import LeanloopError

if TYPE_CHECKING:
    from leanloop.data.records import ProofAttempt, Theorem


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
        help="The split to prove: test, val, train or SCHEME/SPLIT.",
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
    workers: int | None = typer.Option(
        None,
        "--workers",
        min=1,
        metavar="N",
        help="Theorems proved at once, one Ray worker each [default: num_workers of the config].",
        show_default=False,
    ),
    config: str | None = typer.Option(
        None, "--config", metavar="FILE", help="A ProverConfig YAML or JSON file."
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
        None, "--limit", min=1, metavar="N", help="Prove only the split's first N theorems."
    ),
    project: str | None = typer.Option(
        None,
        "--project",
        metavar="DIR|URL",
        help="With --dataset (without --replay): the Lean project the dataset was traced from, "
        "checked out at its commit and built. Without --dataset: the Lean project (a directory "
        "or a git URL) whose open sorries are proved; it is traced first if the database does "
        "not hold it, and each proof is written into its file only after Lean accepted the "
        "whole file (the original kept under .leanloop-backups/).",
    ),
    commit: str | None = typer.Option(
        None, "--commit", metavar="SHA", help="The commit of a --project URL [default: HEAD]."
    ),
    branch: str | None = typer.Option(
        None,
        "--branch",
        metavar="NAME",
        help="Also commit each written proof on this git branch of the project (created from "
        "HEAD; never the branch checked out).",
    ),
    whole_proof: bool = typer.Option(
        False,
        "--whole-proof",
        help="Generate whole proofs and check each with Lean instead of searching tactic by "
        "tactic.",
    ),
    base_url: str | None = typer.Option(
        None, "--base-url", metavar="URL", help="The endpoint of external:MODEL (.../v1)."
    ),
    api_key_env: str = typer.Option(
        "OPENAI_API_KEY",
        "--api-key-env",
        metavar="NAME",
        help="The variable holding the endpoint's API key ('none': send no key).",
    ),
    address: str | None = typer.Option(
        None, "--address", metavar="ray://HOST:PORT", help="Run the workers on this Ray cluster."
    ),
    out: str = typer.Option(
        "build/prove", "--out", metavar="DIR", help="Where the report (JSON and PNG) goes."
    ),
) -> None:
    """Prove the theorems of a dataset split and report pass@1, outcomes and times; or, with
    --project and no --dataset, prove a Lean project's open sorries and write back the proofs
    Lean accepts."""
    from leanloop.prover.config import ProverConfig
    from leanloop.prover.evaluation import evaluate

    settings = ProverConfig.from_yaml(user_path(config)) if config else ProverConfig()
    if dataset is None:
        if project is None:
            raise LeanloopError(
                "nothing to prove: give --dataset DIR (a split of a dataset) or --project "
                "DIR|URL (a Lean project's sorries)"
            )
        if replay:
            raise LeanloopError(
                "--replay replays a dataset's recorded steps: it needs --dataset",
                hint="proving a project's sorries needs Lean",
            )
        _prove_sorries(
            project,
            commit,
            generator,
            settings,
            db=db,
            branch=branch,
            whole_proof=whole_proof,
            run=run,
            limit=limit,
            base_url=base_url,
            api_key_env=api_key_env,
            json_lines=json_lines,
            out=user_path(out),
        )
        return
    for given, name in ((commit, "--commit"), (branch, "--branch"), (whole_proof, "--whole-proof")):
        if given:
            raise LeanloopError(f"{name} goes with --project and no --dataset (proving sorries)")
    dataset_dir = existing_path(dataset, "dataset")
    generator = generator or ("recorded" if replay else None)
    if generator is None:
        raise LeanloopError(
            "choose what proposes tactics with --generator",
            hint="hf:PATH (a trained checkpoint) or external:MODEL; --replay runs without Lean",
        )
    if replay:
        server_factory = _replay_servers(dataset_dir)
    else:
        server_factory = _lean_servers(project, settings)
    prover = _prover(generator, dataset_dir, settings, base_url, api_key_env, project)
    theorems, term_mode = _theorems(dataset_dir, split, replay=replay, limit=limit)
    if term_mode:
        err_console.print(
            f"{term_mode} theorems without traced tactics are left out: the replay has no "
            "recorded step of a term-mode proof",
            highlight=False,
        )
    if not theorems:
        raise LeanloopError(f"{dataset_dir}: no theorem to prove in split {split!r}")
    run_name = run or f"{generator}:{dataset_dir.name}/{split}" + (":replay" if replay else "")
    database = open_database(db)
    before = {(a.key, a.commit, a.attempt) for a in database.get_attempts(run_name)}

    def show(attempt: ProofAttempt) -> None:
        if json_lines:
            typer.echo(_json_line(attempt))

    with progress_bar(f"proving {len(theorems)} theorems ({run_name})") as update:
        report = evaluate(
            theorems,
            prover,
            server_factory,
            num_workers=workers,
            address=address,
            database=database,
            run=run_name,
            progress=update,
            on_result=show,
        )
    skipped = [a for a in report.attempts if (a.key, a.commit, a.attempt) in before]
    if json_lines:
        for attempt in skipped:
            typer.echo(_json_line(attempt))
    _summary(report, replay, len(skipped), err_console if json_lines else console)
    _write_report(report, user_path(out), run_name)


def _prove_sorries(
    project: str,
    commit: str | None,
    generator: str | None,
    settings,
    *,
    db: str | None,
    branch: str | None,
    whole_proof: bool,
    run: str | None,
    limit: int | None,
    base_url: str | None,
    api_key_env: str,
    json_lines: bool,
    out: Path,
) -> None:
    """Trace the project if needed, prove its open sorries, write back what Lean accepts."""
    from leanloop.agent.proving import lean_servers, prove_sorries
    from leanloop.agent.repositories import require_lean, setup_project

    if generator is None or generator.startswith("recorded"):
        raise LeanloopError(
            "proving sorries needs a model: --generator hf:PATH or external:MODEL",
            hint="the recorded diagnostic only replays a dataset's own proofs",
        )
    require_lean()
    database = open_database(db)
    with progress_bar(f"tracing {project} (if the database does not hold it)") as update:
        entry = setup_project(database, project, commit, progress=update)
    lean_project = entry.open_project()
    pool = lean_servers(lean_project.root, settings)
    try:
        theorems = database.get_sorry_theorems(entry.repository)[:limit]
        prover = _prover(generator, None, settings, base_url, api_key_env, lean_project.root)
        name = run or f"sorries:{generator}" + (":whole" if whole_proof else "")
        with progress_bar(f"proving {len(theorems)} sorries of {entry.repository}") as update:
            report = prove_sorries(
                theorems,
                prover,
                lean_project.root,
                servers=pool,
                database=database,
                branch=branch,
                whole_proof=whole_proof,
                run=name,
                progress=update,
            )
    finally:
        pool.close()
    out_console = err_console if json_lines else console
    if json_lines:
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
    written = report.write(out / entry.slug)
    err_console.print(f"report: {', '.join(map(str, written))}", highlight=False)


def _prover(generator, dataset_dir, settings, base_url, api_key_env, project):
    kind, _, argument = generator.partition(":")
    if kind == "recorded" and not argument and dataset_dir is not None:
        from leanloop.prover.recorded import RecordedProver

        return RecordedProver(dataset_dir, config=settings, project_root=project)
    if kind == "hf" and argument:
        from leanloop.prover.hf import HFProver

        return HFProver(user_path(argument), config=settings, project_root=project)
    if kind == "external" and argument:
        from leanloop.prover.external import ExternalProver

        key = None if api_key_env.lower() == "none" else api_key_env
        return ExternalProver(argument, base_url, key, config=settings, project_root=project)
    raise LeanloopError(f"--generator {generator}: expected recorded, hf:PATH or external:MODEL")


def _replay_servers(dataset_dir: Path):
    from leanloop.prover.replay import ReplayServer

    return functools.partial(ReplayServer.from_dataset, dataset_dir)


def _lean_servers(project: str | None, settings):
    """A factory of REPL servers in the project, after checking that Lean is there (first, so
    that a machine without Lean hears that before anything else)."""
    from leanloop.agent.proving import lean_server_factory
    from leanloop.lean.errors import ServerNotFound, ToolchainNotFound
    from leanloop.lean.toolchain import require

    try:
        if project is None:
            require(None)
        else:
            return lean_server_factory(project, settings)
    except (ToolchainNotFound, ServerNotFound) as exc:
        raise LeanloopError(
            f"proving needs Lean, which is not installed here ({exc.message})",
            hint="install it (see 'leanloop doctor'), or use --replay to replay the recorded "
            "proofs without Lean",
        ) from None
    raise LeanloopError(
        "proving with Lean needs --project DIR",
        hint="the Lean project the dataset was traced from, at its commit, built",
    )


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
        }
    ).decode()


def _summary(report, replay: bool, skipped: int, out) -> None:
    from leanloop.prover.result import describe_status

    found = "recorded proofs found" if replay else "proved"
    table = Table(title=f"run {report.run}", title_justify="left")
    table.add_column("outcome")
    table.add_column("attempts", justify="right")
    from leanloop.data.records import AttemptStatus

    for status in AttemptStatus:
        count = report.status_counts.get(status.value, 0)
        if count:
            table.add_row(escape(describe_status(status)), str(count))
    out.print(table)
    k = f", pass@{report.k} {report.pass_at_k:.3f}" if report.k > 1 else ""
    out.print(
        f"{found}: pass@1 {report.pass_at_1:.3f}{k} on {report.theorems} theorems; "
        f"{report.seconds_mean:.2f} s per attempt (median {report.seconds_median:.2f} s, "
        f"max {report.seconds_max:.2f} s)",
        highlight=False,
    )
    if skipped:
        out.print(
            f"{skipped} attempts were already finished in this run (not run again)",
            highlight=False,
        )
    if replay:
        out.print(
            "replay: the recorded steps were replayed without Lean; no Lean checked these proofs",
            highlight=False,
        )


def _write_report(report, out: Path, run_name: str) -> None:
    slug = re.sub(r"[^\w.-]+", "_", run_name).strip("_") or "run"
    path = report.to_json(out / f"{slug}.json")
    written = [str(path)]
    try:
        written.append(str(report.plot(out / f"{slug}.png")))
    except ImportError:
        err_console.print("no plot: matplotlib is not installed (leanloop[train])")
    err_console.print(f"report: {', '.join(written)}", highlight=False)
