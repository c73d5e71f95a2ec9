"""The command line: the commands work, and bad input gives one clear line and a non-zero exit."""

from __future__ import annotations

import io
import json
import socket
import subprocess
import sys
import tarfile

import pytest

from tests.helpers import assert_one_line_error, run_cli, sample_theorems, with_sorry, write_dataset


def test_import_stats_export_sorries(capsys, sample_dir, tmp_path):
    db = str(tmp_path / "cli.db")
    code, out, _ = run_cli(capsys, "db", "import", str(sample_dir), "--db", db)
    assert code == 0 and "177 theorems" in out and "435 tactics" in out

    code, out, _ = run_cli(capsys, "db", "stats", "--db", db, "--json")
    stats = json.loads(out)
    assert code == 0 and stats["theorems"] == 177 and stats["tactics"] == 435
    assert stats["repositories"][0]["name"] == "leanprover-community/mathlib4"

    code, out, _ = run_cli(capsys, "db", "stats", "--db", db)
    assert code == 0 and "leanprover-community/mathlib4" in out and "177" in out

    code, out, _ = run_cli(
        capsys,
        "db",
        "export",
        str(tmp_path / "out"),
        "--db",
        db,
        "--repo",
        "leanprover-community/mathlib4",
        "--val",
        "10",
        "--test",
        "0.2",
    )
    assert code == 0, out
    assert len(json.loads((tmp_path / "out" / "random" / "val.json").read_text())) == 10
    assert len(json.loads((tmp_path / "out" / "random" / "test.json").read_text())) == 35

    code, out, _ = run_cli(capsys, "db", "sorries", "--db", db, "--json")
    assert code == 0 and out.strip() == ""


def test_sorries_are_listed(capsys, sample_dir, tmp_path):
    theorems = [t for t in sample_theorems(sample_dir) if t.traced_tactics][:4]
    theorems[2] = with_sorry(theorems[2])
    source = write_dataset(tmp_path / "ds", {"random/train": theorems})
    db = str(tmp_path / "s.db")
    assert run_cli(capsys, "db", "import", str(source), "--db", db)[0] == 0
    code, out, _ = run_cli(capsys, "db", "sorries", "--db", db, "--json")
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and [r["full_name"] for r in rows] == [theorems[2].full_name]
    assert rows[0]["status"] == "sorry"
    code, out, _ = run_cli(capsys, "db", "sorries", "--db", db)
    assert code == 0 and "1 open sorries" in out


