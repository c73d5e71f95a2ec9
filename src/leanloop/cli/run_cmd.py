"""``leanloop run``: the main job, the whole loop on one dataset (see ``agent/pipeline.py``),
configured by a ``RunConfig`` file and options; prints what it will do and a summary table."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from leanloop.cli.common import DB_OPTION, console, user_path


def run(
    config: Path | None = typer.Option(
        None, "--config", metavar="FILE", help="A YAML or JSON RunConfig file."
    ),
    data: Path | None = typer.Option(
        None,
        "--data",
        metavar="DIR",
        help="A LeanDojo-format dataset [default: $LEANLOOP_FIXTURES/leandojo_benchmark_4, "
        "else the official LeanDojo Benchmark 4 where it can be downloaded].",
        show_default=False,
    ),
    out: Path | None = typer.Option(
        None,
        "--out",
        metavar="DIR",
        help="Where the database, export, models and report go [default: build/run].",
        show_default=False,
    ),
    db: str | None = DB_OPTION,
    quick: bool = typer.Option(
        False, "--quick", help="The one-minute version: a tiny generator, seconds of training."
    ),
) -> None:
    """Run the whole loop: import and split a dataset, train a premise retriever and a tactic
    generator within a stated time budget, evaluate them against their baselines, search proofs
    of the test theorems (replayed without Lean, proved with it), and write a report."""
    from leanloop.agent.pipeline import run as run_job
    from leanloop.agent.pipeline_config import RunConfig

    settings = RunConfig.from_yaml(user_path(config)) if config else RunConfig()
    overrides = {
        "data": user_path(data) if data else None,
        "output": user_path(out) if out else None,
        "database": db,
    }
    settings = RunConfig.from_dict(
        {**settings.to_dict(), **{k: v for k, v in overrides.items() if v is not None}}
    )
    if quick:
        settings = settings.quick_run()
    output = user_path(settings.output)
    if output.exists() and not output.is_dir():
        from leanloop.errors import LeanloopError

        raise LeanloopError(
            f"--out {output}: a file is there; the job needs a directory",
            hint="give a new or existing directory",
        )
    report = run_job(settings, say=lambda text: console.print(escape(text), highlight=False))
    table = Table(title="leanloop run", title_justify="left")
    for column in ("step", "result", "compared with"):
        table.add_column(column)
    for row in report.rows():
        table.add_row(*(escape(cell) for cell in row))
    console.print(table)
    console.print(f"report: {output / 'report.md'} (and report.json, report.png)", highlight=False)
