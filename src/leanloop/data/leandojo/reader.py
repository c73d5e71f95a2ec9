"""Streaming reader for LeanDojo-format datasets: a whole dataset directory, part of one, or a
single split file."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from leanloop.data.jsonstream import iter_json_array, iter_jsonl, read_json
from leanloop.data.leandojo.format import (
    SCHEMES,
    SPLITS,
    SchemaError,
    source_file_from_corpus,
    theorem_from_leandojo,
    theorem_key_of,
    traced_file_from_line,
)
from leanloop.data.records import Repository, SourceFile, Theorem, TheoremKey
from leanloop.errors import DataFormatError


@dataclass(frozen=True)
class SplitFile:
    """A JSON file of theorems; ``scheme``/``split`` are known when its place in the layout says."""

    path: Path
    scheme: str | None
    split: str | None


@dataclass(frozen=True)
class TheoremItem:
    """One theorem as found in a split file, validated only when ``parse`` is called."""

    source: SplitFile
    index: int
    line: int
    raw: Any

    @property
    def key(self) -> TheoremKey | None:
        return theorem_key_of(self.raw)

    def parse(self) -> Theorem:
        try:
            return theorem_from_leandojo(self.raw)
        except SchemaError as exc:
            raise exc.located(str(self.source.path), line=self.line, item=self.index) from None


class LeanDojoDataset:
    """A LeanDojo-format dataset on disk; every file in it is optional, and all are streamed.
    One of the formats behind ``data.formats.DatasetReader``.

    Malformed input raises ``DataFormatError`` naming the file, line, item and field, when
    it is read.

    Args:
        path: A dataset directory (``random/`` and ``novel_premises/`` with
            ``train/val/test.json``, ``corpus.jsonl``, ``traced_files.jsonl``,
            ``metadata.json``), or one of its files.

    Raises:
        DataFormatError: ``path`` does not exist, or is not a dataset or one of its files.
    """

    format = "leandojo"

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not self.path.exists():
            raise DataFormatError(self.path, "no such file or directory")
        self.split_files: list[SplitFile] = []
        self.corpus_path: Path | None = None
        self.traced_files_path: Path | None = None
        self.metadata_path: Path | None = None
        if self.path.is_file():
            self._from_file(self.path)
        else:
            self._from_directory(self.path)

    def _from_file(self, path: Path) -> None:
        if path.name == "corpus.jsonl":
            self.corpus_path = path
        elif path.name == "traced_files.jsonl":
            self.traced_files_path = path
        elif path.name == "metadata.json":
            self.metadata_path = path
        elif path.suffix == ".json":
            scheme = path.parent.name if path.parent.name in SCHEMES else None
            split = path.stem if path.stem in SPLITS else None
            self.split_files.append(SplitFile(path, scheme, split))
            metadata = path.parent.parent / "metadata.json" if scheme else None
            if metadata is not None and metadata.is_file():
                self.metadata_path = metadata
        else:
            raise DataFormatError(
                path,
                "not a LeanDojo-format file",
                hint="expected a split file (*.json), corpus.jsonl, traced_files.jsonl "
                "or a dataset directory",
            )

    def _from_directory(self, root: Path) -> None:
        for scheme in SCHEMES:
            for split in SPLITS:
                candidate = root / scheme / f"{split}.json"
                if candidate.is_file():
                    self.split_files.append(SplitFile(candidate, scheme, split))
        for name, attr in (
            ("corpus.jsonl", "corpus_path"),
            ("traced_files.jsonl", "traced_files_path"),
            ("metadata.json", "metadata_path"),
        ):
            if (root / name).is_file():
                setattr(self, attr, root / name)
        if not (self.split_files or self.corpus_path or self.traced_files_path):
            raise DataFormatError(
                root,
                "not a LeanDojo-format dataset",
                hint="expected random/ or novel_premises/ with train/val/test.json, "
                "corpus.jsonl or traced_files.jsonl",
            )

    @cached_property
    def metadata(self) -> dict[str, Any]:
        """``metadata.json``'s content (empty when there is none)."""
        if self.metadata_path is None:
            return {}
        data = read_json(self.metadata_path)
        if not isinstance(data, dict):
            raise DataFormatError(self.metadata_path, "expected a JSON object")
        return data

    def repository(self) -> Repository | None:
        """The repository the dataset was traced from.

        Returns:
            The repository ``metadata.json`` names; None when it names none.

        Raises:
            DataFormatError: Its ``from_repo`` has an empty URL or commit.
        """
        origin = self.metadata.get("from_repo")
        if not isinstance(origin, dict) or origin.get("url") is None:
            return None
        url, commit = origin.get("url"), origin.get("commit")
        for name, value in (("url", url), ("commit", commit)):
            if not isinstance(value, str) or not value.strip():
                raise DataFormatError(
                    self.metadata_path or self.path,
                    "expected a non-empty string",
                    field=f"from_repo.{name}",
                )
        return Repository(url=url, commit=commit)

    def complete_schemes(self) -> list[str]:
        """The split schemes present in full.

        Returns:
            The schemes whose train, val and test files are all present.
        """
        present = {(f.scheme, f.split) for f in self.split_files}
        return [s for s in SCHEMES if all((s, split) in present for split in SPLITS)]

    def theorem_files(self, *, all_schemes: bool = True) -> list[SplitFile]:
        """The split files to read. Every scheme holds the same theorems, so when one scheme is
        complete and ``all_schemes`` is False, only that scheme's files are needed.

        Args:
            all_schemes: Every scheme's files (off: one complete scheme's, when there is one).

        Returns:
            The split files.
        """
        complete = self.complete_schemes()
        if complete and not all_schemes:
            return [f for f in self.split_files if f.scheme == complete[0]]
        return list(self.split_files)

    def iter_theorem_items(self, files: list[SplitFile] | None = None) -> Iterator[TheoremItem]:
        """Stream the theorems of split files unparsed (``item.parse()`` checks one).

        Args:
            files: The split files (default: all).

        Yields:
            Each theorem's raw JSON with where it is.
        """
        for source in self.split_files if files is None else files:
            for item in iter_json_array(source.path):
                yield TheoremItem(source, item.index, item.line, item.value)

    def iter_theorems(self) -> Iterator[Theorem]:
        """Stream every theorem once (the first occurrence when it is in several files).

        Yields:
            The theorems, checked.

        Raises:
            DataFormatError: A theorem is malformed (naming the file, line, item and field).
        """
        seen: set[TheoremKey] = set()
        for item in self.iter_theorem_items(self.theorem_files(all_schemes=False)):
            theorem = item.parse()
            if theorem.key not in seen:
                seen.add(theorem.key)
                yield theorem

    def iter_source_files(self) -> Iterator[SourceFile]:
        """Stream the files of ``corpus.jsonl`` with their premises (nothing without it).

        Yields:
            The source files.

        Raises:
            DataFormatError: A line is malformed.
        """
        if self.corpus_path is None:
            return
        for item in iter_jsonl(self.corpus_path):
            try:
                yield source_file_from_corpus(item.value)
            except SchemaError as exc:
                raise exc.located(str(self.corpus_path), line=item.line, item=None) from None

    def iter_traced_files(self) -> Iterator[str]:
        """Stream the paths of ``traced_files.jsonl`` (nothing without it).

        Yields:
            The traced files' paths.

        Raises:
            DataFormatError: A line is malformed.
        """
        if self.traced_files_path is None:
            return
        for item in iter_jsonl(self.traced_files_path):
            try:
                yield traced_file_from_line(item.value)
            except SchemaError as exc:
                raise exc.located(str(self.traced_files_path), line=item.line, item=None) from None

    def describe(self) -> str:
        """What the dataset holds, in one line.

        Returns:
            Its split files (``scheme/split``) and other files, comma-separated.
        """
        parts = [f"{f.scheme or '?'}/{f.split or f.path.name}" for f in self.split_files]
        for name in ("corpus_path", "traced_files_path", "metadata_path"):
            if getattr(self, name) is not None:
                parts.append(getattr(self, name).name)
        return ", ".join(parts)
