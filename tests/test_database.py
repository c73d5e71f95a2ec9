"""DynamicDatabase on the real LeanDojo sample; every test runs on SQLite and on PostgreSQL."""

from __future__ import annotations

import hashlib
import json
import socket
import sqlite3
from pathlib import Path

import pytest

from leanloop.data.leandojo import LeanDojoDataset, theorem_to_leandojo
from leanloop.data.records import Repository, TheoremStatus
from leanloop.database import DynamicDatabase, SplitConfig
from leanloop.database.ingest import Ingest
from leanloop.errors import DatabaseError, DataFormatError, LeanloopError
from tests.helpers import (
    corpus_from_theorems,
    moved,
    renamed,
    sample_theorems,
    with_sorry,
    write_dataset,
)

MATHLIB = "https://github.com/leanprover-community/mathlib4"
OTHER = "https://github.com/example/other-project"


def read_splits(root: Path) -> dict[str, dict[str, str]]:
    """scheme -> theorem full name -> split, from an exported dataset."""
    result: dict[str, dict[str, str]] = {}
    for scheme in ("random", "novel_premises"):
        result[scheme] = {}
        for split in ("train", "val", "test"):
            for t in json.loads((root / scheme / f"{split}.json").read_text()):
                name = f"{t['url']}::{t['full_name']}"
                assert name not in result[scheme], f"{name} is in two splits of {scheme}"
                result[scheme][name] = split
    return result


def premises_by_theorem(root: Path, scheme: str) -> dict[str, tuple[str, set[str]]]:
    out = {}
    for split in ("train", "val", "test"):
        for t in json.loads((root / scheme / f"{split}.json").read_text()):
            used = {p["full_name"] for s in t["traced_tactics"] for p in s["annotated_tactic"][1]}
            out[f"{t['url']}::{t['full_name']}"] = (split, used)
    return out


def test_import_export_reimport_preserves_everything(db, sample_dir, tmp_path):
    counts = db.import_leandojo(sample_dir)
    assert (counts.theorems_added, counts.tactics_added, counts.repositories_added) == (177, 435, 1)
    report = db.export_merged_data(db.get_repositories(), tmp_path / "out")
    assert report.theorems == 177

    again = DynamicDatabase(tmp_path / "again.db")
    assert again.import_leandojo(tmp_path / "out").theorems_added == 177
    original = {t.full_name: theorem_to_leandojo(t) for t in sample_theorems(sample_dir)}
    for database in (db, again):
        stored = {t.full_name: theorem_to_leandojo(t) for t in database.get_theorems()}
        assert stored == original  # every theorem, tactic, state and premise reference
    exported = LeanDojoDataset(tmp_path / "out")
    assert exported.complete_schemes() == ["random", "novel_premises"]
    assert exported.repository() == Repository(url=MATHLIB, commit=report_commit(sample_dir))


def report_commit(sample_dir):
    return LeanDojoDataset(sample_dir).repository().commit


def test_keep_splits_reproduces_the_original_file_byte_for_byte(db, sample_dir, tmp_path):
    db.import_leandojo(sample_dir, keep_splits=True)
    report = db.export_merged_data(db.get_repositories(), tmp_path / "out")
    assert report.split_sizes["random"] == {"train": 0, "val": 0, "test": 177}
    assert (tmp_path / "out" / "random" / "test.json").read_bytes() == (
        sample_dir / "random" / "test.json"
    ).read_bytes()


