"""One reader interface for every dataset format: ``open_dataset`` picks the reader from the path,
and every reader satisfies ``DatasetReader``."""

from __future__ import annotations

import pytest

from leanloop.data import DatasetReader, open_dataset
from leanloop.data.benchmark import BenchmarkFile
from leanloop.data.formats import FORMATS
from leanloop.data.leandojo import LeanDojoDataset
from leanloop.errors import DataFormatError, LeanloopError

LEAN_FILE = """import Mathlib

/-- One and one. -/
theorem one_add_one : 1 + 1 = 2 := by sorry

theorem two_mul (n : Nat) : 2 * n = n + n := by
  sorry

theorem done : True := trivial
"""


def test_leandojo_directory_and_split_file(sample_dir):
    for path in (sample_dir, sample_dir / "random" / "test.json"):
        reader = open_dataset(path)
        assert isinstance(reader, LeanDojoDataset) and isinstance(reader, DatasetReader)
        assert reader.format == "leandojo" and reader.path == path
        assert reader.repository().commit == "29dcec074de168ac2bf835a77ef68bbe069194c5"
        assert sum(1 for _ in reader.iter_theorems()) == 177
        assert list(reader.iter_source_files()) == []
        assert "random/test" in reader.describe()


@pytest.mark.parametrize(("name", "count"), [("minif2f", 488), ("proofnet", 371)])
def test_jsonl_benchmarks_read_every_problem(fixtures, name, count):
    path = fixtures / "minif2f" / f"{name}.jsonl"
    reader = open_dataset(path)
    assert isinstance(reader, BenchmarkFile) and isinstance(reader, DatasetReader)
    assert reader.format == "benchmark-jsonl" and reader.path == path
    theorems = list(reader.iter_theorems())
    assert len(theorems) == count == len(reader.problems())
    assert len({t.full_name for t in theorems}) == count
    repository = reader.repository()
    assert repository is not None
    assert all((t.url, t.commit) == (repository.url, repository.commit) for t in theorems)
    assert list(reader.iter_source_files()) == []
    assert f"{count} problems" in reader.describe()


def test_lean_file(tmp_path):
    path = tmp_path / "small.lean"
    path.write_text(LEAN_FILE, encoding="utf-8")
    reader = open_dataset(path)
    assert isinstance(reader, DatasetReader)
    assert reader.format == "lean-file"
    assert [t.full_name for t in reader.iter_theorems()] == ["one_add_one", "two_mul"]
    assert list(reader.iter_source_files()) == []


def test_unknown_path_is_a_one_line_error(tmp_path):
    unknown = tmp_path / "notes.txt"
    unknown.write_text("hello\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    for path in (unknown, empty, tmp_path / "missing"):
        with pytest.raises(LeanloopError) as caught:
            open_dataset(path)
        message = str(caught.value)
        assert "\n" not in message and str(path) in message
        assert all(name in message for name, _, _ in FORMATS)


def test_malformed_jsonl_line_names_file_line_and_field(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(
        '{"name": "a", "formal_statement": "theorem a : True := by"}\n'
        '{"name": "b", "header": "import Mathlib\\n"}\n',
        encoding="utf-8",
    )
    reader = open_dataset(path)
    with pytest.raises(DataFormatError) as caught:
        list(reader.iter_theorems())
    message = str(caught.value)
    assert "\n" not in message
    assert "bad.jsonl" in message and "line 2" in message and "formal_statement" in message


def test_database_imports_a_benchmark_as_a_repository_of_open_sorries(db, fixtures):
    path = fixtures / "minif2f" / "minif2f.jsonl"
    seen: list[int] = []
    counts = db.import_dataset(path, progress=lambda done, _total: seen.append(done))
    assert (counts.theorems_added, counts.repositories_added, seen[-1]) == (488, 1, 488)
    repository = open_dataset(path).repository()
    assert db.get_repository(repository.url, repository.commit) is not None
    assert len(db.get_sorry_theorems(repository)) == 488
    assert db.import_dataset(path).theorems_skipped == 488  # importing again changes nothing
