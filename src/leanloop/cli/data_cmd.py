"""``leanloop data``: download published datasets."""

from __future__ import annotations

from pathlib import Path

import typer

from leanloop.cli.common import CONFIG_OPTION, command_settings, console, new_app, user_path

app = new_app(help="Published datasets.")


@app.command("download")
def download(
    name: str | None = typer.Argument(
        None,
        metavar="NAME",
        help="Dataset name: leandojo-benchmark-4 (or 'name' in --config).",
        show_default=False,
    ),
    dest: Path | None = typer.Option(
        None, "--dest", help="Directory to unpack into [default: the cache directory]."
    ),
    archive: Path | None = typer.Option(
        None, "--archive", help="Use this already downloaded archive instead of downloading."
    ),
    force: bool | None = typer.Option(
        None,
        "--force/--reuse",
        help="Unpack again even if already present [default: reuse].",
        show_default=False,
    ),
    config: Path | None = CONFIG_OPTION,
) -> None:
    """Download, verify (md5) and unpack a dataset; a second call reuses the cache."""
    from leanloop.data.leandojo.download import download_dataset
    from leanloop.errors import LeanloopError
    from leanloop.settings import Settings

    s = command_settings(
        config,
        {
            "name": (str | None, None),
            "dest": (Path | None, None),
            "archive": (Path | None, None),
            "force": (bool, False),
        },
        {"name": name, "dest": dest, "archive": archive, "force": force},
    )
    if not s.name:
        raise LeanloopError(
            "no dataset named", hint="give NAME (leandojo-benchmark-4), or 'name' in --config"
        )
    target = user_path(s.dest) if s.dest else Settings.from_env().cache_dir / "datasets"
    path = download_dataset(
        s.name, target, archive=user_path(s.archive) if s.archive else None, force=s.force
    )
    console.print(f"{s.name} is ready at {path}", highlight=False)
