"""``leanloop run``: the main job, the whole loop on one dataset (see ``agent/pipeline.py``),
configured by a ``RunConfig`` file and options; prints what it will do and a summary table, keeps
the libraries' messages in its log unless ``-v`` is given, and on Ctrl-C says in one line which
finished steps it kept (a run started again reuses them)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

import leanloop.cli.common as common
from leanloop.cli.common import (
    DB_OPTION,
    check_database_name,
    console,
    load_config,
    on_interrupt,
    user_path,
)


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
    of the test theorems (replayed without Lean, proved with it), and write a report. Steps an
    earlier run in the same --out finished with the same settings are reused."""
    from leanloop.agent.pipeline import effective_config
    from leanloop.agent.pipeline import run as run_job
    from leanloop.agent.pipeline_config import RunConfig
    from leanloop.agent.run_steps import RunSteps

    check_database_name(db)
    overrides = {
        "data": user_path(data) if data else None,
        "output": user_path(out) if out else None,
        "database": db,
        "quick": quick or None,
    }
    settings, _ = load_config(RunConfig, config, overrides)
    settings = effective_config(settings)
    output = user_path(settings.output)
    with on_interrupt(RunSteps(output).kept_note):
        report = run_job(
            settings,
            say=lambda text: console.print(escape(text), highlight=False),
            verbose=common.verbose(),
        )
    table = Table(title="leanloop run", title_justify="left")
    for column in ("step", "result", "compared with"):
        table.add_column(column)
    for row in report.rows():
        table.add_row(*(escape(cell) for cell in row))
    console.print(table)
    console.print(f"report: {output / 'report.md'} (and report.json, report.png)", highlight=False)
