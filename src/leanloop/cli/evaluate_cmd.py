"""``leanloop evaluate tactics|retrieval|progress``: evaluate a trained checkpoint on a split of a
LeanDojo-format export (or of the database's repositories, exported first), configured by an
``EvaluationConfig`` file (``--config``) with options on top."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from leanloop.cli.common import (
    DB_OPTION,
    console,
    existing_path,
    load_config,
    new_app,
    open_database,
    progress_bar,
    select_repositories,
    user_path,
)

if TYPE_CHECKING:
    from leanloop.agent.evaluation import Kind

app = new_app(help="Evaluate a trained checkpoint on the test split of an export.")

CONFIG_OPTION = typer.Option(
    None,
    "--config",
    metavar="FILE",
    help="A YAML/JSON EvaluationConfig (checkpoint, dataset, split, k, max_steps, "
    "batch_size); the options below override it.",
)
CHECKPOINT_OPTION = typer.Option(
    None,
    "--checkpoint",
    metavar="DIR",
    help="A trainer's output_dir (its newest checkpoint) or one checkpoint directory.",
    show_default=False,
)
DATASET_OPTION = typer.Option(
    None,
    "--dataset",
    metavar="DIR",
    help="A LeanDojo-format export [default: the database's repositories, exported to --data].",
    show_default=False,
)
DATA_OPTION = typer.Option(
    Path("build/evaluate/data"),
    "--data",
    metavar="DIR",
    help="Without --dataset: where the database's repositories are exported.",
)
REPO_OPTION = typer.Option(
    [],
    "--repo",
    metavar="REPO",
    help="Without --dataset: export only this repository (URL or owner/name[@commit]); repeat "
    "for several [default: all].",
    show_default=False,
)
SPLIT_OPTION = typer.Option(
    None,
    "--split",
    metavar="SPLIT",
    help="test, val, train or SCHEME/SPLIT such as novel_premises/test [default: test].",
    show_default=False,
)
MAX_STEPS_OPTION = typer.Option(
    None,
    "--max-steps",
    min=1,
    metavar="N",
    help="Evaluate at most N tactic steps (progress: rows) [default: all].",
    show_default=False,
)
JSON_OPTION = typer.Option(False, "--json", help="Print the result as one JSON object.")


def _evaluate(kind: Kind, config, db, data, repo, json_out: bool, **options: Any) -> None:
    from leanloop.agent.evaluation import EvaluationConfig, evaluate_checkpoint

    settings, _ = load_config(EvaluationConfig, config, options)
    existing_path(settings.checkpoint, "checkpoint")  # before an export or a model is loaded
    if settings.dataset is None:
        database = open_database(db, must_exist=True)
        repositories = select_repositories(database, repo)
        target = user_path(data)
        with progress_bar("exporting theorems") as update:
            database.export_merged_data(repositories, target, progress=update)
        settings.dataset = target
    with progress_bar(f"evaluating {settings.checkpoint} ({kind})"):
        result = evaluate_checkpoint(kind, settings)
    if json_out:
        typer.echo(result.model_dump_json())
    else:
        console.print(str(result), highlight=False)


@app.command("tactics")
def tactics(
    config: Path | None = CONFIG_OPTION,
    checkpoint: Path | None = CHECKPOINT_OPTION,
    dataset: Path | None = DATASET_OPTION,
    db: str | None = DB_OPTION,
    data: Path = DATA_OPTION,
    repo: list[str] = REPO_OPTION,
    split: str | None = SPLIT_OPTION,
    k: int | None = typer.Option(
        None,
        "--k",
        min=1,
        metavar="K",
        help="Candidates per state [default: 8].",
        show_default=False,
    ),
    max_steps: int | None = MAX_STEPS_OPTION,
    json_out: bool = JSON_OPTION,
) -> None:
    """Top-1 and top-K accuracy of a tactic generator (SFT or GRPO output) against the
    recorded tactics."""
    _evaluate(
        "tactics",
        config,
        db,
        data,
        repo,
        json_out,
        checkpoint=checkpoint,
        dataset=dataset,
        split=split,
        k=k,
        max_steps=max_steps,
    )


@app.command("retrieval")
def retrieval(
    config: Path | None = CONFIG_OPTION,
    checkpoint: Path | None = CHECKPOINT_OPTION,
    dataset: Path | None = DATASET_OPTION,
    db: str | None = DB_OPTION,
    data: Path = DATA_OPTION,
    repo: list[str] = REPO_OPTION,
    split: str | None = SPLIT_OPTION,
    k: int | None = typer.Option(
        None,
        "--k",
        min=10,
        metavar="K",
        help="Premises ranked per step [default: 100].",
        show_default=False,
    ),
    batch_size: int | None = typer.Option(
        None, "--batch-size", min=1, metavar="N", help="Texts embedded per batch [default: 32]."
    ),
    json_out: bool = JSON_OPTION,
) -> None:
    """R@1, R@10 and MRR of a premise retriever (RetrievalTrainer output)."""
    _evaluate(
        "retrieval",
        config,
        db,
        data,
        repo,
        json_out,
        checkpoint=checkpoint,
        dataset=dataset,
        split=split,
        k=k,
        batch_size=batch_size,
    )


@app.command("progress")
def progress(
    config: Path | None = CONFIG_OPTION,
    checkpoint: Path | None = CHECKPOINT_OPTION,
    dataset: Path | None = DATASET_OPTION,
    db: str | None = DB_OPTION,
    data: Path = DATA_OPTION,
    repo: list[str] = REPO_OPTION,
    split: str | None = SPLIT_OPTION,
    max_steps: int | None = MAX_STEPS_OPTION,
    json_out: bool = JSON_OPTION,
) -> None:
    """MAE and MSE, in proof steps, of a progress model (ProgressTrainer output)."""
    _evaluate(
        "progress",
        config,
        db,
        data,
        repo,
        json_out,
        checkpoint=checkpoint,
        dataset=dataset,
        split=split,
        max_steps=max_steps,
    )
