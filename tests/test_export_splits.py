"""Exports keep their promises about splits (on SQLite and PostgreSQL): copies of a theorem in
other repositories share one split, the novel-premises promise is checked again, theorems and
corpus come from one commit, settings that made the splits are recorded, and settings that
leave a split empty are refused before anything is stored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from leanloop.data.records import PremiseRef, Repository
from leanloop.database import SplitConfig
from leanloop.errors import LeanloopError
from tests.helpers import corpus_from_theorems, moved, renamed, sample_theorems, write_dataset

MATHLIB = "https://github.com/leanprover-community/mathlib4"
FORK = "https://github.com/someone/mathlib4-fork"
OTHER = "https://github.com/example/other-project"


def split_of(root: Path, scheme: str = "random") -> dict[tuple[str, str], str]:
    """(file, name) -> split; asserts each theorem is exported once."""
    found = {}
    for split in ("train", "val", "test"):
        for t in json.loads((root / scheme / f"{split}.json").read_text()):
            key = (t["file_path"], t["full_name"])
            assert key not in found, f"{key} exported twice"
            found[key] = split
    return found


def test_copies_in_another_repository_share_one_split(db, sample_dir, tmp_path):
    db.import_leandojo(sample_dir)
    original = db.get_repositories()[0]
    alone = db.export_merged_data([original], tmp_path / "alone")
    fork = Repository(url=FORK, commit="f0")
    db.add_repository(fork, [moved(t, url=FORK, commit="f0") for t in db.get_theorems()])
    both = db.export_merged_data([original, fork], tmp_path / "both")
    assert both.theorems == alone.theorems == 177 and both.copies_merged == 177
    for scheme in ("random", "novel_premises"):
        assert split_of(tmp_path / "both", scheme) == split_of(tmp_path / "alone", scheme)
    # the fork on its own gets the same splits as the original
    db.export_merged_data([fork], tmp_path / "fork")
    assert split_of(tmp_path / "fork") == split_of(tmp_path / "alone")


def test_copies_added_before_any_export_share_one_split(db, sample_dir, tmp_path):
    theorems = sample_theorems(sample_dir)
    db.import_leandojo(sample_dir)
    db.add_repository(
        Repository(url=FORK, commit="f0"), [moved(t, url=FORK, commit="f0") for t in theorems]
    )
    report = db.export_merged_data(db.get_repositories(), tmp_path / "out")
    assert report.theorems == 177
    exported = json.loads((tmp_path / "out" / "random" / "train.json").read_text())
    assert {t["url"] for t in exported} == {FORK}  # the copy added last is the one written
    db.export_merged_data([db.get_repository(MATHLIB, theorems[0].commit)], tmp_path / "orig")
    assert split_of(tmp_path / "orig") == split_of(tmp_path / "out")


def _reproved_with(theorem, refs: list[PremiseRef]):
    """The theorem with its first step also using ``refs`` (as a new commit might)."""
    first = theorem.traced_tactics[0]
    annotated = first.annotated_tactic.model_copy(
        update={"premises": (*first.annotated_tactic.premises, *refs)}
    )
    steps = (first.model_copy(update={"annotated_tactic": annotated}), *theorem.traced_tactics[1:])
    return theorem.model_copy(update={"traced_tactics": steps})


def test_a_new_commit_breaking_novel_premises_is_reported_and_repaired(db, sample_dir, tmp_path):
    theorems = [moved(t, url=OTHER, commit="v1") for t in sample_theorems(sample_dir)]
    db.add_repository(Repository(url=OTHER, commit="v1"), theorems)
    first = db.export_merged_data(db.get_repositories(), tmp_path / "v1")
    assert first.novel_premises_violations == []
    splits = split_of(tmp_path / "v1", "novel_premises")
    by_name = {t.full_name: t for t in theorems}
    train = [
        t for t in theorems if splits[t.file_path, t.full_name] == "train" and t.traced_tactics
    ]
    held = [t for t in theorems if splits[t.file_path, t.full_name] != "train"]
    train_used = {p.full_name for t in train for s in t.traced_tactics for p in s.premises}
    victim = held[0]
    novel = [p for s in victim.traced_tactics for p in s.premises if p.full_name not in train_used]
    assert novel
    v2 = [
        _reproved_with(t, novel) if t.full_name == train[0].full_name else t
        for t in (moved(t, url=OTHER, commit="v2") for t in by_name.values())
    ]
    db.add_repository(Repository(url=OTHER, commit="v2"), v2)
    report = db.export_merged_data(db.get_repositories(), tmp_path / "v2")
    assert victim.full_name in report.novel_premises_violations
    assert len(report.novel_premises_violations) >= 1
    assert split_of(tmp_path / "v2", "novel_premises") == splits  # splits never move by themselves
    assert db.reset_splits("novel_premises") == 177
    repaired = db.export_merged_data(db.get_repositories(), tmp_path / "v3")
    assert repaired.novel_premises_violations == []
    assert split_of(tmp_path / "v3", "random") == split_of(tmp_path / "v1", "random")


def _corpus_paths(root: Path) -> dict[str, list[str]]:
    lines = (root / "corpus.jsonl").read_text().splitlines()
    return {c["path"]: [p["full_name"] for p in c["premises"]] for c in map(json.loads, lines)}


def test_corpus_comes_from_the_commit_the_theorems_come_from(db, sample_dir, tmp_path):
    theorems = sample_theorems(sample_dir)[:30]
    corpus = corpus_from_theorems(theorems)
    for commit, premise in (("old", "Old.premise"), ("new", "New.premise")):
        files = [
            {
                **c,
                "premises": [
                    *c["premises"],
                    {
                        "full_name": premise,
                        "code": "",
                        "start": [1, 1],
                        "end": [1, 2],
                        "kind": "theorem",
                    },
                ],
            }
            for c in corpus
        ]
        root = write_dataset(
            tmp_path / commit,
            {"random/test": [moved(t, url=OTHER, commit=commit) for t in theorems]},
            corpus=files,
        )
        db.import_leandojo(root)
    # a curriculum may list the older commit last: theorems and corpus still come from 'new'
    report = db.export_merged_data([(OTHER, "new"), (OTHER, "old")], tmp_path / "out")
    exported = json.loads((tmp_path / "out" / "random" / "train.json").read_text())
    assert {t["commit"] for t in exported} == {"new"}
    assert all("New.premise" in names for names in _corpus_paths(tmp_path / "out").values())
    assert report.corpus_dropped == []  # commits of one repository are not "dropped"


def test_same_path_in_two_repositories_is_reported(db, sample_dir, tmp_path):
    theorems = sample_theorems(sample_dir)[:10]
    corpus = corpus_from_theorems(theorems)
    for url, commit in ((MATHLIB, "m"), (OTHER, "o")):
        root = write_dataset(
            tmp_path / commit,
            {"random/test": [moved(t, url=url, commit=commit) for t in theorems]},
            corpus=corpus,
        )
        db.import_leandojo(root)
    report = db.export_merged_data(db.get_repositories(), tmp_path / "out")
    assert len(report.corpus_dropped) == len(corpus)
    assert all("mathlib4@m" in line and "other-project@o" in line for line in report.corpus_dropped)
    again = db.export_merged_data(list(reversed(db.get_repositories())), tmp_path / "again")
    assert again.corpus_dropped == report.corpus_dropped  # whatever the order given


def test_settings_of_the_stored_splits_are_recorded_and_new_ones_warned_about(
    db, sample_dir, tmp_path
):
    db.import_leandojo(sample_dir)
    repos = db.get_repositories()
    first = db.export_merged_data(
        repos, tmp_path / "a", split_config=SplitConfig(val=5, test=7, seed=1)
    )
    assert first.warnings == []
    same = db.export_merged_data(repos, tmp_path / "a2")  # no settings given: the stored ones
    assert same.warnings == [] and same.split_sizes == first.split_sizes
    metadata = json.loads((tmp_path / "a" / "metadata.json").read_text())
    assert metadata["splits"]["random"] == {"val": 5, "test": 7, "seed": 1}
    db.add_repository(
        Repository(url=OTHER, commit="x"),
        [renamed(t, "_x", url=OTHER, commit="x") for t in sample_theorems(sample_dir)[:20]],
    )
    second = db.export_merged_data(
        db.get_repositories(), tmp_path / "b", split_config=SplitConfig(val=0.3)
    )
    assert any("val=5, test=7, seed=1" in w and "reset-splits" in w for w in second.warnings)
    metadata = json.loads((tmp_path / "b" / "metadata.json").read_text())
    assert metadata["splits"]["random"] == {"val": 5, "test": 7, "seed": 1}
    db.reset_splits()
    third = db.export_merged_data(
        db.get_repositories(), tmp_path / "c", split_config=SplitConfig(val=0.3)
    )
    assert third.warnings == [] and third.split_sizes["random"]["val"] == round(0.3 * 197)


def test_imported_labels_are_recorded_as_such(db, sample_dir, tmp_path):
    db.import_leandojo(sample_dir, keep_splits=True)
    db.export_merged_data(db.get_repositories(), tmp_path / "out")
    metadata = json.loads((tmp_path / "out" / "metadata.json").read_text())
    assert metadata["splits"]["random"] == "imported"


@pytest.mark.parametrize(("val", "test", "empty"), [(0.1, 500, "train"), (0.001, 0.1, "val")])
def test_settings_leaving_a_split_empty_are_refused_before_storing(
    db, sample_dir, tmp_path, val, test, empty
):
    db.import_leandojo(sample_dir)
    with pytest.raises(LeanloopError, match=f"leave {empty}.*empty.*nothing was stored"):
        db.export_merged_data(
            db.get_repositories(), tmp_path / "out", split_config=SplitConfig(val=val, test=test)
        )
    assert not (tmp_path / "out").exists()
    report = db.export_merged_data(db.get_repositories(), tmp_path / "ok")
    assert report.new_assignments == 2 * 177  # nothing had been stored
    assert report.split_sizes["random"] == {"train": 141, "val": 18, "test": 18}