def test_corpus_and_traced_files_round_trip(db, sample_dir, tmp_path):
    theorems = sample_theorems(sample_dir)
    corpus = corpus_from_theorems(theorems)
    traced = sorted({t.file_path for t in theorems})[:10]
    source = write_dataset(
        tmp_path / "src",
        {"random/test": theorems},
        corpus=corpus,
        traced=traced,
        metadata={"from_repo": {"url": MATHLIB, "commit": theorems[0].commit}},
    )
    counts = db.import_leandojo(source)
    assert counts.files_added == len(corpus)
    assert counts.premises_added == sum(len(c["premises"]) for c in corpus)
    some = corpus[3]
    premises = db.get_premises(file_path=some["path"])
    assert [p.full_name for p in premises] == [p["full_name"] for p in some["premises"]]
    db.export_merged_data(db.get_repositories(), tmp_path / "out")
    lines = (tmp_path / "out" / "corpus.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == corpus
    traced_out = [
        json.loads(line)["traced_file_path"]
        for line in (tmp_path / "out" / "traced_files.jsonl").read_text().splitlines()
    ]
    assert traced_out == traced


def test_split_invariants(db, sample_dir, tmp_path):
    db.import_leandojo(sample_dir)
    db.export_merged_data(
        db.get_repositories(), tmp_path / "out", split_config=SplitConfig(val=0.1, test=20, seed=1)
    )
    splits = read_splits(tmp_path / "out")  # also asserts no theorem is in two splits
    for scheme in splits:
        assert len(splits[scheme]) == 177
    random_sizes = {s: list(splits["random"].values()).count(s) for s in ("val", "test")}
    assert random_sizes == {"val": 18, "test": 20}
    novel = premises_by_theorem(tmp_path / "out", "novel_premises")
    train_used = set().union(*(used for split, used in novel.values() if split == "train"))
    held_out = [(name, used) for name, (split, used) in novel.items() if split != "train"]
    assert len([1 for split, _ in novel.values() if split == "val"]) == 18
    assert len(held_out) >= 38
    for name, used in held_out:
        assert used - train_used, f"{name} uses no premise unseen in train"


def test_splits_never_change_when_repositories_are_added(db, sample_dir, tmp_path):
    theorems = sample_theorems(sample_dir)
    db.import_leandojo(sample_dir)
    first = db.get_repositories()
    db.export_merged_data(first, tmp_path / "step1")
    before = read_splits(tmp_path / "step1")

    other = [renamed(t, "_other", url=OTHER, commit="c0ffee") for t in theorems]
    db.add_repository(Repository(url=OTHER, commit="c0ffee"), other)
    both = db.get_repositories()
    assert len(both) == 2
    db.export_merged_data(both, tmp_path / "step2")
    after = read_splits(tmp_path / "step2")
    for scheme in before:
        for name, split in before[scheme].items():
            assert after[scheme][name] == split, f"{name} moved in {scheme}"
        assert len(after[scheme]) == 354
    sizes = {s: list(after["random"].values()).count(s) for s in ("val", "test")}
    assert sizes == {"val": 35, "test": 35}
    novel = premises_by_theorem(tmp_path / "step2", "novel_premises")
    train_used = set().union(*(used for split, used in novel.values() if split == "train"))
    for name, (split, used) in novel.items():
        if split != "train":
            assert used - train_used, name


def test_split_assignment_is_deterministic(sample_dir, tmp_path):
    outputs = []
    for run in range(2):
        database = DynamicDatabase(tmp_path / f"db{run}.db")
        database.import_leandojo(sample_dir)
        database.export_merged_data(
            database.get_repositories(), tmp_path / f"out{run}", split_config=SplitConfig(seed=99)
        )
        outputs.append(tmp_path / f"out{run}")
    for scheme in ("random", "novel_premises"):
        for split in ("train", "val", "test"):
            rel = Path(scheme) / f"{split}.json"
            assert (outputs[0] / rel).read_bytes() == (outputs[1] / rel).read_bytes()


def test_import_is_idempotent(db, sample_dir, tmp_path):
    db.import_leandojo(sample_dir)
    before = db.stats()
    counts = db.import_leandojo(sample_dir)
    assert (counts.theorems_added, counts.theorems_skipped, counts.repositories_added) == (
        0,
        177,
        0,
    )
    assert db.stats() == before
    repo = db.get_repositories()[0]
    again = db.add_repository(repo, db.get_theorems())
    assert again.theorems_added == 0 and db.stats() == before


def test_new_commit_adds_what_is_new_and_closes_sorries(db, sample_dir, tmp_path):
    theorems = [t for t in sample_theorems(sample_dir) if t.traced_tactics][:20]
    old_commit = [moved(t, url=OTHER, commit="old") for t in theorems[:15]]
    old_commit[0] = with_sorry(old_commit[0])
    old_commit[1] = with_sorry(old_commit[1])
    db.add_repository(Repository(url=OTHER, commit="old"), old_commit)
    assert {t.full_name for t in db.get_sorry_theorems()} == {
        theorems[0].full_name,
        theorems[1].full_name,
    }

    new_commit = [moved(t, url=OTHER, commit="new") for t in theorems]  # 5 more; sorry 0 proved
    new_commit[1] = with_sorry(new_commit[1])
    counts = db.add_repository(Repository(url=OTHER + ".git", commit="new"), new_commit)
    assert counts.theorems_added == 20 and counts.sorries_resolved == 1
    assert counts.repositories_added == 1  # same repository (".git" ignored), new commit
    old_repo = db.get_repository(OTHER, "old")
    proved = db.get_theorems(old_repo, status=TheoremStatus.SORRY_PROVED)
    assert [t.full_name for t in proved] == [theorems[0].full_name]
    assert proved[0].proof == "\n".join(s.tactic for s in theorems[0].traced_tactics)
    still_open = {(t.commit, t.full_name) for t in db.get_sorry_theorems()}
    assert still_open == {("old", theorems[1].full_name), ("new", theorems[1].full_name)}


def test_one_import_holding_two_commits_closes_sorries(db, sample_dir, tmp_path):
    theorems = [t for t in sample_theorems(sample_dir) if t.traced_tactics][:2]
    old_commit = [with_sorry(moved(t, url=OTHER, commit="old")) for t in theorems[:2]]
    new_commit = [moved(t, url=OTHER, commit="new") for t in theorems[:2]]  # the same files
    root = write_dataset(tmp_path / "both", {"random/test": [*old_commit, *new_commit]})
    counts = db.import_leandojo(root / "random" / "test.json")
    assert counts.sorries_resolved == 2
    old_repo = db.get_repository(OTHER, "old")
    assert len(db.get_theorems(old_repo, status=TheoremStatus.SORRY_PROVED)) == 2
    assert not db.get_sorry_theorems()


def test_export_takes_latest_commit_and_keeps_split(db, sample_dir, tmp_path):
    theorems = sample_theorems(sample_dir)[:60]
    db.add_repository(
        Repository(url=OTHER, commit="v1"), [moved(t, url=OTHER, commit="v1") for t in theorems]
    )
    db.export_merged_data([(OTHER, "v1")], tmp_path / "v1")
    db.add_repository(
        Repository(url=OTHER, commit="v2"), [moved(t, url=OTHER, commit="v2") for t in theorems]
    )
    db.export_merged_data([(OTHER, "v1"), (OTHER, "v2")], tmp_path / "v2")
    assert read_splits(tmp_path / "v1") == read_splits(tmp_path / "v2")
    commits = {
        t["commit"]
        for s in ("train", "val", "test")
        for t in json.loads((tmp_path / "v2" / "random" / f"{s}.json").read_text())
    }
    assert commits == {"v2"}
    # a curriculum may list the older commit last: the commit added last still wins
    db.export_merged_data([(OTHER, "v2"), (OTHER, "v1")], tmp_path / "v3")
    commits = {
        t["commit"]
        for s in ("train", "val", "test")
        for t in json.loads((tmp_path / "v3" / "random" / f"{s}.json").read_text())
    }
    assert commits == {"v2"}


def test_interrupted_import_leaves_database_as_it_was(db, sample_dir, tmp_path):
    db.import_leandojo(sample_dir)
    before = db.stats()
    theorems = [renamed(t, "_b", url=OTHER, commit="b") for t in sample_theorems(sample_dir)]
    source = write_dataset(tmp_path / "bad", {"random/train": theorems, "random/val": theorems})
    val = source / "random" / "val.json"
    val.write_text(val.read_text()[:-500])  # the second file is truncated near its end
    with pytest.raises(DataFormatError, match=r"val\.json"):
        db.import_leandojo(source, batch_size=50)
    assert db.stats() == before
    assert db.get_repository(OTHER, "b") is None


def test_failure_mid_write_rolls_back(db, sample_dir, monkeypatch):
    calls = {"n": 0}
    original = Ingest.add_theorems

    def failing(self, repo_id, batch):
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("disk full")
        return original(self, repo_id, batch)

    monkeypatch.setattr(Ingest, "add_theorems", failing)
    with pytest.raises(RuntimeError, match="disk full"):
        db.import_leandojo(sample_dir, batch_size=40)
    assert calls["n"] == 3
    assert db.get_repositories() == [] and db.get_theorems() == []


def test_queries(db, sample_dir):
    db.import_leandojo(sample_dir)
    repo = db.get_repositories()[0]
    assert db.get_repository(MATHLIB + "/", repo.commit) == repo
    assert db.get_repository(MATHLIB, "deadbeef") is None
    in_file = db.get_theorems(repo, file_path="Mathlib/Data/Set/Lattice.lean")
    assert len(in_file) == 3 and all(t.file_path.endswith("Lattice.lean") for t in in_file)
    light = db.get_theorems(repo, with_tactics=False)
    assert len(light) == 177 and all(t.traced_tactics == () for t in light)
    assert len(db.get_theorems(status="proven")) == 177
    with pytest.raises(LeanloopError, match="not in the database"):
        db.get_theorems((MATHLIB, "deadbeef"))


def test_record_proof(db, sample_dir):
    theorems = [t for t in sample_theorems(sample_dir) if t.traced_tactics][:3]
    repo = Repository(url=OTHER, commit="x")
    db.add_repository(repo, [with_sorry(moved(t, url=OTHER, commit="x")) for t in theorems])
    target = db.get_sorry_theorems()[0]
    db.record_proof(target, "simp")
    assert len(db.get_sorry_theorems()) == 2
    done = db.get_theorems(repo, status="sorry_proved")
    assert [(t.full_name, t.proof) for t in done] == [(target.full_name, "simp")]
    with pytest.raises(LeanloopError, match="not an open sorry"):
        db.record_proof(target, "simp")


def test_curriculum(db, sample_dir):
    theorems = sample_theorems(sample_dir)
    easy = [moved(t, url=OTHER, commit="e") for t in theorems if 0 < t.num_steps <= 1]
    hard = [moved(t, url=MATHLIB, commit="h") for t in theorems if t.num_steps >= 4]
    db.add_repository(Repository(url=MATHLIB, commit="h"), hard)
    db.add_repository(Repository(url=OTHER, commit="e"), easy)
    ordered = db.sort_repositories_by_difficulty()
    assert [r.commit for r in ordered] == ["e", "h"]
    ranked, limits = db.curriculum()
    steps = sorted(t.num_steps for t in easy + hard)
    assert limits.easy_max == pytest.approx(numpy_percentile(steps, 33))
    assert limits.medium_max == pytest.approx(numpy_percentile(steps, 67))
    assert ranked[0][1].counts == {"Easy": len(easy)}
    assert sum(ranked[1][1].counts.values()) == len(hard) and "Easy" not in ranked[1][1].counts


def numpy_percentile(values, q):
    rank = q / 100 * (len(values) - 1)
    low = int(rank)
    high = min(low + 1, len(values) - 1)
    return values[low] + (rank - low) * (values[high] - values[low])


def test_empty_database(db, tmp_path):
    assert db.get_repositories() == []
    assert db.sort_repositories_by_difficulty() == []
    assert db.stats().theorems == 0
    with pytest.raises(LeanloopError, match="no repositories"):
        db.export_merged_data([], tmp_path / "out")


def test_delete_repository_keeps_split_assignments(db, sample_dir, tmp_path):
    db.import_leandojo(sample_dir)
    repo = db.get_repositories()[0]
    db.export_merged_data([repo], tmp_path / "a")
    db.delete_repository(repo.url, repo.commit)
    assert db.get_repositories() == [] and db.get_theorems() == []
    db.import_leandojo(sample_dir)
    db.export_merged_data(db.get_repositories(), tmp_path / "b")
    assert read_splits(tmp_path / "a") == read_splits(tmp_path / "b")


# -- SQLite-specific guarantees ------------------------------------------------------------------


def digest(path: Path) -> tuple[str, float]:
    return hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns


def test_opening_and_reading_never_alters_the_file(sample_dir, tmp_path):
    path = tmp_path / "kept.db"
    DynamicDatabase(path).import_leandojo(sample_dir)
    before = digest(path)
    database = DynamicDatabase(path)
    database.get_repositories()
    database.stats()
    database.get_theorems()
    database.get_sorry_theorems()
    database.close()
    assert digest(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.db"]


def test_reading_a_missing_database_creates_nothing(tmp_path):
    database = DynamicDatabase(tmp_path / "nothing.db")
    assert database.get_repositories() == [] and database.stats().repositories == []
    assert not (tmp_path / "nothing.db").exists()


def test_failed_first_import_leaves_no_file(tmp_path):
    bad = tmp_path / "random" / "train.json"
    bad.parent.mkdir()
    bad.write_text('[{"url": 1}]')
    database = DynamicDatabase(tmp_path / "new.db")
    with pytest.raises(DataFormatError):
        database.import_leandojo(bad)
    assert not (tmp_path / "new.db").exists()


def test_foreign_and_newer_databases_are_refused(sample_dir, tmp_path):
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE notes (x TEXT)")
    with pytest.raises(DatabaseError, match="not a leanloop database"):
        DynamicDatabase(foreign).import_leandojo(sample_dir)
    newer = tmp_path / "newer.db"
    DynamicDatabase(newer).import_leandojo(sample_dir)
    with sqlite3.connect(newer) as conn:
        conn.execute("UPDATE leanloop_meta SET value = '999' WHERE key = 'schema_version'")
    with pytest.raises(DatabaseError, match="schema version 999"):
        DynamicDatabase(newer).get_repositories()


def test_unreachable_postgres_is_a_clear_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    database = DynamicDatabase(f"postgresql://nobody:secret@127.0.0.1:{port}/x")
    with pytest.raises(DatabaseError) as err:
        database.get_repositories()
    message = str(err.value)
    assert "not usable" in message and "secret" not in message and "\n" not in message


def test_a_path_with_url_characters_is_a_path(tmp_path, sample_dir):
    path = tmp_path / "odd?name%20.db"
    db = DynamicDatabase(path)
    db.import_leandojo(sample_dir)
    assert path.is_file() and db.sqlite_path == path
    assert not (tmp_path / "odd").exists()


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        (lambda t: {"full_name": t.full_name + "\x00"}, "full_name", "NUL character"),
        (lambda t: {"statement": "\ud800"}, "statement", "lone surrogate"),
        (lambda t: {"start": (2**40, 1)}, "start.0", "outside the range"),
    ],
)
def test_records_made_in_code_that_cannot_be_stored_are_named(db, sample_dir, change, field, words):
    theorem = sample_theorems(sample_dir)[5]
    bad = theorem.model_copy(update=change(theorem))  # model_copy skips validation
    repo = Repository(url=theorem.url, commit=theorem.commit)
    with pytest.raises(LeanloopError, match=rf"cannot store theorem .*field '{field}' .*{words}"):
        db.add_repository(repo, [sample_theorems(sample_dir)[0], bad])
    assert db.get_repositories() == []  # nothing was stored, on either engine


def test_duplicates_with_other_content_are_counted_not_dropped_silently(db, sample_dir, tmp_path):
    theorems = [t for t in sample_theorems(sample_dir) if t.traced_tactics][:3]
    changed = theorems[1].model_copy(update={"traced_tactics": theorems[1].traced_tactics[:1]})
    root = write_dataset(tmp_path / "d", {"random/test": [*theorems, theorems[0], changed]})
    counts = db.import_leandojo(root)
    assert counts.theorems_added == 3
    assert counts.duplicates_conflicting == 1  # the exact repeat of theorems[0] is not counted
    assert counts.duplicate_examples == [
        f"{theorems[1].full_name} ({root / 'random' / 'test.json'}, item #4)"
    ]
    stored = {t.full_name: t for t in db.get_theorems()}
    assert stored[theorems[1].full_name].traced_tactics == theorems[1].traced_tactics  # first kept
