"""LeanDojo-v2's own files read whole: its database file (``DynamicDatabase(json_path=...)``,
``from_json``, ``leanloop db import``), its export whose ``metadata.json`` lists ``repositories``
(premises on their own repositories, Lean versions kept, splits kept), the format named in what
``db import`` says, and its YAML configurations. The expected counts are read from the files."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections import defaultdict
from pathlib import Path

import pytest
import sqlalchemy as sa
import yaml

from leanloop.data import open_dataset
from leanloop.data.leandojo.format import SCHEMES, SPLITS
from leanloop.data.records import TheoremStatus, repository_identity
from leanloop.database import DynamicDatabase
from leanloop.database.schema import split_assignments
from leanloop.errors import DatabaseError, DataFormatError, LeanloopError
from leanloop.prover.config import ProverConfig
from leanloop.trainer.retrieval_config import TrainingConfig
from tests.helpers import assert_one_line_error, run_cli

LISTS = {
    "proven_theorems": TheoremStatus.PROVEN,
    "sorry_theorems_unproved": TheoremStatus.SORRY,
    "sorry_theorems_proved": TheoremStatus.SORRY_PROVED,
}


@pytest.fixture(scope="module")
def v2(fixtures) -> Path:
    return fixtures / "leandojo_v2_files"


@pytest.fixture(scope="module")
def v2_json(v2) -> dict:
    """LeanDojo-v2's database file as LeanDojo-v2 reads it (json.load: it writes Infinity)."""
    return json.loads((v2 / "dynamic_database.json").read_text(encoding="utf-8"))


def pos(text: str) -> tuple[int, int]:
    line, column = text.strip("()").split(",")
    return int(line), int(column)


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def premise_sets(database: DynamicDatabase) -> dict[str, set[tuple[str, str]]]:
    return {
        r.identity: {(p.file_path, p.full_name) for p in database.get_premises(r)}
        for r in database.get_repositories()
    }


def test_the_database_file_imports_every_repository_theorem_premise_and_file(v2, v2_json, tmp_path):
    source = v2 / "dynamic_database.json"
    before = sha(source)
    db = DynamicDatabase(tmp_path / "lean.db", json_path=source)
    assert db.json_path == source
    assert sha(source) == before  # read, never written (LeanDojo-v2 emptied it here)

    stored = {(r.identity, r.commit): r for r in db.get_repositories()}
    assert len(stored) == len(v2_json["repositories"])
    for raw in v2_json["repositories"]:
        repository = stored[repository_identity(raw["url"]), raw["commit"]]
        assert (repository.name, repository.lean_version) == (raw["name"], raw["lean_version"])
        theorems = {(t.file_path, t.full_name): t for t in db.get_theorems(repository)}
        expected = {
            (t["file_path"], t["full_name"]): (t, status)
            for name, status in LISTS.items()
            for t in raw[name]
        }
        assert theorems.keys() == expected.keys()
        assert sum(len(raw[name]) for name in LISTS) == raw["total_theorems"] == len(theorems)
        for key, (t, status) in expected.items():
            got = theorems[key]
            assert got.status is status and got.statement == t["theorem_statement"]
            assert (got.start, got.end) == (pos(t["start"]), pos(t["end"]))
            assert [s.tactic for s in got.traced_tactics] == [
                s["tactic"] for s in t["traced_tactics"]
            ]
            refs = [
                (p["full_name"], p["def_path"], pos(p["def_pos"]), pos(p["def_end_pos"]))
                for s in t["traced_tactics"]
                for p in s["annotated_tactic"][1]
            ]
            assert [
                (p.full_name, p.def_path, tuple(p.def_pos), tuple(p.def_end_pos))
                for s in got.traced_tactics
                for p in s.premises
            ] == refs
        premises = {
            (f["path"], p["full_name"]): p for f in raw["premise_files"] for p in f["premises"]
        }
        assert len(premises) == raw["num_premises"]
        got_premises = {(p.file_path, p.full_name): p for p in db.get_premises(repository)}
        assert got_premises.keys() == premises.keys()
        for key, p in premises.items():
            assert (got_premises[key].start, got_premises[key].end) == (
                pos(p["start"]),
                pos(p["end"]),
            )
            assert (got_premises[key].code, got_premises[key].kind) == (p["code"], p["kind"])
    stats = {(r.url, r.commit): r for r in db.stats().repositories}
    for raw in v2_json["repositories"]:
        files = {f["path"] for f in raw["premise_files"]} | set(raw["files_traced"])
        assert stats[raw["url"], raw["commit"]].files == len(files)

    # again: nothing added; the classmethod form gives the same database
    counts = db.import_dataset(source)
    assert counts.theorems_added == 0 and counts.theorems_skipped == len(db.get_theorems())
    again = DynamicDatabase.from_json(source, tmp_path / "other.db")
    assert premise_sets(again) == premise_sets(db)
    assert len(again.get_theorems()) == len(db.get_theorems())
    with pytest.raises(DataFormatError, match="no such file"):
        DynamicDatabase.from_json(tmp_path / "missing.json", tmp_path / "x.db")
    # a json_path that does not exist yet imports nothing and creates no file
    assert DynamicDatabase(tmp_path / "y.db", json_path=tmp_path / "new.json").get_theorems() == []
    assert not (tmp_path / "new.json").exists()


