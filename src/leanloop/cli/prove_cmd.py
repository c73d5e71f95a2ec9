"""``leanloop prove``: prove the theorems of a dataset split with a prover, on Lean (the REPL in the
project the dataset was traced from) or, with ``--replay``, on the recorded steps without Lean;
each result goes into the database as it comes, then a summary and a report (JSON and a plot)."""

from __future__ import annotations

import functools
import re
from pathlib import Path

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
from leanloop.data.records import AttemptStatus, ProofAttempt, Theorem
from leanloop.errors import LeanloopError


def prove(
    dataset: str = typer.Option(
        ..., "--dataset", metavar="DIR", help="A LeanDojo-format dataset directory."
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
        metavar="DIR",
        help="Without --replay: the Lean project the dataset was traced from, checked out at "
        "its commit and built.",
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
    """Prove the theorems of a dataset split and report pass@1, outcomes and times."""
    from leanloop.prover.config import ProverConfig
    from leanloop.prover.evaluation import evaluate

    settings = ProverConfig.from_yaml(user_path(config)) if config else ProverConfig()
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
        server_factory = _lean_servers(project, settings.tactic_timeout)
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


def _prover(generator, dataset_dir, settings, base_url, api_key_env, project):
    kind, _, argument = generator.partition(":")
    if kind == "recorded" and not argument:
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


def _lean_servers(project: str | None, timeout: float):
    """A factory of REPL servers in the project, after checking that Lean is there."""
    from leanloop.lean.errors import LeanError
    from leanloop.lean.project import open_project
    from leanloop.lean.repl import ReplServer
    from leanloop.lean.toolchain import require

    lean_project = open_project(project) if project else None
    try:
        report = require(lean_project)
    except LeanError as exc:
        raise LeanloopError(
            f"proving needs Lean, which is not installed here ({exc.message})",
            hint="install it (see 'leanloop doctor'), or use --replay to replay the recorded "
            "proofs without Lean",
        ) from None
    if lean_project is None:
        raise LeanloopError(
            "proving with Lean needs --project DIR",
            hint="the Lean project the dataset was traced from, at its commit, built",
        )
    return functools.partial(
        ReplServer.launch, lean_project.root, report.repl, lake=report.lake, timeout=timeout
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
