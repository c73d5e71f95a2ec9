"""Streaming writer of LeanDojo-format datasets: the files of the dataset are written aside and
then each replaces its old version in one step; nothing else in the output directory is touched."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import IO, Any

from leanloop.atomic import replace_entries
from leanloop.data.leandojo.format import SCHEMES, SPLITS
from leanloop.errors import LeanloopError

# LeanDojo writes with ``json.dump`` defaults (ASCII escapes, ", " and ": " separators); the same
# encoder makes files that compare byte for byte with LeanDojo's own.
_encode = json.JSONEncoder().encode


#: The files of a dataset besides the scheme directories.
DATASET_FILES = ("corpus.jsonl", "traced_files.jsonl", "metadata.json")
_SPLIT_FILES = frozenset(f"{split}.json" for split in SPLITS)


def check_replaceable(entry: Path) -> None:
    """Refuse to replace ``entry`` when it holds anything an export would not write back: a
    scheme directory may hold only its split files, the other entries must be files."""
    if entry.name in DATASET_FILES:
        if entry.is_dir() or not entry.is_file():
            raise LeanloopError(
                f"refusing to replace {entry}: it is not a file",
                hint="move it away or export to another directory",
            )
        return
    if not entry.is_dir() or entry.is_symlink():
        raise LeanloopError(
            f"refusing to replace {entry}: it is not a directory of split files",
            hint="move it away or export to another directory",
        )
    extra = sorted(p.name for p in entry.iterdir() if p.name not in _SPLIT_FILES or p.is_dir())
    if extra:
        shown = ", ".join(extra[:3]) + (f" and {len(extra) - 3} more" if len(extra) > 3 else "")
        raise LeanloopError(
            f"refusing to replace {entry}: it holds {shown}, which the export does not write",
            hint="move those away or export to another directory",
        )


class LeanDojoWriter:
    """Write a dataset: use as a context manager; the output appears only if the block succeeds.

    Theorems are written as they come (each split file is a JSON array built incrementally), so
    memory does not grow with the size of the dataset. The output directory may hold other
    things (notes, checkpoints, a database): only the dataset's own entries (the scheme
    directories, ``corpus.jsonl``, ``traced_files.jsonl``, ``metadata.json``) are replaced, and a
    scheme directory holding anything but split files is refused before anything is written.

    Args:
        out_dir: The dataset's directory.
        schemes: The split schemes written (each theorem goes into one split of each).
    """

    def __init__(self, out_dir: str | Path, schemes: tuple[str, ...] = SCHEMES) -> None:
        self.out_dir = Path(out_dir)
        self.schemes = schemes
        self.counts: Counter[tuple[str, str]] = Counter()
        self.num_source_files = 0
        self.num_premises = 0
        self.num_traced_files = 0
        self._stack = ExitStack()
        self._staging: Path | None = None
        self._splits: dict[tuple[str, str], IO[str]] = {}
        self._corpus: IO[str] | None = None
        self._traced: IO[str] | None = None

    def __enter__(self) -> LeanDojoWriter:
        self._staging = self._stack.enter_context(
            replace_entries(self.out_dir, [*self.schemes, *DATASET_FILES], check=check_replaceable)
        )
        for scheme in self.schemes:
            (self._staging / scheme).mkdir()
            for split in SPLITS:
                handle = self._stack.enter_context(
                    (self._staging / scheme / f"{split}.json").open(
                        "w", encoding="utf-8", buffering=1 << 20
                    )
                )
                handle.write("[")
                self._splits[scheme, split] = handle
        self._corpus = self._stack.enter_context(
            (self._staging / "corpus.jsonl").open("w", encoding="utf-8")
        )
        self._traced = self._stack.enter_context(
            (self._staging / "traced_files.jsonl").open("w", encoding="utf-8")
        )
        return self

    def __exit__(self, exc_type, exc, tb) -> bool | None:
        if exc_type is None:
            for handle in self._splits.values():
                handle.write("]")
        return self._stack.__exit__(exc_type, exc, tb)

    def write_theorem(self, theorem: Mapping[str, Any] | str, splits: Mapping[str, str]) -> None:
        """Append a theorem to its split in every scheme.

        Args:
            theorem: A LeanDojo theorem object, or its JSON text.
            splits: The theorem's split in each scheme (``{"random": "train", ...}``).
        """
        encoded = theorem if isinstance(theorem, str) else _encode(theorem)
        for scheme in self.schemes:
            split = splits[scheme]
            handle = self._splits[scheme, split]
            if self.counts[scheme, split]:
                handle.write(", ")
            handle.write(encoded)
            self.counts[scheme, split] += 1

    def write_source_file(self, source: Mapping[str, Any]) -> None:
        """Append a ``corpus.jsonl`` line.

        Args:
            source: A LeanDojo source-file object (path, imports, premises).
        """
        assert self._corpus is not None
        self._corpus.write(_encode(source) + "\n")
        self.num_source_files += 1
        self.num_premises += len(source.get("premises", ()))

    def write_traced_file(self, path: str) -> None:
        """Append a ``traced_files.jsonl`` line.

        Args:
            path: A traced file's path.
        """
        assert self._traced is not None
        self._traced.write(_encode({"traced_file_path": path}) + "\n")
        self.num_traced_files += 1

    def write_metadata(self, metadata: Mapping[str, Any]) -> None:
        """Write ``metadata.json``.

        Args:
            metadata: Its content (e.g. ``from_repo``: the repository's url and commit).
        """
        assert self._staging is not None
        (self._staging / "metadata.json").write_text(_encode(metadata), encoding="utf-8")