def test_the_database_file_is_not_mistaken_for_a_database_leanloop_stores_in(v2, tmp_path):
    with pytest.raises(DatabaseError, match=r"LeanDojo-v2 database file.*json_path"):
        DynamicDatabase(v2 / "dynamic_database.json")


@pytest.mark.parametrize("order", ["as written", "reversed"])
def test_an_export_keeps_each_premise_on_its_repository_with_lean_versions_and_splits(
    v2, v2_json, tmp_path, order
):
    """LeanDojo-v2's merged corpus does not say whose each file is; with the repositories
    listed the other way round too (export_merged_data([b, a], ...)), no file moves."""
    export = v2 / "export_merged_data"
    if order == "reversed":
        export = Path(shutil.copytree(export, tmp_path / "export"))
        metadata = json.loads((export / "metadata.json").read_text())
        metadata["repositories"].reverse()
        (export / "metadata.json").write_text(json.dumps(metadata))
    metadata = json.loads((export / "metadata.json").read_text())
    assert "from_repo" not in metadata  # LeanDojo-v2's layout: a list of repositories
    db = DynamicDatabase(tmp_path / "lean.db")
    counts = db.import_dataset(export, keep_splits=True)

    listed = {(repository_identity(r["url"]), r["commit"]): r for r in metadata["repositories"]}
    stored = {(r.identity, r.commit): r for r in db.get_repositories()}
    assert stored.keys() == listed.keys()
    for key, raw in listed.items():
        assert (stored[key].lean_version, stored[key].name) == (raw["lean_version"], raw["name"])

    keys: dict[str, set] = defaultdict(set)
    labels: dict[tuple[str, str], str] = {}
    for scheme in SCHEMES:
        for split in SPLITS:
            for t in json.loads((export / scheme / f"{split}.json").read_text()):
                keys[repository_identity(t["url"])].add((t["file_path"], t["full_name"]))
                labels[t["url"], t["file_path"], t["full_name"], scheme] = split
    assert counts.theorems_added == sum(len(k) for k in keys.values())
    for repository in db.get_repositories():
        got = {(t.file_path, t.full_name) for t in db.get_theorems(repository)}
        assert got == keys[repository.identity]

    corpus = [json.loads(line) for line in (export / "corpus.jsonl").read_text().splitlines()]
    assert counts.premises_added == sum(len(f["premises"]) for f in corpus)
    # every premise on the repository whose corpus had it, as LeanDojo-v2's database says
    truth = {
        repository_identity(r["url"]): {
            (f["path"], p["full_name"]) for f in r["premise_files"] for p in f["premises"]
        }
        for r in v2_json["repositories"]
    }
    assert premise_sets(db) == truth
    traced = {
        json.loads(line)["traced_file_path"] for line in (export / "traced_files.jsonl").open()
    }
    files_traced = {
        repository_identity(r["url"]): set(r["files_traced"]) for r in v2_json["repositories"]
    }
    assert traced == set().union(*files_traced.values())
    stats = {repository_identity(r.url): r for r in db.stats().repositories}
    for identity, files in files_traced.items():  # each traced file on its repository
        assert stats[identity].files == len(files | {path for path, _ in truth[identity]})

    # the splits the export had are the splits a new export writes
    out = tmp_path / "again"
    db.export_merged_data(db.sort_repositories_by_difficulty(), out)
    relabelled = {}
    for scheme in SCHEMES:
        for split in SPLITS:
            for t in json.loads((out / scheme / f"{split}.json").read_text()):
                relabelled[t["url"], t["file_path"], t["full_name"], scheme] = split
    proven = {(t.url, t.file_path, t.full_name) for t in db.get_theorems(status="proven")}
    assert relabelled == {k: v for k, v in labels.items() if k[:3] in proven}  # sorries: not
    with db.transaction() as conn:  # exported, their labels kept all the same
        stored = conn.execute(sa.select(sa.func.count()).select_from(split_assignments)).scalar()
    assert stored == len(labels) == counts.split_labels_added


