"""``leanloop run``: the main job — import a LeanDojo-format dataset into the database, export the
training splits and print the statistics — configured by a ``RunConfig`` (YAML/JSON or options)."""

from __future__ import annotations

from pathlib import Path

import typer
from pydantic import BaseModel, ConfigDict, ValidationError

from leanloop.cli.common import DB_OPTION, console, open_database, progress_bar, user_path
from leanloop.configfile import read_config_file
from leanloop.database.splits import SplitConfig
from leanloop.errors import DataFormatError, LeanloopError


class RunConfig(BaseModel):
    """Settings of the main job."""

    model_config = ConfigDict(extra="forbid")

    source: Path | None = None
    database: str | None = None
    output: Path = Path("build/run/export")
    keep_splits: bool = False
    splits: SplitConfig = SplitConfig()

    @classmethod
    def from_file(cls, path: Path) -> RunConfig:
        data = read_config_file(path) or {}
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            error = exc.errors()[0]
            field = ".".join(str(p) for p in error["loc"])
            raise DataFormatError(path, error["msg"], field=field or None) from None

    def resolved_source(self) -> Path:
        if self.source is not None:
            return self.source
        from leanloop.settings import Settings

        fixtures = Settings.from_env().fixtures
        if fixtures is not None:
            return fixtures / "leandojo_benchmark_4"
        raise LeanloopError(
            "no dataset to run on",
            hint="pass --source DIR, set source: in the config, or set LEANLOOP_FIXTURES",
        )


def run(
    config: Path | None = typer.Option(
        None, "--config", metavar="FILE", help="A YAML or JSON RunConfig file."
    ),
    source: Path | None = typer.Option(
        None,
        "--source",
        help="LeanDojo-format dataset [default: $LEANLOOP_FIXTURES/leandojo_benchmark_4].",
    ),
    db: str | None = DB_OPTION,
    out: Path | None = typer.Option(
        None,
        "--out",
        metavar="DIR",
        help="Where to export the dataset [default: build/run/export].",
    ),
) -> None:
    """Run the main job: import a dataset, export its training splits, print statistics."""
    from leanloop.cli.db_cmd import print_export_report, print_stats

    settings = RunConfig.from_file(user_path(config)) if config else RunConfig()
    updates = {"source": source, "database": db, "output": out}
    settings = settings.model_copy(update={k: v for k, v in updates.items() if v is not None})
    dataset = user_path(settings.resolved_source())
    if not dataset.exists():
        raise LeanloopError(f"dataset {dataset}: no such file or directory")
    output = user_path(settings.output)
    if output.exists() and not output.is_dir():
        raise LeanloopError(
            f"--out {output}: a file is there; the export needs a directory",
            hint="give a new or existing directory",
        )
    database = open_database(settings.database)

    console.rule("1. import")
    with progress_bar(f"importing {dataset}") as update:
        counts = database.import_leandojo(
            dataset, keep_splits=settings.keep_splits, progress=update
        )
    console.print(
        f"{counts.theorems_added} theorems added, {counts.theorems_skipped} already present, "
        f"{counts.tactics_added} tactics, {counts.premises_added} premises",
        highlight=False,
    )

    console.rule("2. export")
    repositories = database.sort_repositories_by_difficulty()
    with progress_bar(
        "exporting theorems", finishing="writing the corpus and committing"
    ) as update:
        report = database.export_merged_data(
            repositories, output, split_config=settings.splits, progress=update
        )
    print_export_report(report)

    console.rule("3. statistics")
    print_stats(database.stats())
