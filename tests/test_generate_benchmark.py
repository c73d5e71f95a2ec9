"""``leanloop.generate_benchmark``, LeanDojo's entry point from repositories to a dataset: without
Lean the toolchain error comes before anything is cloned; repositories the database holds are
exported without Lean (the real sample); a local project is traced with Lean's answers replayed
from recordings, into the database kept in the output directory, and exported.

Tracing a git URL for real needs Lean and the network, neither of which is here: that path is
covered only up to the check that stops it."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

import leanloop
from leanloop.data.leandojo import LeanDojoDataset
from leanloop.database import DynamicDatabase
from leanloop.database.generate import generate_benchmark
from leanloop.errors import LeanloopError
from leanloop.lean.errors import ToolchainNotFound
from tests.helpers import sample_theorems
from tests.test_tracing import demo_project, replaying

MATHLIB = "https://github.com/leanprover-community/mathlib4"
SAMPLE_COMMIT = "29dcec074de168ac2bf835a77ef68bbe069194c5"


@pytest.fixture
def no_lean(tmp_path, monkeypatch):
    """No elan, lake, lean (nor git) on the PATH; cloning is recorded, not done."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    monkeypatch.setenv("ELAN_HOME", str(tmp_path / "elan"))
    clones = []
    monkeypatch.setattr(
        "leanloop.lean.project._from_url", lambda *args, **kwargs: clones.append(args)
    )
    return clones


@pytest.fixture
def sample_db(tmp_path, sample_dir):
    path = tmp_path / "sample.db"
    DynamicDatabase(path).import_dataset(sample_dir)
    return path


def test_it_is_a_top_level_name():
    assert leanloop.generate_benchmark is generate_benchmark
    assert "generate_benchmark" in leanloop.__all__


@pytest.mark.parametrize(
    "call",
    [
        lambda out: generate_benchmark(repos=[(MATHLIB, SAMPLE_COMMIT)], output_dir=out),
        lambda out: generate_benchmark([MATHLIB], out),  # HEAD of the remote
        # LeanDojo-v2's call: a LeanGitRepo, the destination and build_deps, by position
        lambda out: generate_benchmark(SimpleNamespace(url=MATHLIB, commit="abc123"), out, False),
    ],
)
def test_without_lean_the_toolchain_error_comes_before_any_clone(
    call, no_lean, tmp_path, monkeypatch
):
    cache = tmp_path / "cache"
    monkeypatch.setenv("LEANLOOP_CACHE_DIR", str(cache))
    with pytest.raises(ToolchainNotFound) as caught:
        call(tmp_path / "out")
    assert "no Lean toolchain" in caught.value.message and "elan" in caught.value.message
    assert "leanloop doctor" in caught.value.hint
    assert no_lean == [] and not cache.exists()  # nothing cloned, nothing cached
    assert not (tmp_path / "out").exists()  # no database made, no dataset


def test_repositories_the_database_holds_are_exported_without_lean(
    no_lean, sample_db, sample_dir, tmp_path, capsys
):
    out = tmp_path / "dataset"
    result = generate_benchmark(
        repos=[(MATHLIB, SAMPLE_COMMIT)], output_dir=out, database=sample_db
    )
    assert no_lean == [] and result.traces == [None]
    traces, theorems = result  # unpacks as LeanDojo-v2's (traced_repo, total_theorems)
    assert traces == [None] and theorems == 177 == result.export.theorems
    assert result.export.split_sizes["random"] == {"train": 141, "val": 18, "test": 18}
    written = LeanDojoDataset(out)
    assert {t.full_name for t in written.iter_theorems()} == {
        t.full_name for t in sample_theorems(sample_dir)
    }
    metadata = json.loads((out / "metadata.json").read_text())
    assert metadata["from_repo"] == {"url": MATHLIB, "commit": SAMPLE_COMMIT}
    assert not (out / "leanloop.db").exists()  # the database given was used

    # the same as 'leanloop db export' of that database
    from tests.helpers import run_cli

    code, _, err = run_cli(capsys, "db", "export", tmp_path / "cli", "--db", sample_db)
    assert code == 0, err
    for split in ("random/train.json", "novel_premises/test.json"):
        assert (out / split).read_text() == (tmp_path / "cli" / split).read_text()


def test_a_local_project_is_traced_into_the_output_directory(tmp_path, transcripts):
    project, exchanges = demo_project(tmp_path, transcripts)
    out = tmp_path / "dataset"
    options = {"server_factory": replaying(exchanges), "cache_dir": tmp_path / "cache"}
    result = generate_benchmark([str(project.root)], out, build_deps=False, **options)
    (trace,) = result.traces
    assert trace.files == 3 and trace.counts.theorems_added == 1
    assert result.database.endswith("dataset/leanloop.db")
    (theorem,) = DynamicDatabase(out / "leanloop.db").get_theorems()
    assert theorem.full_name == "ex" and theorem.status.value == "sorry"
    # the sorry is no training example; the files and their premises are the corpus
    assert result.theorems == 0
    corpus = [json.loads(line) for line in (out / "corpus.jsonl").read_text().splitlines()]
    assert sorted(f["path"] for f in corpus) == ["Calc.lean", "Def.lean", "Ex.lean"]
    assert {"f", "ex"} <= {p["full_name"] for f in corpus for p in f["premises"]}
    assert len((out / "traced_files.jsonl").read_text().splitlines()) == 3

    again = generate_benchmark([str(project.root)], out, **options)  # traces come from the cache
    assert again.traces[0].cached_files == 3 and again.traces[0].counts.theorems_added == 0


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        ({"repos": [], "output_dir": "x"}, "no repositories"),
        ({"repos": [42], "output_dir": "x"}, "repos item #0 is 42"),
        ({"repos": [(MATHLIB, 5)], "output_dir": "x"}, "repos item #0 has commit 5"),
        ({"repos": [("", "abc")], "output_dir": "x"}, "repos item #0 has no url"),
        ({"repos": [MATHLIB]}, "no output directory"),
    ],
)
def test_bad_arguments_are_one_line_before_anything_is_done(
    arguments, words, no_lean, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(LeanloopError) as caught:
        generate_benchmark(**arguments)
    assert words in caught.value.message and "\n" not in str(caught.value)
    assert list(tmp_path.iterdir()) == []  # nothing made


def test_an_output_path_the_export_would_refuse_is_refused_first(no_lean, tmp_path):
    (tmp_path / "file").write_text("not a directory")
    with pytest.raises(LeanloopError, match="is not a directory"):
        generate_benchmark([MATHLIB], tmp_path / "file")
    (tmp_path / "out" / "random").mkdir(parents=True)
    (tmp_path / "out" / "random" / "notes.txt").write_text("mine")
    with pytest.raises(LeanloopError, match=r"notes\.txt"):
        generate_benchmark([MATHLIB], tmp_path / "out")
    assert no_lean == []
