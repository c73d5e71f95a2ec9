"""``leanloop doctor`` (what Lean tooling is installed and what is missing) and ``leanloop trace``
(trace a Lean project into the database)."""

from __future__ import annotations

import typer

from leanloop.cli.common import DB_OPTION, console, err_console, open_database, progress_bar


def doctor(
    project: str | None = typer.Argument(
        None, metavar="[PROJECT]", help="A Lean project directory or .lean file."
    ),
) -> None:
    """Show what Lean tooling was found and the commands that install what is missing."""
    from leanloop.lean.project import open_project
    from leanloop.lean.toolchain import diagnose

    lean_project = open_project(project) if project else None
    if lean_project is not None:
        console.print(
            f"project {lean_project.root} ({lean_project.kind}), pins "
            f"{lean_project.toolchain or 'no toolchain'}",
            highlight=False,
        )
        for note in lean_project.notes:
            console.print(f"  note: {note}", highlight=False)
    report = diagnose(lean_project)
    for line in report.render():
        console.print(line, highlight=False, markup=False)
    if not report.ok:
        err_console.print(
            f"missing: {', '.join(c.name for c in report.missing())}", highlight=False
        )
        raise typer.Exit(1)


def trace(
    project: str = typer.Argument(
        ..., metavar="PROJECT", help="Git URL, local directory or .lean file."
    ),
    commit: str | None = typer.Option(
        None, "--commit", metavar="SHA", help="Commit to trace [default: HEAD]."
    ),
    db: str | None = DB_OPTION,
    workers: int = typer.Option(
        1, "--workers", min=1, metavar="N", help="Files elaborated at once."
    ),
    no_build: bool = typer.Option(False, "--no-build", help="Skip 'lake build'."),
    deps: bool = typer.Option(False, "--deps", help="Also scan dependencies for premises."),
    timeout: float = typer.Option(
        1800.0, "--timeout", metavar="SECONDS", help="Seconds allowed per file."
    ),
) -> None:
    """Trace a Lean project (theorems, tactic states, premises, sorries) into the database."""
    database = open_database(db)
    with progress_bar(f"tracing {project}") as update:
        # open_project tells a git URL from a local directory or file
        report = database.trace_repository(
            path=project,
            commit=commit,
            build=not no_build,
            build_deps=deps,
            workers=workers,
            timeout=timeout,
            progress=update,
        )
    counts = report.counts
    console.print(
        f"traced {report.files} files of {report.repository} ({report.cached_files} from the "
        f"cache): {counts.theorems_added} theorems added ({counts.theorems_skipped} already "
        f"present), {counts.tactics_added} tactics, {counts.premises_added} premises",
        highlight=False,
    )
    for path, why in sorted(report.failures.items()):
        err_console.print(f"  failed {path}: {why}", highlight=False, markup=False)
    if report.skipped:
        console.print(f"  {len(report.skipped)} theorems skipped (Lean reported errors)")
