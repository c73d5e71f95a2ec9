"""Streaming writer of LeanDojo-format datasets that replaces the output directory atomically."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import IO, Any

from leanloop.atomic import replace_directory
from leanloop.data.leandojo.format import SCHEMES, SPLITS

# LeanDojo writes with ``json.dump`` defaults (ASCII escapes, ", " and ": " separators); the same
# encoder makes files that compare byte for byte with LeanDojo's own.
_encode = json.JSONEncoder().encode


def looks_like_dataset(path: Path) -> bool:
    return (path / "metadata.json").is_file() or any((path / s).is_dir() for s in SCHEMES)


class LeanDojoWriter:
    """Write a dataset: use as a context manager; the output appears only if the block succeeds.

    Theorems are written as they come (each split file is a JSON array built incrementally), so
    memory does not grow with the size of the dataset.
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
            replace_directory(self.out_dir, may_replace=looks_like_dataset)
        )
        for scheme in self.schemes:
            (self._staging / scheme).mkdir()
            for split in SPLITS:
                handle = self._stack.enter_context(
                    (self._staging / scheme / f"{split}.json").open("w", encoding="utf-8")
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

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is None:
            for handle in self._splits.values():
                handle.write("]")
        return self._stack.__exit__(exc_type, exc, tb)

    def write_theorem(self, theorem: Mapping[str, Any], splits: Mapping[str, str]) -> None:
        """Append a theorem (a LeanDojo theorem object) to its split in every scheme."""
        encoded = _encode(theorem)
        for scheme in self.schemes:
            split = splits[scheme]
            handle = self._splits[scheme, split]
            if self.counts[scheme, split]:
                handle.write(", ")
            handle.write(encoded)
            self.counts[scheme, split] += 1

    def write_source_file(self, source: Mapping[str, Any]) -> None:
        """Append a ``corpus.jsonl`` line (a LeanDojo source-file object)."""
        assert self._corpus is not None
        self._corpus.write(_encode(source) + "\n")
        self.num_source_files += 1
        self.num_premises += len(source.get("premises", ()))

    def write_traced_file(self, path: str) -> None:
        assert self._traced is not None
        self._traced.write(_encode({"traced_file_path": path}) + "\n")
        self.num_traced_files += 1

    def write_metadata(self, metadata: Mapping[str, Any]) -> None:
        assert self._staging is not None
        (self._staging / "metadata.json").write_text(_encode(metadata), encoding="utf-8")
