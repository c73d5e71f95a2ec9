"""``leanloop db``: import LeanDojo-format data, export training splits, show statistics and
sorries."""

from __future__ import annotations

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
)

app = typer.Typer(help="The lifelong database of traced repositories.", no_args_is_help=True)


@app.command("import")
def import_(
    source: str = typer.Argument(..., help="A LeanDojo-format directory or split file."),
    db: str | None = DB_OPTION,
    keep_splits: bool = typer.Option(
        False, "--keep-splits", help="Keep the dataset's own train/val/test assignment."
    ),
) -> None:
    """Import a LeanDojo-format dataset (or part of one) into the database."""
    path = existing_path(source, "source")
    database = open_database(db)
    with progress_bar(f"importing {path.name}") as update:
        counts = database.import_leandojo(path, keep_splits=keep_splits, progress=update)
    console.print(
        f"imported into {database.description}: "
        f"{counts.theorems_added} theorems ({counts.theorems_skipped} already present), "
        f"{counts.tactics_added} tactics, {counts.files_added} files, "
        f"{counts.premises_added} premises, {counts.repositories_added} new repositories",
        highlight=False,
    )
    if counts.sorries_resolved:
        console.print(f"{counts.sorries_resolved} sorries of earlier commits are now proved")
    if counts.split_labels_conflicting:
        err_console.print(
            f"warning: {counts.split_labels_conflicting} theorems already had another split; "
            "they keep it"
        )


def _select_repositories(database, specs: list[str]):
    """Repositories named by ``--repo URL|NAME[@COMMIT]``, in the order given; all if none."""
    from leanloop.data.records import repository_identity
    from leanloop.errors import LeanloopError

    known = database.get_repositories()
    if not specs:
        return known
    chosen = []
    for spec in specs:
        name, _, commit = spec.partition("@")
        matches = [
            r
            for r in known
            if (r.identity == repository_identity(name) or r.name == name)
            and (not commit or r.commit.startswith(commit))
        ]
        if not matches:
            raise LeanloopError(
                f"no repository {spec!r} in the database",
                hint="'leanloop db stats' lists the repositories",
            )
        chosen.extend(m for m in matches if m not in chosen)
    return chosen


@app.command("export")
def export(
    output: Path = typer.Argument(..., help="Directory to write the dataset to."),
    db: str | None = DB_OPTION,
    repo: list[str] = typer.Option(
        [], "--repo", help="URL or owner/name[@commit]; repeat for several (default: all)."
    ),
    val: float = typer.Option(0.1, help="Validation size: a fraction below 1 or a count."),
    test: float = typer.Option(0.1, help="Test size: a fraction below 1 or a count."),
    seed: int = typer.Option(3407, help="Seed of the split assignment."),
) -> None:
    """Export repositories as a LeanDojo-format dataset (random and novel_premises splits)."""
    from pydantic import ValidationError

    from leanloop.database import SplitConfig
    from leanloop.errors import LeanloopError

    try:
        config = SplitConfig(val=val, test=test, seed=seed)
    except ValidationError as exc:
        error = exc.errors()[0]
        raise LeanloopError(
            f"--{error['loc'][0] if error['loc'] else 'val'}: "
            + error["msg"].removeprefix("Value error, ")
        ) from None
    database = open_database(db, must_exist=True)
    repositories = _select_repositories(database, repo)
    with progress_bar("exporting theorems", total=None) as update:
        report = database.export_merged_data(
            repositories, output, split_config=config, progress=update
        )
    console.print(f"wrote {report.output_path}: {report.theorems} theorems", highlight=False)
    for scheme, sizes in report.split_sizes.items():
        console.print(
            f"  {scheme}: " + ", ".join(f"{k} {v}" for k, v in sizes.items()), highlight=False
        )
    console.print(
        f"  corpus: {report.source_files} files, {report.premises} premises; "
        f"{report.traced_files} traced files; {report.new_assignments} new split assignments",
        highlight=False,
    )


def print_stats(stats) -> None:
    console.print(f"database {stats.database}", highlight=False)
    for r in stats.repositories:
        d = r.difficulty
        console.print(f"[bold]{escape(r.name)}[/] @ {r.commit[:12]}", highlight=False)
        console.print(
            f"  theorems {r.theorems} (proven {r.proven}, sorry {r.sorry}, "
            f"sorry proved {r.sorry_proved}), tactics {r.tactics}, files {r.files}, "
            f"premises {r.premises}",
            highlight=False,
        )
        console.print(
            f"  difficulty: easy {d.get('Easy', 0)}, medium {d.get('Medium', 0)}, "
            f"hard {d.get('Hard', 0)}, unrated {d.get('Unrated', 0)}",
            highlight=False,
        )
    summary = (
        f"total: {len(stats.repositories)} repositories, {stats.theorems} theorems, "
        f"{stats.tactics} tactics, {stats.premises} premises, {stats.open_sorries} open sorries"
    )
    if stats.difficulty_thresholds:
        easy, medium = stats.difficulty_thresholds
        summary += f"; easy: up to {easy:g} steps, medium: up to {medium:g}"
    console.print(summary, highlight=False)


@app.command("stats")
def stats(
    db: str | None = DB_OPTION,
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """Show what the database holds: repositories, theorems, sorries, difficulty."""
    result = open_database(db, must_exist=True).stats()
    if as_json:
        typer.echo(result.model_dump_json(indent=2))
    else:
        print_stats(result)


@app.command("sorries")
def sorries(
    db: str | None = DB_OPTION,
    as_json: bool = typer.Option(False, "--json", help="Print JSON lines instead of a table."),
) -> None:
    """List theorems whose proofs still contain ``sorry``."""
    open_sorries = open_database(db, must_exist=True).get_sorry_theorems()
    if as_json:
        for theorem in open_sorries:
            typer.echo(
                orjson.dumps(theorem.model_dump(mode="json", exclude={"traced_tactics"})).decode()
            )
        return
    table = Table(title=f"{len(open_sorries)} open sorries", title_justify="left")
    for column in ("theorem", "file", "position", "repository"):
        table.add_column(column)
    for theorem in open_sorries:
        table.add_row(
            theorem.full_name,
            theorem.file_path,
            str(theorem.start),
            f"{theorem.url}@{theorem.commit[:12]}",
        )
    console.print(table)
