"""The dataset formats leanloop reads, behind one interface: ``DatasetReader`` is what every
format gives, ``open_dataset(path)`` picks the reader from what the path is. A new format is a
reader module beside ``leandojo/`` and one line in ``FORMATS``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol, runtime_checkable

from leanloop.data.benchmark import BenchmarkFile
from leanloop.data.leandojo.reader import LeanDojoDataset
from leanloop.data.records import Repository, SourceFile, Theorem
from leanloop.errors import LeanloopError


@runtime_checkable
class DatasetReader(Protocol):
    """A dataset on disk, read one record at a time."""

    @property
    def path(self) -> Path: ...

    @property
    def format(self) -> str:
        """The format's short name (one of ``FORMATS``)."""
        ...

    def repository(self) -> Repository | None:
        """The repository the dataset says it comes from, if it says."""
        ...

    def iter_theorems(self) -> Iterator[Theorem]: ...

    def iter_source_files(self) -> Iterator[SourceFile]:
        """The corpus files (none for a format that has no corpus)."""
        ...

    def describe(self) -> str: ...


def _is_leandojo(path: Path) -> bool:
    if path.is_dir():
        names = ("random", "novel_premises", "corpus.jsonl", "traced_files.jsonl")
        return any((path / name).exists() for name in names)
    return path.is_file() and (
        path.suffix == ".json" or path.name in ("corpus.jsonl", "traced_files.jsonl")
    )


#: (name, can_read(path), reader class), tried in order: the first that can read a path reads it.
FORMATS: list[tuple[str, Callable[[Path], bool], Callable[[Path], DatasetReader]]] = [
    ("leandojo", _is_leandojo, LeanDojoDataset),
    ("benchmark-jsonl", lambda p: p.is_file() and p.suffix == ".jsonl", BenchmarkFile),
    ("lean-file", lambda p: p.is_file() and p.suffix == ".lean", BenchmarkFile),
]

_KNOWN = (
    "leandojo (a dataset directory or its .json split file), "
    "benchmark-jsonl (a .jsonl file of statements), lean-file (a .lean file of sorry theorems)"
)


def open_dataset(path: str | Path) -> DatasetReader:
    """The reader of a dataset, in whichever format it is.

    Args:
        path: A LeanDojo-format dataset (a directory or one of its files), a ``.jsonl``
            benchmark of statements, or a ``.lean`` file of ``sorry`` theorems.

    Returns:
        DatasetReader: A reader that streams its theorems (``iter_theorems()``), its corpus
        and its traced files.

    Raises:
        LeanloopError: ``path`` does not exist, or no format fits it (one line).
    """
    path = Path(path).expanduser()
    if not path.exists():
        raise LeanloopError(f"{path}: no such file or directory", hint=f"datasets: {_KNOWN}")
    for _, can_read, reader in FORMATS:
        if can_read(path):
            return reader(path)
    raise LeanloopError(f"{path}: not a dataset format leanloop reads", hint=f"it reads {_KNOWN}")
