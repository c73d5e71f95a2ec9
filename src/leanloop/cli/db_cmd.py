"""``leanloop db``: import datasets (LeanDojo-format, benchmarks), export training splits, reset
splits, show statistics and sorries, and check that a database is whole."""

from __future__ import annotations

from pathlib import Path

import orjson
import typer
from rich.markup import escape
from rich.table import Table

from leanloop.cli.common import (
    CONFIG_OPTION,
    DB_OPTION,
    check_database_name,
    command_settings,
    console,
    err_console,
    existing_path,
    new_app,
    on_interrupt,
    open_database,
    progress_bar,
    select_repositories,
    user_path,
)
from leanloop.words import plural

app = new_app(help="The lifelong database of traced repositories.")


@app.command("import")
def import_(
    source: str | None = typer.Argument(
        None,
        metavar="SOURCE",
        help="A LeanDojo-format directory or split file, LeanDojo-v2's database file "
        "(dynamic_database.json) or export, or a benchmark (.jsonl, .lean) (or 'source' in "
        "--config).",
        show_default=False,
    ),
    db: str | None = DB_OPTION,
    keep_splits: bool | None = typer.Option(
        None,
        "--keep-splits/--new-splits",
        help="Keep a LeanDojo dataset's own train/val/test assignment [default: new splits].",
        show_default=False,
    ),
    config: Path | None = CONFIG_OPTION,
) -> None:
    """Import a dataset into the database: LeanDojo-format (or part of one), LeanDojo-v2's
    database file or export, or a benchmark; the format is detected and named."""
    s = command_settings(
        config,
        {"source": (str | None, None), "db": (str | None, None), "keep_splits": (bool, False)},
        {"source": source, "db": db, "keep_splits": keep_splits},
    )
    from leanloop.database.leandojo_v2 import dataset_format
    from leanloop.errors import DataFormatError, LeanloopError

    if not s.source:
        raise LeanloopError("no dataset to import", hint="give SOURCE, or 'source' in --config")
    path = existing_path(s.source, "source")
    kind = dataset_format(path)  # a .json object of no known format is refused here
    database = open_database(s.db)
    # an import is one transaction: stopped, it leaves the database as it was
    stopped = (
        f"nothing of {path} was stored (an import is one transaction, rolled back: the "
        f"database is as it was); run the same command again to import it"
    )
    with on_interrupt(lambda: stopped), progress_bar(f"importing {path.name}") as update:
        try:
            counts = database.import_dataset(path, keep_splits=s.keep_splits, progress=update)
        except DataFormatError as exc:
            read_as = f"{path.name} was read as {kind}"
            raise LeanloopError(
                exc.message, hint=f"{read_as}; {exc.hint}" if exc.hint else read_as
            ) from None
    console.print(
        f"imported {kind} into {database.description}: "
        f"{plural(counts.theorems_added, 'theorem')} ({counts.theorems_skipped} already present), "
        f"{plural(counts.tactics_added, 'tactic')}, {plural(counts.files_added, 'file')}, "
        f"{plural(counts.premises_added, 'premise')}, "
        f"{plural(counts.repositories_added, 'new repository', 'new repositories')}",
        highlight=False,
    )
    if counts.sorries_resolved:
        console.print(f"{counts.sorries_resolved} sorries of earlier commits are now proved")
    if counts.split_labels_conflicting:
        err_console.print(
            f"warning: {counts.split_labels_conflicting} theorems already had another split; "
            "they keep it",
            highlight=False,
        )
    if counts.duplicates_conflicting:
        err_console.print(
            f"warning: {counts.duplicates_conflicting} theorems appear again with other "
            "content; the first occurrence was kept: " + "; ".join(counts.duplicate_examples),
            highlight=False,
            markup=False,
        )


def _split_config(val: float | None, test: float | None, seed: int | None):
    """The split settings given on the command line; None when none was given (the stored
    settings, or the defaults, apply)."""
    from pydantic import ValidationError

    from leanloop.database import SplitConfig
    from leanloop.errors import LeanloopError

    given = {k: v for k, v in (("val", val), ("test", test), ("seed", seed)) if v is not None}
    if not given:
        return None
    try:
        return SplitConfig(**given)
    except ValidationError as exc:
        error = exc.errors()[0]
        raise LeanloopError(
            f"--{error['loc'][0] if error['loc'] else 'val'}: "
            + error["msg"].removeprefix("Value error, ")
        ) from None


