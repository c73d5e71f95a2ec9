from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from leanloop.atomic import remove_stale_staging
from leanloop.data.leandojo import LeanDojoDataset, LeanDojoWriter, theorem_to_leandojo
from leanloop.data.leandojo.format import source_file_from_corpus, source_file_to_corpus
from leanloop.errors import DataFormatError, LeanloopError
from tests.helpers import corpus_from_theorems, sample_theorems, write_dataset


def test_reads_partial_real_sample(sample_dir):
    dataset = LeanDojoDataset(sample_dir)
    assert [(f.scheme, f.split) for f in dataset.split_files] == [("random", "test")]
    assert dataset.corpus_path is None and dataset.traced_files_path is None
    assert dataset.complete_schemes() == []
    repo = dataset.repository()
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
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no staging left


@pytest.mark.parametrize("failing_call", [1, 2, 3, 4, 5, 6])
def test_a_rename_failing_midway_puts_every_entry_back(
    sample_dir, tmp_path, monkeypatch, failing_call
):
    theorems = sample_theorems(sample_dir)
    out = tmp_path / "out"
    _write_one(out, theorems[0])
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    real_replace, calls = os.replace, []

    def flaky(src, dst):
        calls.append((src, dst))
        if len(calls) == failing_call:
            raise OSError(5, "Input/output error")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", flaky)
    with pytest.raises(OSError, match="Input/output"):
        _write_one(out, theorems[1])
    monkeypatch.undo()
    after = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert after == before  # the old dataset, whole: nothing lost, nothing half-new
    assert not [p for p in out.iterdir() if p.name.startswith(".")]


def test_staging_of_a_writer_on_another_machine_is_left_alone(sample_dir, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    # process 999999 does not run here, but the name says another host wrote it: not ours to judge
    elsewhere = out / ".leanloop.999999-00000000-0123456789ab.new"
    elsewhere.mkdir()
    beside = tmp_path / ".checkpoints.999999-00000000-0123456789ab.new"
    beside.mkdir()
    _write_one(out, sample_theorems(sample_dir)[0])
    assert elsewhere.exists()
    assert remove_stale_staging(out) == [] and beside.exists()
    old = time.time() - 2 * 3600
    os.utime(elsewhere, (old, old))
    assert remove_stale_staging(out) == [elsewhere]


def _write_one(out: Path, theorem) -> None:
    with LeanDojoWriter(out) as writer:
        writer.write_theorem(
            theorem_to_leandojo(theorem), {"random": "train", "novel_premises": "train"}
        )


def test_writer_replaces_only_the_dataset_entries(sample_dir, tmp_path):
    theorems = sample_theorems(sample_dir)
    out = tmp_path / "mine"
    (out / "checkpoints").mkdir(parents=True)
    (out / "checkpoints" / "model.bin").write_text("weights")
    (out / "notes.txt").write_text("keep me")
    (out / "README.md").write_text("my dataset")
    inode = out.stat().st_ino
    _write_one(out, theorems[0])
    _write_one(out, theorems[1])  # and again, over the first export
    assert (out / "notes.txt").read_text() == "keep me"
    assert (out / "README.md").read_text() == "my dataset"
    assert (out / "checkpoints" / "model.bin").read_text() == "weights"
    assert out.stat().st_ino == inode  # the directory itself never moves (safe for '.')
    train = json.loads((out / "random" / "train.json").read_text())
    assert [t["full_name"] for t in train] == [theorems[1].full_name]
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [
            "checkpoints",
            "notes.txt",
            "README.md",
            "random",
            "novel_premises",
            "corpus.jsonl",
            "traced_files.jsonl",
        ]
    )


@pytest.mark.parametrize(
    ("prepare", "named"),
    [
        (
            lambda out: (out / "random").mkdir() or (out / "random" / "notes.txt").write_text("x"),
            "notes.txt",
        ),
        (lambda out: (out / "random").mkdir() or (out / "random" / "keep").mkdir(), "keep"),
        (lambda out: (out / "corpus.jsonl").mkdir(), "corpus.jsonl"),
        (lambda out: (out / "random").write_text("a file"), "random"),
    ],
)
def test_writer_refuses_entries_holding_something_else(sample_dir, tmp_path, prepare, named):
    out = tmp_path / "out"
    out.mkdir()
    prepare(out)
    before = sorted(str(p.relative_to(out)) for p in out.rglob("*"))
    with pytest.raises(LeanloopError, match=f"refusing.*{named}"):
        _write_one(out, sample_theorems(sample_dir)[0])
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == before


def test_stale_staging_of_killed_writers_is_removed(sample_dir, tmp_path):
    import os
    import subprocess
    import sys
    import time

    out = tmp_path / "out"
    out.mkdir()
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    dead_pid = int(gone.stdout)
    stale = out / f".leanloop.{dead_pid}-0123456789ab.new"
    (stale / "random").mkdir(parents=True)
    (stale / "random" / "train.json").write_text("[]")
    running = out / f".leanloop.{os.getppid()}-0123456789ab.new"  # a live writer's
    running.mkdir()
    legacy = tmp_path / ".out.0123456789ab.new"  # an older version's, beside the target
    legacy.mkdir()
    old = time.time() - 2 * 3600
    os.utime(legacy, (old, old))
    _write_one(out, sample_theorems(sample_dir)[0])
    assert not stale.exists() and running.exists()
    from leanloop.atomic import remove_stale_staging

    assert remove_stale_staging(tmp_path) == [legacy] and not legacy.exists()


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
    assert LeanDojoDataset(copy).repository().name == "leanprover-community/mathlib4"


def test_json_text_encoders_write_what_the_dict_builders_give(sample_dir):
    from leanloop.data.leandojo.format import encode_premise_ref, encode_tactic, encode_theorem

    theorems = sample_theorems(sample_dir)
    with_statement = theorems[3].model_copy(update={"statement": "theorem x : ∀ n, n = n"})
    for theorem in [*theorems, with_statement]:
        tactics = [
            encode_tactic(
                t.tactic,
                t.annotated_tactic.text,
                [
                    encode_premise_ref(p.full_name, p.def_path, p.def_pos, p.def_end_pos)
                    for p in t.premises
                ],
                t.state_before,
                t.state_after,
            )
            for t in theorem.traced_tactics
        ]
        text = encode_theorem(
            theorem.url,
            theorem.commit,
            theorem.file_path,
            theorem.full_name,
            theorem.start,
            theorem.end,
            tactics,
            theorem.statement,
        )
        assert text == json.dumps(theorem_to_leandojo(theorem))
