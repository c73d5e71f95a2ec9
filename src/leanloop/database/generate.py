"""``generate_benchmark``: LeanDojo's entry point from repositories to a dataset in one call —
trace each repository into a database (those it holds at that commit already are not traced
again) and write the LeanDojo-format dataset of all of them."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from leanloop.data.leandojo.format import SCHEMES
from leanloop.data.leandojo.writer import DATASET_FILES, check_replaceable
from leanloop.database.dynamic import DynamicDatabase
from leanloop.database.export import ExportReport
from leanloop.database.loader import TraceReport
from leanloop.database.splits import SplitConfig
from leanloop.errors import LeanloopError

log = logging.getLogger(__name__)

#: The file the database is kept in, inside the output directory, when none is given.
DEFAULT_DATABASE = "leanloop.db"


@dataclass
class GeneratedBenchmark:
    """What ``generate_benchmark`` did: the repositories (in the order given), what tracing
    added for each one traced (None for one the database held already), and the export.

    It unpacks as ``(traces, theorems)``, in the place of LeanDojo-v2's ``(traced_repo,
    total_theorems)``."""

    output_dir: Path
    database: str
    repositories: list
    traces: list[TraceReport | None]
    export: ExportReport

    @property
    def theorems(self) -> int:
        """Theorems written to the dataset."""
        return self.export.theorems

    def __iter__(self) -> Iterator[Any]:
        return iter((self.traces, self.theorems))


def generate_benchmark(
    repos: Any = None,
    output_dir: str | os.PathLike | None = None,
    build_deps: bool = True,
    *,
    repo: Any = None,
    dst_dir: str | os.PathLike | None = None,
    database: DynamicDatabase | str | os.PathLike | None = None,
    split_config: SplitConfig | None = None,
    workers: int = 1,
    **trace_options: Any,
) -> GeneratedBenchmark:
    """Trace ``repos`` into ``database`` and write their LeanDojo-format dataset (``random`` and
    ``novel_premises`` splits, ``corpus.jsonl``, ``traced_files.jsonl``, ``metadata.json``) to
    ``output_dir``.

    ``repos`` is a list of ``(url, commit)`` pairs (a commit of None: the remote's HEAD), of
    objects with ``url`` and ``commit`` attributes (LeanDojo's ``LeanGitRepo``) or of URLs, or
    one of these alone; a local directory may stand for a URL. ``repo`` and ``dst_dir`` are
    LeanDojo-v2's names of ``repos`` and ``output_dir``, so that ``generate_benchmark(repo,
    dst_dir, build_deps)`` runs as it did there.

    ``database`` (a ``DynamicDatabase``, a SQLite file or a ``postgresql://`` URL) defaults to
    ``leanloop.db`` in ``output_dir``, so that the dataset directory holds everything it was
    made from; the export replaces only the dataset's own entries there. A repository the
    database holds at that commit already (traced before, or imported from a LeanDojo dataset)
    is not traced again. ``build_deps`` also scans the dependencies' sources for the premises
    defined there (LeanDojo traced the dependencies' theorems too; their theorems are not
    part of leanloop's dataset). ``split_config`` sets the sizes and seed of splits not stored
    yet; ``workers`` files are traced at once, and ``trace_options`` (``build``, ``timeout``,
    ``memory_limit_mb``, ``cache_dir``, ``server_factory``) go to the tracer.

    Everything that can be checked is checked before anything is cloned: the repositories
    given, the output directory, the database, and Lean (elan, lake and lean;
    ``ToolchainNotFound`` says what is missing and how to install it) when a repository is to
    be traced.
    """
    wanted = _repositories(repo if repos is None else repos)
    target = output_dir if output_dir is not None else dst_dir
    if target is None:
        raise LeanloopError(
            "generate_benchmark: no output directory", hint="give output_dir=DIRECTORY"
        )
    out = Path(target).expanduser()
    _check_output(out)
    own = not isinstance(database, DynamicDatabase)
    db = database if isinstance(database, DynamicDatabase) else _open(database, out)
    try:
        db.check()
        held = [
            db.get_repository(url, commit) if commit is not None else None for url, commit in wanted
        ]
        if any(found is None for found in held) and trace_options.get("server_factory") is None:
            from leanloop.lean.toolchain import require_tools

            require_tools()  # before anything is cloned
        traces: list[TraceReport | None] = []
        repositories = []
        for (url, commit), found in zip(wanted, held, strict=True):
            if found is not None:
                log.info("%s is in %s already: not traced again", found, db.description)
                traces.append(None)
                repositories.append(found)
                continue
            log.info("tracing %s at %s", url, commit or "HEAD")
            report = db.trace_repository(
                url, commit, build_deps=build_deps, workers=workers, **trace_options
            )
            traces.append(report)
            repositories.append(report.repository)
        export = db.export_merged_data(repositories, out, split_config=split_config)
        log.info("wrote %d theorems to %s", export.theorems, out)
        return GeneratedBenchmark(
            output_dir=out,
            database=db.description,
            repositories=repositories,
            traces=traces,
            export=export,
        )
    finally:
        if own:
            db.close()


def _repositories(given: Any) -> list[tuple[str, str | None]]:
    """``(url, commit)`` of each repository given; an error naming the item that is neither a
    pair, an object with ``url`` and ``commit`` nor a URL."""
    if given is None:
        raise LeanloopError(
            "generate_benchmark: no repositories", hint="give repos=[(url, commit), ...]"
        )
    items: Iterable[Any] = (
        [given]
        if isinstance(given, str | os.PathLike) or hasattr(given, "url") or _is_pair(given)
        else given
    )
    found = []
    for index, item in enumerate(items):
        if isinstance(item, str | os.PathLike):
            url, commit = os.fspath(item), None
        elif hasattr(item, "url") and hasattr(item, "commit"):
            url, commit = item.url, item.commit
        elif isinstance(item, list | tuple) and len(item) == 2:
            url, commit = item
        else:
            raise LeanloopError(
                f"generate_benchmark: repos item #{index} is {item!r}",
                hint="expected (url, commit), an object with url and commit, or a url",
            )
        if isinstance(url, os.PathLike):
            url = os.fspath(url)
        if not isinstance(url, str) or not url.strip():
            raise LeanloopError(f"generate_benchmark: repos item #{index} has no url: {item!r}")
        if commit is not None and (not isinstance(commit, str) or not commit.strip()):
            raise LeanloopError(
                f"generate_benchmark: repos item #{index} has commit {commit!r}",
                hint="a commit hash, or None for the remote's HEAD",
            )
        found.append((url, commit))
    if not found:
        raise LeanloopError(
            "generate_benchmark: no repositories", hint="give repos=[(url, commit), ...]"
        )
    return found


def _is_pair(value: Any) -> bool:
    return (
        isinstance(value, tuple)
        and len(value) == 2
        and isinstance(value[0], str)
        and (value[1] is None or isinstance(value[1], str))
    )


def _check_output(out: Path) -> None:
    """Refuse an output path the export would refuse, before any work."""
    if out.exists() and not out.is_dir():
        raise LeanloopError(f"{out} exists and is not a directory", hint="give a directory")
    for name in (*SCHEMES, *DATASET_FILES):
        entry = out / name
        if entry.exists() or entry.is_symlink():
            check_replaceable(entry)


def _open(database: str | os.PathLike | None, out: Path) -> DynamicDatabase:
    return DynamicDatabase(out / DEFAULT_DATABASE if database is None else database)