def print_export_report(report) -> None:
    """The sizes of an export and every warning it gave."""
    console.print(
        f"wrote {report.output_path}: {plural(report.theorems, 'theorem')}", highlight=False
    )
    for scheme, sizes in report.split_sizes.items():
        console.print(
            f"  {scheme}: " + ", ".join(f"{k} {v}" for k, v in sizes.items()), highlight=False
        )
    console.print(
        f"  corpus: {plural(report.source_files, 'file')}, {plural(report.premises, 'premise')}; "
        f"{plural(report.traced_files, 'traced file')}; "
        f"{plural(report.new_assignments, 'new split assignment')}",
        highlight=False,
    )
    if report.copies_merged:
        console.print(
            f"  {report.copies_merged} copies of theorems in other repositories (same file, name "
            "and position) were written once, sharing one split",
            highlight=False,
        )
    for warning in report.warnings:
        err_console.print(f"warning: {warning}", highlight=False, markup=False)
    if report.corpus_dropped:
        shown = "; ".join(report.corpus_dropped[:3])
        more = (
            f" and {len(report.corpus_dropped) - 3} more" if len(report.corpus_dropped) > 3 else ""
        )
        err_console.print(
            f"warning: {len(report.corpus_dropped)} corpus files share a path with a file of "
            f"another repository and were left out: {shown}{more}",
            highlight=False,
            markup=False,
        )
    violations = report.novel_premises_violations
    if violations:
        shown = ", ".join(violations[:5]) + (
            f" and {len(violations) - 5} more" if len(violations) > 5 else ""
        )
        err_console.print(
            f"warning: {len(violations)} val/test theorems of novel_premises use no premise unseen "
            f"in train (a later commit re-proved a train theorem with their premises): {shown}",
            highlight=False,
            markup=False,
        )
        err_console.print(
            "  hint: 'leanloop db reset-splits --scheme novel_premises' and export again "
            "to assign that scheme afresh",
            highlight=False,
        )


@app.command("export")
def export(
    output: str | None = typer.Argument(
        None,
        metavar="DIR",
        help="Directory to write the dataset to (or 'output' in --config).",
        show_default=False,
    ),
    db: str | None = DB_OPTION,
    repo: list[str] = typer.Option(
        [],
        "--repo",
        metavar="REPO",
        help="URL or owner/name[@commit]; repeat for several [default: all].",
    ),
    val: float | None = typer.Option(
        None,
        metavar="SIZE",
        help="Validation size: a fraction below 1 or a count [default: the settings that made "
        "the stored splits, else 0.1].",
        show_default=False,
    ),
    test: float | None = typer.Option(
        None,
        metavar="SIZE",
        help="Test size: a fraction below 1 or a count [default: as for --val, else 0.1].",
        show_default=False,
    ),
    seed: int | None = typer.Option(
        None,
        metavar="N",
        help="Seed of the split assignment [default: as for --val, else 3407].",
        show_default=False,
    ),
    config: Path | None = CONFIG_OPTION,
) -> None:
    """Export repositories as a LeanDojo-format dataset (random and novel_premises splits).

    Only the dataset's own files in DIR are replaced; a theorem keeps its split forever.
    """
    s = command_settings(
        config,
        {
            "output": (str | None, None),
            "db": (str | None, None),
            "repo": (list[str], []),
            "val": (float | None, None),
            "test": (float | None, None),
            "seed": (int | None, None),
        },
        {"output": output, "db": db, "repo": repo or None, "val": val, "test": test, "seed": seed},
    )
    if not s.output:
        from leanloop.errors import LeanloopError

        raise LeanloopError("no directory to export to", hint="give DIR, or 'output' in --config")
    split_config = _split_config(s.val, s.test, s.seed)
    database = open_database(s.db, must_exist=True)
    repositories = select_repositories(database, s.repo)
    target = user_path(s.output)
    writing = False  # whether the splits are stored and the dataset is being written

    def stopped() -> str:
        # the dataset is written aside and moved into place only when it is complete
        if not writing:
            return (
                f"nothing was exported: {target} and the database are as they were; run the "
                "same command again to export"
            )
        return (
            f"{target} was left as it was (the dataset appears only when complete; what was "
            "written aside is dropped); the split assignments were stored, so each theorem "
            "keeps its split: run the same command again to write the dataset with them"
        )

    with (
        on_interrupt(stopped),
        progress_bar("exporting theorems", finishing="writing the corpus and committing") as bar,
    ):

        def update(done: int, total: int | None = None, note: str | None = None) -> None:
            nonlocal writing
            writing = True
            bar(done, total, note)

        report = database.export_merged_data(
            repositories, target, split_config=split_config, progress=update
        )
    print_export_report(report)


@app.command("reset-splits")
def reset_splits(
    db: str | None = DB_OPTION,
    config: Path | None = CONFIG_OPTION,
    scheme: str | None = typer.Option(
        None,
        "--scheme",
        metavar="SCHEME",
        help="random or novel_premises [default: both].",
        show_default=False,
    ),
) -> None:
    """Forget the stored split assignments (and the settings that made them), so that the next
    export assigns every theorem afresh."""
    s = command_settings(
        config,
        {"db": (str | None, None), "scheme": (str | None, None)},
        {"db": db, "scheme": scheme},
    )
    scheme = s.scheme
    count = open_database(s.db, must_exist=True).reset_splits(scheme)
    which = f"of {scheme}" if scheme else "of every scheme"
    console.print(f"forgot {count} split assignments {which}", highlight=False)


