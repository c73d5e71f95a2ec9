"""``leanloop doctor`` (what Lean tooling is installed and what is missing) and ``leanloop trace``
(trace a Lean project into the database)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import typer

from leanloop.cli.common import (
    CONFIG_OPTION,
    DB_OPTION,
    command_settings,
    console,
    err_console,
    on_interrupt,
    open_database,
    progress_bar,
)
from leanloop.words import plural


def doctor(
    project: str | None = typer.Argument(
        None, metavar="[PROJECT]", help="A Lean project directory or .lean file."
    ),
    config: Path | None = CONFIG_OPTION,
) -> None:
    """Show what Lean tooling was found and the commands that install what is missing."""
    from leanloop.lean.project import open_project
    from leanloop.lean.toolchain import diagnose

    settings = command_settings(config, {"project": (str | None, None)}, {"project": project})
    lean_project = open_project(settings.project) if settings.project else None
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


class TraceWatch:
    """Follows a trace's progress to say, when Ctrl-C stops it, what was kept: traces are
    cached file by file, the database gets the repository in one transaction at the end, and a
    re-run takes the files traced so far from the cache."""

    def __init__(self) -> None:
        self.done: int | None = None
        self.total = 0

    def wrap(self, update: Callable[..., None]) -> Callable[..., None]:
        def follow(done: int, total: int | None = None, note: str | None = None) -> None:
            self.done, self.total = done, total or 0
            update(done, total, note)

        return follow

    def note(self) -> str:
        unstored = "nothing was stored in the database (a trace is stored in one transaction "
        if self.done is None:
            return unstored + "once its files are traced); run the same command again to trace it"
        return (
            unstored + f"at its end); {self.done} of {self.total} files were done and their "
            "traces are cached: run the same command again to go on from them (a file that "
            "failed is tried again)"
        )


TRACE_FIELDS = {
    "project": (str | None, None),
    "commit": (str | None, None),
    "db": (str | None, None),
    "workers": (int, 1),
    "build": (bool, True),
    "deps": (bool, False),
    "timeout": (float, 1800.0),
    "lean": (str, "repl"),
}


def trace(
    project: str | None = typer.Argument(
        None,
        metavar="PROJECT",
        help="Git URL, local directory or .lean file (or 'project' in --config).",
        show_default=False,
    ),
    commit: str | None = typer.Option(
        None, "--commit", metavar="SHA", help="Commit to trace [default: HEAD]."
    ),
    db: str | None = DB_OPTION,
    workers: int | None = typer.Option(
        None, "--workers", min=1, metavar="N", help="Files elaborated at once [default: 1]."
    ),
    build: bool | None = typer.Option(
        None,
        "--build/--no-build",
        help="Run 'lake build' first [default: build].",
        show_default=False,
    ),
    deps: bool | None = typer.Option(
        None,
        "--deps/--no-deps",
        help="Also scan dependencies for premises [default: no].",
        show_default=False,
    ),
    timeout: float | None = typer.Option(
        None, "--timeout", metavar="SECONDS", help="Seconds allowed per file [default: 1800]."
    ),
    lean: str | None = typer.Option(
        None,
        "--lean",
        metavar="BACKEND",
        help="The Lean backend that traces; it must report every tactic (repl does, "
        "pantograph does not and is refused) [default: repl].",
        show_default=False,
    ),
    config: Path | None = CONFIG_OPTION,
) -> None:
    """Trace a Lean project (theorems, tactic states, premises, sorries) into the database."""
    from leanloop.errors import LeanloopError

    s = command_settings(
        config,
        TRACE_FIELDS,
        {
            "project": project,
            "commit": commit,
            "db": db,
            "workers": workers,
            "build": build,
            "deps": deps,
            "timeout": timeout,
            "lean": lean,
        },
    )
    if not s.project:
        raise LeanloopError("no project to trace", hint="give PROJECT, or 'project' in --config")
    from leanloop.lean.backends import backend

    backend(s.lean, needs=("tactics",))  # a backend that cannot trace is refused first
    database = open_database(s.db)
    watch = TraceWatch()
    with on_interrupt(watch.note), progress_bar(f"tracing {s.project}") as bar:
        update = watch.wrap(bar)
        # open_project tells a git URL from a local directory or file
        report = database.trace_repository(
            path=s.project,
            commit=s.commit,
            build=s.build,
            build_deps=s.deps,
            workers=s.workers,
            timeout=s.timeout,
            lean=s.lean,
            progress=update,
        )
    counts = report.counts
    console.print(
        f"traced {plural(report.files, 'file')} of {report.repository} ({report.cached_files} from "
        f"the cache): {plural(counts.theorems_added, 'theorem')} added ({counts.theorems_skipped} "
        f"already present), {plural(counts.tactics_added, 'tactic')}, "
        f"{plural(counts.premises_added, 'premise')}",
        highlight=False,
    )
    for path, why in sorted(report.failures.items()):
        err_console.print(f"  failed {path}: {why}", highlight=False, markup=False)
    if report.skipped:
        console.print(f"  {plural(len(report.skipped), 'theorem')} skipped (Lean reported errors)")
