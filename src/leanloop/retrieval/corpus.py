"""The premise corpus of a dataset and which of its premises a theorem may use (accessibility).

A premise is accessible from a position in a file when it is defined in that file before the
position, or in a file that the file imports, directly or transitively.

An evaluation ranks, for every step, the premises of a ``CandidatePool``: the dataset's
``corpus.jsonl``, or without one the premises that the train split's proofs use; test proofs never
add candidates.

Where the corpus has no import graph (no ``corpus.jsonl``, or one whose files list no imports,
as when the corpus is rebuilt from the premises that tactics refer to), every premise defined in
another file counts as accessible, and the same-file rule still applies. The same fallback is used
for a theorem whose file is not in the corpus.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from leanloop.data.records import Pos, Premise, SourceFile, Theorem
from leanloop.words import plural

log = logging.getLogger(__name__)


def premise_text(premise: Premise) -> str:
    """What the retriever reads for a premise: its full name, then its code when known."""
    code = premise.code.strip()
    return f"{premise.full_name}\n{code}" if code else premise.full_name


class Corpus:
    """Premises in a fixed order (their index is their row in an embedding matrix), the file of
    each and the files' imports.

    A name defined twice keeps its first definition.
    """

    def __init__(self, files: Iterable[SourceFile]) -> None:
        self.premises: list[Premise] = []
        self._index: dict[str, int] = {}
        self._by_file: dict[str, list[int]] = {}
        self.imports: dict[str, tuple[str, ...]] = {}
        for source in files:
            self.imports[source.path] = tuple(source.imports)
            self._by_file.setdefault(source.path, [])
            for premise in source.premises:
                if premise.file_path != source.path:
                    premise = premise.model_copy(update={"file_path": source.path})
                self._add(premise)
        for indices in self._by_file.values():
            indices.sort(key=lambda i: self.premises[i].end)
        self._closure: dict[str, frozenset[str]] = {}
        self._mask_cache: OrderedDict[str, object] = OrderedDict()

    def _add(self, premise: Premise) -> None:
        if premise.full_name in self._index:
            return
        self._index[premise.full_name] = len(self.premises)
        self.premises.append(premise)
        self._by_file.setdefault(premise.file_path, []).append(len(self.premises) - 1)

    # -- construction ----------------------------------------------------------------------------

    @classmethod
    def from_theorems(cls, theorems: Iterable[Theorem], files: Iterable[SourceFile] = ()) -> Corpus:
        """The premises of ``files`` plus every premise the tactics of ``theorems`` refer to that
        ``files`` lack (its code unknown, its span the span of its name)."""
        by_path: dict[str, SourceFile] = {f.path: f for f in files}
        extra: dict[str, dict[str, Premise]] = {}
        known = {p.full_name for f in by_path.values() for p in f.premises}
        for theorem in theorems:
            for step in theorem.traced_tactics:
                for ref in step.premises:
                    if ref.full_name in known:
                        continue
                    known.add(ref.full_name)
                    extra.setdefault(ref.def_path, {})[ref.full_name] = Premise(
                        full_name=ref.full_name,
                        file_path=ref.def_path,
                        start=ref.def_pos,
                        end=ref.def_end_pos,
                    )
        for path, premises in extra.items():
            base = by_path.get(path) or SourceFile(path=path)
            by_path[path] = base.model_copy(
                update={"premises": base.premises + tuple(premises.values())}
            )
        return cls(by_path.values())

    @classmethod
    def from_dataset(cls, dataset_dir: str | Path, theorems: Iterable[Theorem] = ()) -> Corpus:
        """The corpus of an exported dataset: ``corpus.jsonl`` when it lists any file, completed
        with the premises that the tactics of ``theorems`` refer to and it lacks."""
        from leanloop.data import open_dataset

        files = list(open_dataset(dataset_dir).iter_source_files())
        if not files:
            log.info("%s lists no corpus files: premises taken from the tactics", dataset_dir)
        return cls.from_theorems(theorems, files)

    # -- lookup ----------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.premises)

    def __iter__(self) -> Iterator[Premise]:
        return iter(self.premises)

    def __getitem__(self, index: int) -> Premise:
        return self.premises[index]

    def __contains__(self, full_name: object) -> bool:
        return full_name in self._index

    def index_of(self, full_name: str) -> int | None:
        return self._index.get(full_name)

    def texts(self) -> list[str]:
        """``premise_text`` of every premise, in corpus order."""
        return [premise_text(p) for p in self.premises]

    @property
    def files(self) -> list[str]:
        return list(self._by_file)

    def in_file(self, file_path: str) -> Sequence[int]:
        """Indices of the premises defined in ``file_path``, in order of where they end."""
        return self._by_file.get(file_path, ())

    @property
    def has_import_graph(self) -> bool:
        return any(self.imports.values())

    # -- accessibility ---------------------------------------------------------------------------

    def imported_files(self, file_path: str) -> frozenset[str] | None:
        """Files ``file_path`` imports, directly or transitively (None: unknown, so every other
        file counts as imported)."""
        if not self.has_import_graph or file_path not in self.imports:
            return None
        found = self._closure.get(file_path)
        if found is None:
            seen: set[str] = set()
            stack = list(self.imports[file_path])
            while stack:
                current = stack.pop()
                if current in seen or current == file_path:
                    continue
                seen.add(current)
                stack.extend(self.imports.get(current, ()))
            found = self._closure[file_path] = frozenset(seen)
        return found

    def is_accessible(self, index: int, file_path: str, position: Pos | Sequence[int]) -> bool:
        premise = self.premises[index]
        if premise.file_path == file_path:
            return tuple(premise.end) <= tuple(position)
        imported = self.imported_files(file_path)
        return imported is None or premise.file_path in imported

    def accessible(self, file_path: str, position: Pos | Sequence[int]) -> list[int]:
        """Indices of the premises accessible from ``position`` in ``file_path``."""
        return [int(i) for i in self.accessible_mask(file_path, position).nonzero()[0]]

    def accessible_mask(self, file_path: str, position: Pos | Sequence[int]):
        """A numpy boolean array over the corpus: True where the premise is accessible."""
        import numpy as np

        other = self._other_files_mask(file_path)
        mask = other.copy()
        for index in self._by_file.get(file_path, ()):
            if tuple(self.premises[index].end) <= tuple(position):
                mask[index] = True
            else:
                break  # sorted by end position
        return np.asarray(mask)

    def _other_files_mask(self, file_path: str):
        import numpy as np

        cached = self._mask_cache.get(file_path)
        if cached is not None:
            self._mask_cache.move_to_end(file_path)
            return cached
        mask = np.zeros(len(self.premises), dtype=bool)
        imported = self.imported_files(file_path)
        if imported is None:
            mask[:] = True
        else:
            for path in imported:
                mask[list(self._by_file.get(path, ()))] = True
        mask[list(self._by_file.get(file_path, ()))] = False
        self._mask_cache[file_path] = mask
        if len(self._mask_cache) > 256:
            self._mask_cache.popitem(last=False)
        return mask


#: Where the candidates of a ``CandidatePool`` come from.
CORPUS_JSONL = "corpus.jsonl"
CORPUS_JSONL_AND_TRAIN = "corpus.jsonl and train split"
TRAIN_SPLIT = "train split"
GIVEN_CORPUS = "given corpus"


@dataclass(frozen=True)
class CandidatePool:
    """The premises an evaluation ranks for every step (``corpus``) and where they come from
    (``source``, one of the constants above)."""

    corpus: Corpus
    source: str

    @property
    def size(self) -> int:
        return len(self.corpus)

    def describe(self) -> str:
        """The pool in words."""
        return describe_pool(self.source, self.size)

    @classmethod
    def of_dataset(cls, dataset_dir: str | Path, train: Iterable[Theorem]) -> CandidatePool:
        """``corpus.jsonl`` when it lists any file (with the premises the tactics of ``train``
        refer to that it lacks), else the premises the tactics of ``train`` refer to."""
        from leanloop.data import open_dataset

        files = list(open_dataset(dataset_dir).iter_source_files())
        corpus = Corpus.from_theorems(train, files)
        if not files:
            log.info("%s lists no corpus files: candidates from the train split", dataset_dir)
            return cls(corpus, TRAIN_SPLIT)
        listed = {p.full_name for f in files for p in f.premises}
        return cls(corpus, CORPUS_JSONL if len(corpus) == len(listed) else CORPUS_JSONL_AND_TRAIN)


def describe_pool(source: str, size: int) -> str:
    """A candidate pool in words, from its source and size."""
    if source == CORPUS_JSONL:
        return f"the {plural(size, 'premise')} of corpus.jsonl"
    if source == CORPUS_JSONL_AND_TRAIN:
        return (
            f"the {plural(size, 'premise')} of corpus.jsonl and of the train split's proofs "
            "(those the corpus lacks)"
        )
    if source == TRAIN_SPLIT:
        return (
            f"the {plural(size, 'premise')} that the train split's proofs use (no corpus.jsonl: "
            "a premise only val or test proofs use is no candidate and counts as a miss)"
        )
    return f"the {plural(size, 'premise')} of the {source}"