def test_db_defaults_to_environment(capsys, sample_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("LEANLOOP_DB", str(tmp_path / "env.db"))
    assert run_cli(capsys, "db", "import", str(sample_dir / "random" / "test.json"))[0] == 0
    assert (tmp_path / "env.db").is_file()
    monkeypatch.delenv("LEANLOOP_DB")
    assert run_cli(capsys, "db", "import", str(sample_dir))[0] == 0
    code, out, _ = run_cli(capsys, "db", "stats", "--json")
    assert code == 0 and json.loads(out)["database"].endswith("data/leanloop.db")


def test_missing_source(capsys, tmp_path):
    code, _, err = run_cli(
        capsys, "db", "import", str(tmp_path / "absent"), "--db", str(tmp_path / "x.db")
    )
    assert_one_line_error(code, err, "absent", "no such file")


def test_malformed_json_line_names_file_and_line(capsys, tmp_path):
    corpus = tmp_path / "ds" / "corpus.jsonl"
    corpus.parent.mkdir()
    corpus.write_text('{"path": "A.lean", "imports": [], "premises": []}\n{"path": \n')
    (tmp_path / "ds" / "metadata.json").write_text(
        json.dumps({"from_repo": {"url": "https://github.com/a/b", "commit": "c"}})
    )
    code, _, err = run_cli(
        capsys, "db", "import", str(tmp_path / "ds"), "--db", str(tmp_path / "x.db")
    )
    assert_one_line_error(code, err, "corpus.jsonl", "line 2")
    assert not (tmp_path / "x.db").exists()


def test_truncated_split_file(capsys, sample_dir, tmp_path):
    path = tmp_path / "random" / "test.json"
    path.parent.mkdir()
    path.write_text((sample_dir / "random" / "test.json").read_text()[:100_000])
    code, _, err = run_cli(capsys, "db", "import", str(path), "--db", str(tmp_path / "x.db"))
    assert_one_line_error(code, err, "test.json", "line 1", "truncated")


def test_wrong_schema_names_field(capsys, sample_dir, tmp_path):
    raw = json.loads((sample_dir / "random" / "test.json").read_text())
    raw[5]["start"] = "oops"
    path = tmp_path / "train.json"
    path.write_text(json.dumps(raw))
    code, _, err = run_cli(capsys, "db", "import", str(path), "--db", str(tmp_path / "x.db"))
    assert_one_line_error(code, err, "item #5", "field 'start'")


def test_unreachable_database(capsys, sample_dir):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code, _, err = run_cli(
        capsys, "db", "import", str(sample_dir), "--db", f"postgresql://u:pw@127.0.0.1:{port}/db"
    )
    assert_one_line_error(code, err, "not usable", f"127.0.0.1:{port}")
    assert "pw" not in err.replace("postgresql", "")


def test_stats_of_missing_database(capsys, tmp_path):
    code, _, err = run_cli(capsys, "db", "stats", "--db", str(tmp_path / "none.db"))
    assert_one_line_error(code, err, "no database")
    assert not (tmp_path / "none.db").exists()


def test_bad_split_size(capsys, sample_dir, tmp_path):
    db = str(tmp_path / "x.db")
    run_cli(capsys, "db", "import", str(sample_dir), "--db", db)
    code, _, err = run_cli(
        capsys, "db", "export", str(tmp_path / "o"), "--db", db, "--val", "0.7", "--test", "0.7"
    )
    assert_one_line_error(code, err, "more than 1")
    code, _, err = run_cli(capsys, "db", "export", str(tmp_path / "o"), "--db", db, "--repo", "x/y")
    assert_one_line_error(code, err, "no repository 'x/y'")
    for size, words in (("1.5", "a fraction must be below 1"), ("nan", "non-negative count")):
        code, _, err = run_cli(
            capsys, "db", "export", str(tmp_path / "o"), "--db", db, "--val", size
        )
        assert_one_line_error(code, err, "--val", words)
    assert not (tmp_path / "o").exists()  # nothing was exported, no split was stored


def test_paths_that_cannot_be_written(capsys, sample_dir, tmp_path):
    (tmp_path / "afile").write_text("the user's")
    code, _, err = run_cli(
        capsys, "db", "import", str(sample_dir), "--db", str(tmp_path / "afile/x.db")
    )
    assert_one_line_error(code, err, "afile")
    db = str(tmp_path / "x.db")
    run_cli(capsys, "db", "import", str(sample_dir), "--db", db)
    code, _, err = run_cli(capsys, "db", "export", str(tmp_path / "afile" / "out"), "--db", db)
    assert_one_line_error(code, err, "afile")
    assert (tmp_path / "afile").read_text() == "the user's"


def test_download_with_local_archive_and_offline_failure(capsys, tmp_path, monkeypatch):
    from dataclasses import replace

    from leanloop.data.leandojo import download as dl

    archive = tmp_path / "a.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        data = b"[]"
        info = tarfile.TarInfo("leandojo_benchmark_4/random/test.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    code, _, err = run_cli(
        capsys,
        "data",
        "download",
        "leandojo-benchmark-4",
        "--archive",
        str(archive),
        "--dest",
        str(tmp_path / "d"),
    )
    assert_one_line_error(code, err, "checksum mismatch")

    import hashlib

    md5 = hashlib.md5(archive.read_bytes()).hexdigest()
    monkeypatch.setitem(
        dl.RELEASES,
        "leandojo-benchmark-4",
        replace(dl.LEANDOJO_BENCHMARK_4, md5=md5, url="http://127.0.0.1:9/x"),
    )
    code, out, _ = run_cli(
        capsys,
        "data",
        "download",
        "leandojo-benchmark-4",
        "--archive",
        str(archive),
        "--dest",
        str(tmp_path / "d"),
    )
    assert code == 0 and "ready" in out
    code, _, err = run_cli(
        capsys, "data", "download", "leandojo-benchmark-4", "--dest", str(tmp_path / "e")
    )
    assert_one_line_error(code, err, "cannot download", "--archive")


def test_usage_error_exit_code(capsys):
    code, _, err = run_cli(capsys, "db", "import", "--bogus")
    assert code == 2 and "No such option" in err
    code, _, err = run_cli(capsys, "db", "import")
    assert_one_line_error(code, err, "no dataset to import", "--config")


def test_run_config_errors_name_the_file_and_field(capsys, tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("val: 0.1\nretriever_secs: 5\n")
    code, _, err = run_cli(capsys, "run", "--config", str(config))
    assert_one_line_error(code, err, "run.yaml", "retriever_secs")
    code, _, err = run_cli(
        capsys, "run", "--data", str(tmp_path / "nowhere"), "--out", str(tmp_path)
    )
    assert_one_line_error(code, err, "nowhere", "no such file or directory")


@pytest.mark.slow
def test_python_dash_m(tmp_path, sample_dir):
    result = subprocess.run(
        [sys.executable, "-m", "leanloop", "db", "stats", "--db", str(tmp_path / "none.db")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1
    assert result.stderr.startswith("error: no database") and "Traceback" not in result.stderr


def test_doctor_and_trace_without_lean(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("ELAN_HOME", str(tmp_path / "elan"))
    code, out, err = run_cli(capsys, "doctor")
    assert code == 1 and "elan-init.sh" in out and "missing: elan, lake, lean" in err
    project = tmp_path / "proj"
    project.mkdir()
    (project / "lakefile.lean").write_text("package p\n")
    (project / "lean-toolchain").write_text("leanprover/lean4:v4.9.0\n")
    code, _, err = run_cli(capsys, "trace", str(project), "--db", str(tmp_path / "t.db"))
    assert_one_line_error(code, err, "no Lean toolchain", "leanloop doctor")
    assert not (tmp_path / "t.db").exists()
    code, _, err = run_cli(capsys, "trace", str(tmp_path / "nowhere"))
    assert_one_line_error(code, err, "no such file or directory")
    code, _, err = run_cli(capsys, "trace", str(tmp_path))
    assert_one_line_error(code, err, "is not a Lean project")


def test_version_and_plain_help(capsys):
    from leanloop import __version__

    code, out, _ = run_cli(capsys, "--version")
    assert code == 0 and out.strip() == f"leanloop {__version__}"
    code, out, _ = run_cli(capsys, "trace", "--help")
    text = " ".join(out.split())  # help is wrapped to the terminal's width
    assert code == 0 and "[default: HEAD]" in text and "<bool>" not in text
    code, out, _ = run_cli(capsys, "db", "export", "--help")
    text = " ".join(out.split())
    assert "[default: all]" in text and "the settings that made the stored splits" in text


def test_export_keeps_the_users_files_and_database(capsys, sample_dir, tmp_path, monkeypatch):
    work = tmp_path / "work"
    (work / "checkpoints").mkdir(parents=True)
    (work / "checkpoints" / "model.bin").write_text("weights")
    (work / "notes.txt").write_text("mine")
    db = str(work / "merged.db")  # the database kept inside the export directory
    assert run_cli(capsys, "db", "import", str(sample_dir), "--db", db)[0] == 0
    code, _, err = run_cli(capsys, "db", "export", str(work), "--db", db)
    assert code == 0, err
    code, _, err = run_cli(capsys, "db", "export", str(work), "--db", db)  # again, over it
    assert code == 0, err
    assert (work / "notes.txt").read_text() == "mine"
    assert (work / "checkpoints" / "model.bin").read_text() == "weights"
    assert run_cli(capsys, "db", "stats", "--db", db)[0] == 0  # the database is intact
    monkeypatch.chdir(work)
    inode = work.stat().st_ino
    code, _, err = run_cli(capsys, "db", "export", ".", "--db", db)
    assert code == 0, err
    assert work.stat().st_ino == inode and (work / "notes.txt").is_file()
    (work / "random" / "notes.txt").write_text("also mine")
    code, _, err = run_cli(capsys, "db", "export", ".", "--db", db)
    assert_one_line_error(code, err, "refusing", "notes.txt")
    assert (work / "random" / "notes.txt").read_text() == "also mine"


def test_export_from_a_read_only_database_says_why_it_must_write(capsys, sample_dir, tmp_path):
    path = tmp_path / "x.db"
    assert run_cli(capsys, "db", "import", str(sample_dir), "--db", str(path))[0] == 0
    before = path.read_bytes()
    read_only = f"sqlite:///file:{path}?mode=ro&uri=true"
    code, out, _ = run_cli(capsys, "db", "stats", "--db", read_only, "--json")
    assert code == 0 and json.loads(out)["theorems"] == 177  # reading works
    code, _, err = run_cli(capsys, "db", "export", str(tmp_path / "out"), "--db", read_only)
    assert_one_line_error(code, err, "read-only", "stores each theorem's split")
    assert path.read_bytes() == before
    assert not (tmp_path / "out" / "random").exists()


def test_tilde_is_expanded(capsys, sample_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    assert run_cli(capsys, "db", "import", str(sample_dir), "--db", "~/x.db")[0] == 0
    code, _, err = run_cli(capsys, "db", "export", "~/out", "--db", "~/x.db")
    assert code == 0, err
    assert (tmp_path / "home" / "x.db").is_file() and (
        tmp_path / "home" / "out" / "corpus.jsonl"
    ).is_file()
    assert not (tmp_path / "~").exists()


@pytest.mark.parametrize(
    ("db", "words"),
    [
        ("", "--db is empty"),
        ("sqlite://", "in-memory"),
        ("sqlite:///:memory:", "in-memory"),
        ("mysql://u@h/db", "SQLite or PostgreSQL"),
        ("postgresql://u@h:notaport/db", "not a database URL"),
    ],
)
def test_databases_the_command_line_refuses(capsys, sample_dir, db, words):
    code, _, err = run_cli(capsys, "db", "import", str(sample_dir), "--db", db)
    assert_one_line_error(code, err, words)


def test_export_settings_and_reset(capsys, sample_dir, tmp_path):
    db = str(tmp_path / "x.db")
    run_cli(capsys, "db", "import", str(sample_dir), "--db", db)
    assert run_cli(capsys, "db", "export", str(tmp_path / "a"), "--db", db, "--val", "5")[0] == 0
    code, out, err = run_cli(capsys, "db", "export", str(tmp_path / "b"), "--db", db, "--val", "9")
    assert code == 0 and "val 5" in out
    assert "warning: random: the stored splits were made with val=5" in err
    code, _, err = run_cli(capsys, "db", "export", str(tmp_path / "c"), "--db", db, "--test", "500")
    assert code == 0  # the stored settings apply; nothing new to place
    code, out, _ = run_cli(capsys, "db", "reset-splits", "--db", db, "--scheme", "random")
    assert code == 0 and "forgot 177 split assignments of random" in out
    code, _, err = run_cli(capsys, "db", "export", str(tmp_path / "d"), "--db", db, "--test", "500")
    assert_one_line_error(code, err, "leave train", "empty")
    code, _, err = run_cli(capsys, "db", "reset-splits", "--db", db, "--scheme", "nope")
    assert_one_line_error(code, err, "unknown split scheme")


def test_run_refuses_an_empty_db_name(capsys, sample_dir, tmp_path):
    (tmp_path / "out.txt").write_text("a file")
    code, _, err = run_cli(
        capsys, "run", "--data", str(sample_dir), "--db", "", "--out", str(tmp_path / "out.txt")
    )
    assert_one_line_error(code, err, "--db is empty")


def test_run_refuses_an_output_file_before_importing(capsys, sample_dir, tmp_path):
    (tmp_path / "out.txt").write_text("a file")
    code, _, err = run_cli(
        capsys,
        "run",
        "--data",
        str(sample_dir),
        "--db",
        str(tmp_path / "r.db"),
        "--out",
        str(tmp_path / "out.txt"),
    )
    assert_one_line_error(code, err, "out.txt", "directory")
    assert not (tmp_path / "r.db").exists()


def test_failed_download_leaves_no_empty_folder(capsys, tmp_path, monkeypatch):
    from dataclasses import replace

    from leanloop.data.leandojo import download as dl

    monkeypatch.setitem(
        dl.RELEASES,
        "leandojo-benchmark-4",
        replace(dl.LEANDOJO_BENCHMARK_4, url="http://127.0.0.1:9/x"),
    )
    code, _, err = run_cli(
        capsys, "data", "download", "leandojo-benchmark-4", "--dest", str(tmp_path / "new" / "d")
    )
    assert_one_line_error(code, err, "cannot download")
    assert not (tmp_path / "new").exists()


def test_every_command_takes_its_options_from_a_config_file(capsys, sample_dir, tmp_path):
    db = str(tmp_path / "c.db")
    (tmp_path / "import.yaml").write_text(f"source: {sample_dir}\ndb: {db}\nkeep-splits: true\n")
    code, out, err = run_cli(capsys, "db", "import", "--config", str(tmp_path / "import.yaml"))
    assert code == 0 and "177 theorems" in out, err
    (tmp_path / "export.yaml").write_text(f"output: {tmp_path / 'o'}\ndb: {db}\n")
    code, out, err = run_cli(capsys, "db", "export", "--config", str(tmp_path / "export.yaml"))
    assert code == 0, err
    # the dataset's own labels were kept: all 177 in test
    assert "random: train 0, val 0, test 177" in out
    (tmp_path / "stats.yaml").write_text(f"db: {db}\njson: true\n")
    code, out, _ = run_cli(capsys, "db", "stats", "--config", str(tmp_path / "stats.yaml"))
    assert code == 0 and json.loads(out)["theorems"] == 177
    code, out, _ = run_cli(
        capsys, "db", "stats", "--config", str(tmp_path / "stats.yaml"), "--table"
    )
    assert code == 0 and "total: 1 repository" in out  # the option given wins over the file
    (tmp_path / "bad.yaml").write_text(f"db: {db}\njsn: true\n")
    code, _, err = run_cli(capsys, "db", "stats", "--config", str(tmp_path / "bad.yaml"))
    assert_one_line_error(code, err, "bad.yaml", "field 'jsn'", "unknown option")
    (tmp_path / "trace.yaml").write_text("workers: many\n")
    code, _, err = run_cli(capsys, "trace", "x", "--config", str(tmp_path / "trace.yaml"))
    assert_one_line_error(code, err, "trace.yaml", "field 'workers'")


def test_a_command_whose_extra_is_missing_says_which_in_one_line(capsys, monkeypatch, tmp_path):
    config = tmp_path / "models.yaml"
    config.write_text("models: []\n")
    monkeypatch.setitem(sys.modules, "uvicorn", None)  # as if leanloop[serve] were not installed
    code, _, err = run_cli(capsys, "serve", "--config", config)
    assert_one_line_error(code, err, "uvicorn", "leanloop[serve]")


def test_the_fixtures_beside_a_checkout_are_the_default(tmp_path):
    from pathlib import Path

    from leanloop.settings import Settings

    repo = Path(__file__).resolve().parents[1]
    beside = repo.parent / "shared" / "fixtures"
    settings = Settings.from_env({})
    assert settings.fixtures == (beside if beside.is_dir() else None)
    assert Settings.from_env({"LEANLOOP_FIXTURES": str(tmp_path)}).fixtures == tmp_path


@pytest.mark.parametrize("content", [b"hello, not a database\n", b"SQLite format 3\x00cut short"])
def test_import_into_a_file_that_is_not_a_database(capsys, sample_dir, tmp_path, content):
    path = tmp_path / "lean.db"
    path.write_bytes(content)
    code, _, err = run_cli(capsys, "db", "import", sample_dir, "--db", path)
    assert_one_line_error(code, err, "lean.db", "not a database")
    assert path.read_bytes() == content  # left as it was
