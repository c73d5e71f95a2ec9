"""``leanloop data``: download published datasets."""

from __future__ import annotations

from pathlib import Path

import typer

from leanloop.cli.common import console, new_app, user_path

app = new_app(help="Published datasets.")


@app.command("download")
def download(
    name: str = typer.Argument(..., metavar="NAME", help="Dataset name: leandojo-benchmark-4."),
    dest: Path | None = typer.Option(
        None, "--dest", help="Directory to unpack into [default: the cache directory]."
    ),
    archive: Path | None = typer.Option(
        None, "--archive", help="Use this already downloaded archive instead of downloading."
    ),
    force: bool = typer.Option(False, "--force", help="Unpack again even if already present."),
) -> None:
    """Download, verify (md5) and unpack a dataset; a second call reuses the cache."""
    from leanloop.data.leandojo.download import download_dataset
    from leanloop.settings import Settings

    target = user_path(dest) if dest else Settings.from_env().cache_dir / "datasets"
    path = download_dataset(
        name, target, archive=user_path(archive) if archive else None, force=force
    )
    console.print(f"{name} is ready at {path}", highlight=False)
