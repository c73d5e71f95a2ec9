from __future__ import annotations

import json
import shutil

import pytest

from leanloop.data.leandojo import LeanDojoDataset, LeanDojoWriter, theorem_to_leandojo
from leanloop.data.leandojo.format import source_file_from_corpus, source_file_to_corpus
from leanloop.errors import DataFormatError, LeanloopError
from tests.helpers import corpus_from_theorems, sample_theorems, write_dataset


def test_reads_partial_real_sample(sample_dir):
    dataset = LeanDojoDataset(sample_dir)
    assert [(f.scheme, f.split) for f in dataset.split_files] == [("random", "test")]
    assert dataset.corpus_path is None and dataset.traced_files_path is None
    assert dataset.complete_schemes() == []
    repo = dataset.repository
    assert repo.url == "https://github.com/leanprover-community/mathlib4"
    assert repo.commit == "29dcec074de168ac2bf835a77ef68bbe069194c5"
    theorems = list(dataset.iter_theorems())
    assert len(theorems) == 177
    assert sum(t.num_steps for t in theorems) == 435
    assert sum(1 for t in theorems if not t.traced_tactics) == 92


def test_single_split_file_and_its_layout(sample_dir):
    dataset = LeanDojoDataset(sample_dir / "random" / "test.json")
    assert [(f.scheme, f.split) for f in dataset.split_files] == [("random", "test")]
    assert dataset.metadata["dataset_name"] == "LeanDojo Benchmark 4"
    assert len(list(dataset.iter_theorems())) == 177


def test_writer_reproduces_leandojo_bytes(sample_dir, tmp_path):
    """LeanDojo's own file and ours compare byte for byte."""
    theorems = sample_theorems(sample_dir)
    out = tmp_path / "out"
    with LeanDojoWriter(out, schemes=("random",)) as writer:
        for theorem in theorems:
            writer.write_theorem(theorem_to_leandojo(theorem), {"random": "test"})
    original = (sample_dir / "random" / "test.json").read_bytes()
    assert (out / "random" / "test.json").read_bytes() == original
    assert json.loads((out / "random" / "train.json").read_text()) == []


def test_writer_is_atomic(sample_dir, tmp_path):
    theorems = sample_theorems(sample_dir)
    out = tmp_path / "out"
    with LeanDojoWriter(out) as writer:
        writer.write_theorem(
            theorem_to_leandojo(theorems[0]), {"random": "train", "novel_premises": "train"}
        )
    before = (out / "random" / "train.json").read_bytes()
    with pytest.raises(RuntimeError), LeanDojoWriter(out) as writer:
        writer.write_theorem(
            theorem_to_leandojo(theorems[1]), {"random": "val", "novel_premises": "val"}
        )
        raise RuntimeError("interrupted")
    assert (out / "random" / "train.json").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_writer_refuses_to_replace_foreign_directory(tmp_path):
    precious = tmp_path / "mine"
    precious.mkdir()
    (precious / "notes.txt").write_text("keep me")
    with pytest.raises(LeanloopError, match="refusing"), LeanDojoWriter(precious):
        pass
    assert (precious / "notes.txt").read_text() == "keep me"


def test_full_layout_round_trip(sample_dir, tmp_path):
    theorems = sample_theorems(sample_dir)
    corpus = corpus_from_theorems(theorems)
    root = write_dataset(
        tmp_path / "ds",
        {
            "random/train": theorems[:100],
            "random/val": theorems[100:140],
            "random/test": theorems[140:],
            "novel_premises/train": theorems[40:],
            "novel_premises/val": theorems[:20],
            "novel_premises/test": theorems[20:40],
        },
        corpus=corpus,
        traced=[t.file_path for t in theorems[:5]],
    )
    dataset = LeanDojoDataset(root)
    assert dataset.complete_schemes() == ["random", "novel_premises"]
    assert len(dataset.theorem_files(all_schemes=False)) == 3
    assert [t.full_name for t in dataset.iter_theorems()] == [t.full_name for t in theorems]
    files = list(dataset.iter_source_files())
    assert [source_file_to_corpus(f) for f in files] == corpus
    assert list(dataset.iter_traced_files()) == [t.file_path for t in theorems[:5]]


@pytest.mark.parametrize(
    ("mutate", "field", "words"),
    [
        (lambda t: t.pop("full_name"), "full_name", "missing field"),
        (lambda t: t.update(start="419:1"), "start", "tuple"),
        (lambda t: t.update(traced_tactics=None), "traced_tactics", "tuple"),
        (
            lambda t: t["traced_tactics"][0].pop("state_before"),
            "traced_tactics.0.state_before",
            "missing field",
        ),
        (lambda t: t["traced_tactics"][0].update(tactic=7), "traced_tactics.0.tactic", "string"),
        (
            lambda t: t["traced_tactics"][0]["annotated_tactic"][1][0].update(def_pos=[1]),
            "traced_tactics.0.annotated_tactic.premises.0.def_pos.1",
            "missing field",
        ),
    ],
)
def test_wrong_schema_names_item_and_field(sample_dir, tmp_path, mutate, field, words):
    raw = json.loads((sample_dir / "random" / "test.json").read_text())
    index = next(
        i
        for i, t in enumerate(raw)
        if t["traced_tactics"] and t["traced_tactics"][0]["annotated_tactic"][1]
    )
    mutate(raw[index])
    path = tmp_path / "random" / "train.json"
    path.parent.mkdir()
    path.write_text(json.dumps(raw))
    with pytest.raises(DataFormatError) as err:
        list(LeanDojoDataset(path).iter_theorems())
    assert err.value.item == index and err.value.field == field
    assert words in err.value.problem
    assert str(path) in str(err.value)


def test_corpus_line_errors(tmp_path):
    path = tmp_path / "corpus.jsonl"
    path.write_text(
        '{"path": "A.lean", "imports": [], "premises": []}\n'
        '{"path": "B.lean", "premises": [{"full_name": "x", "start": [1, 1]}]}\n'
    )
    with pytest.raises(DataFormatError) as err:
        list(LeanDojoDataset(path).iter_source_files())
    assert err.value.line == 2 and err.value.field == "premises.0.end"
    assert source_file_from_corpus({"path": "A.lean"}).imports == ()


def test_not_a_dataset(tmp_path):
    with pytest.raises(DataFormatError, match="no such file"):
        LeanDojoDataset(tmp_path / "absent")
    with pytest.raises(DataFormatError, match="not a LeanDojo-format dataset"):
        LeanDojoDataset(tmp_path)
    other = tmp_path / "notes.txt"
    other.write_text("x")
    with pytest.raises(DataFormatError, match="not a LeanDojo-format file"):
        LeanDojoDataset(other)


def test_copy_of_sample_keeps_metadata(sample_dir, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(sample_dir, copy)
    assert LeanDojoDataset(copy).repository.name == "leanprover-community/mathlib4"