def test_db_import_names_the_format_it_read(v2, tmp_path, capsys):
    db = tmp_path / "lean.db"
    code, out, _ = run_cli(capsys, "db", "import", v2 / "dynamic_database.json", "--db", db)
    assert code == 0 and "imported a LeanDojo-v2 database (DynamicDatabase.to_json)" in out
    code, out, _ = run_cli(capsys, "db", "import", v2 / "export_merged_data", "--db", db)
    assert code == 0 and "imported a LeanDojo-v2 export (export_merged_data" in out
    assert "0 theorems (" in out  # the database file held them all
    code, out, _ = run_cli(
        capsys, "db", "import", v2 / "export_merged_data" / "random" / "val.json", "--db", db
    )
    assert code == 0 and "imported a LeanDojo split file" in out

    other = tmp_path / "other.json"
    other.write_text('{"theorems": []}\n')
    code, _, err = run_cli(capsys, "db", "import", other, "--db", db)
    assert_one_line_error(code, err, "other.json", "neither a LeanDojo split file", "LeanDojo-v2")
    broken = tmp_path / "dynamic_database.json"
    data = json.loads((v2 / "dynamic_database.json").read_text())
    data["repositories"][1]["proven_theorems"][0]["start"] = "(3 1)"
    broken.write_text(json.dumps(data))
    code, _, err = run_cli(capsys, "db", "import", broken, "--db", tmp_path / "b.db")
    assert_one_line_error(
        code,
        err,
        "field 'repositories.1.proven_theorems.0.start'",
        "read as a LeanDojo-v2 database",
    )
    assert (
        not (tmp_path / "b.db").exists() or DynamicDatabase(tmp_path / "b.db").get_theorems() == []
    )
    assert open_dataset(v2 / "export_merged_data").repository() is None


@pytest.mark.parametrize("name", ["ldv2_training.yaml", "ldv2_prover.yaml", "ldv2_both.yaml"])
def test_leandojo_v2_configuration_files_load_field_by_field(v2, name):
    data = yaml.safe_load((v2 / name).read_text())
    parts = data if set(data) <= {"training", "prover"} else None
    training = parts.get("training") if parts else (data if "lambda_value" in data else None)
    prover = parts.get("prover") if parts else (data if "num_sampled_tactics" in data else None)
    assert training is not None or prover is not None
    if training is not None:
        config = TrainingConfig.from_yaml(v2 / name)
        for field, value in training.items():
            assert getattr(config, field) == value, field
    if prover is not None:
        config = ProverConfig.from_yaml(v2 / name)
        for field, value in prover.items():
            assert getattr(config, field) == value, field


def test_a_repository_too_small_for_the_default_fractions_exports_with_a_warning(v2, tmp_path):
    """LeanDojo-v2's example repository holds one proven theorem: the default val/test
    fractions round to none, which a trainer's first curriculum step must accept (LeanDojo-v2
    left them empty); sizes given explicitly are still refused."""
    from leanloop.database import SplitConfig

    db = DynamicDatabase(tmp_path / "lean.db", json_path=v2 / "dynamic_database.json")
    small = next(r for r in db.get_repositories() if r.name == "durant42040/lean4-example")
    proven = len(db.get_theorems(small, status="proven"))
    with pytest.raises(LeanloopError, match="leave val and test of 'random' empty"):
        db.export_merged_data([small], tmp_path / "given", split_config=SplitConfig())
    report = db.export_merged_data([small], tmp_path / "default")
    assert report.split_sizes["random"] == {"train": proven, "val": 0, "test": 0}
    assert any("too few for val=0.1, test=0.1" in w for w in report.warnings)
    # the theorems added later fill val and test
    grown = db.export_merged_data(db.get_repositories(), tmp_path / "both")
    assert grown.split_sizes["random"]["val"] > 0 and grown.split_sizes["random"]["test"] > 0