def _view_settings(config: Path | None, db: str | None, as_json: bool | None):
    return command_settings(
        config, {"db": (str | None, None), "json": (bool, False)}, {"db": db, "json": as_json}
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
        f"total: {plural(len(stats.repositories), 'repository')}, "
        f"{plural(stats.theorems, 'theorem')}, {plural(stats.tactics, 'tactic')}, "
        f"{plural(stats.premises, 'premise')}, {plural(stats.open_sorries, 'open sorry')}"
    )
    if stats.difficulty_thresholds:
        easy, medium = stats.difficulty_thresholds
        summary += f"; easy: up to {plural(easy, 'step')}, medium: up to {medium:g}"
    console.print(summary, highlight=False)


@app.command("stats")
def stats(
    db: str | None = DB_OPTION,
    as_json: bool | None = typer.Option(
        None, "--json/--table", help="Print JSON instead of a table.", show_default=False
    ),
    config: Path | None = CONFIG_OPTION,
) -> None:
    """Show what the database holds: repositories, theorems, sorries, difficulty."""
    s = _view_settings(config, db, as_json)
    result = open_database(s.db, must_exist=True).stats()
    if s.json:
        typer.echo(result.model_dump_json(indent=2))
    else:
        print_stats(result)


@app.command("sorries")
def sorries(
    db: str | None = DB_OPTION,
    as_json: bool | None = typer.Option(
        None, "--json/--table", help="Print JSON lines instead of a table.", show_default=False
    ),
    config: Path | None = CONFIG_OPTION,
) -> None:
    """List theorems whose proofs still contain ``sorry``."""
    s = _view_settings(config, db, as_json)
    open_sorries = open_database(s.db, must_exist=True).get_sorry_theorems()
    if s.json:
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


@app.command("check")
def check(
    db: str | None = DB_OPTION,
    quick: bool | None = typer.Option(
        None,
        "--quick/--full",
        help="SQLite's quick_check (pages and records) instead of integrity_check (which also "
        "compares every index with its table) [default: full].",
        show_default=False,
    ),
    as_json: bool | None = typer.Option(
        None, "--json/--table", help="Print JSON instead of lines.", show_default=False
    ),
    recover_into: str | None = typer.Option(
        None,
        "--recover-into",
        metavar="FILE",
        help="Copy what can still be read of a damaged SQLite database (whole theorems only) "
        "into this new file, then check it.",
        show_default=False,
    ),
    config: Path | None = CONFIG_OPTION,
) -> None:
    """Check that the database is whole, without writing to it: SQLite's own check of the
    file, leanloop's tables and schema version, and the references between rows; say what is
    wrong and what to do (exit status 1 when something is)."""
    from leanloop.database import DynamicDatabase

    s = command_settings(
        config,
        {
            "db": (str | None, None),
            "quick": (bool, False),
            "json": (bool, False),
            "recover_into": (str | None, None),
        },
        {"db": db, "quick": quick, "json": as_json, "recover_into": recover_into},
    )
    check_database_name(s.db)
    database = DynamicDatabase(s.db)
    if s.recover_into is not None:
        _recover(database, user_path(s.recover_into))
        database = DynamicDatabase(str(user_path(s.recover_into)))
    report = database.check_integrity(quick=s.quick)
    if s.json:
        typer.echo(orjson.dumps(report.to_dict(), option=orjson.OPT_INDENT_2).decode())
    else:
        console.print(f"database {report.database} ({report.engine})", highlight=False)
        for checked in report.checked:
            console.print(f"checked: {checked}", highlight=False)
        for finding in report.findings:
            console.print(escape(f"problem ({finding.kind}): {finding.text}"), highlight=False)
        for step in report.advice:
            console.print(escape(f"to do: {step}"), highlight=False)
        if report.ok:
            console.print("ok: the database is whole", highlight=False)
    if not report.ok:
        raise typer.Exit(1)


def _recover(database, target: Path) -> None:
    """Copy the readable, whole part of ``database`` (a SQLite file) into ``target``."""
    from leanloop.database.recover import recover
    from leanloop.errors import LeanloopError

    source = database.sqlite_path
    if source is None or not source.is_file():
        raise LeanloopError(
            f"--recover-into copies a damaged SQLite file; {database.description} is not one"
        )
    result = recover(source, target)
    copied = ", ".join(f"{plural(n, 'row')} of {name}" for name, n in result.copied.items() if n)
    console.print(f"recovered into {target}: {copied or 'nothing'}", highlight=False)
    if result.unreadable:
        console.print(
            f"tables with rows that could not be read (left out): {', '.join(result.unreadable)}",
            highlight=False,
        )
    if result.incomplete_theorems:
        console.print(
            f"left out {plural(result.incomplete_theorems, 'theorem')} that lost some of their "
            "tactics (import their dataset again to have them back)",
            highlight=False,
        )
