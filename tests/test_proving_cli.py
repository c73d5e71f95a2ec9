"""``leanloop prove --project``: a Lean project's open sorries proved and written back, the report
(JSON, Markdown, plot) and one JSON line per theorem; one-line errors where Lean is missing or
the options do not fit together.

Lean is not installed here: the command's Lean servers are the scripted ones of test_proving,
whose whole-file verdicts are Lean's recorded answers, and its prover follows their script."""

from __future__ import annotations

import json
import subprocess

import pytest

import leanloop.prover.assemble as assemble
from leanloop.agent import proving
from leanloop.data.records import Repository
from leanloop.database import DynamicDatabase
from tests.conftest import REPO_ROOT
from tests.helpers import assert_one_line_error, run_cli
from tests.test_proving import ACCEPTED, FILES, REPO, scripted_prover
from tests.test_proving import demo as demo


@pytest.fixture
def no_lean(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    monkeypatch.setenv("ELAN_HOME", str(tmp_path / "no-elan"))


def test_a_project_s_sorries_are_proved_and_written_back(demo, capsys, tmp_path, monkeypatch):
    root, _, factory, servers = demo
    (root / "lean-toolchain").write_text("leanprover/lean4:v4.9.0\n")  # a Lake project
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True)
    subprocess.run(["git", "add", "."], cwd=root, check=True)
    subprocess.run(
        ["git", "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "start"],
        cwd=root,
        check=True,
    )
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=root, check=True, capture_output=True, text=True
    ).stdout.strip()
    # the project as an earlier trace stored it (tracing needs Lean)
    database = DynamicDatabase(tmp_path / "cli.db")
    stored = Repository(url=str(root), commit=head)
    traced = [
        t.model_copy(update={"url": stored.url, "commit": head})
        for t in demo[1].get_sorry_theorems(REPO)
    ]
    database.add_repository(stored, traced)
    monkeypatch.setattr("leanloop.agent.repositories.require_lean", lambda: None)
    started_in = []

    def worktree_servers(servers, project_root):
        def make(worktree_root):
            started_in.append(worktree_root)
            return factory

        return make

    monkeypatch.setattr(assemble, "lean_launcher", lambda root, settings, limits=None: factory)
    monkeypatch.setattr(proving, "_worktree_servers", worktree_servers)
    monkeypatch.setattr(assemble, "prover", lambda *args: scripted_prover())
    out = tmp_path / "reports"
    code, stdout, err = run_cli(
        capsys,
        "prove",
        "--project",
        root,
        "--generator",
        "hf:scripted",
        "--db",
        tmp_path / "cli.db",
        "--branch",
        "leanloop/proofs",
        "--out",
        out,
        "--json",
    )
    assert code == 0, err
    rows = [json.loads(line) for line in stdout.splitlines()]
    assert [(r["full_name"], r["outcome"]) for r in rows] == [
        ("simple_add", "written"),
        ("f", "failed"),
        ("two", "refused"),
        ("nope", "failed"),
        ("first", "failed"),
        ("second", "written"),
    ]
    assert rows[0]["axioms"] == ["propext"] and rows[0]["working_tree"] == "written"
    assert "2 of 6 sorries proved by Lean and written" in err
    assert (root / "Simple.lean").read_text() == ACCEPTED
    assert (root / "Incomplete.lean").read_text() == FILES["Incomplete.lean"]
    branch = subprocess.run(
        ["git", "show", "leanloop/proofs:Simple.lean"],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert branch == ACCEPTED
    assert len(started_in) == 1 and started_in[0] != root  # checked in the branch's worktree
    (report_dir,) = out.iterdir()
    assert sorted(p.name for p in report_dir.iterdir()) == [
        "report.json",
        "report.md",
        "report.png",
    ]
    remaining = [t.full_name for t in database.get_sorry_theorems(stored)]
    assert remaining == ["f", "two", "nope", "first"]
    assert len(servers) == 2  # one in the project, one in the branch's worktree


def test_errors(capsys, tmp_path, sample_dir, no_lean):
    project = REPO_ROOT / "examples" / "lean-project"
    code, _, err = run_cli(capsys, "prove", "--db", tmp_path / "x.db")
    assert_one_line_error(code, err, "nothing to prove", "--project")
    code, _, err = run_cli(capsys, "prove", "--project", project, "--generator", "hf:out")
    assert_one_line_error(code, err, "no Lean toolchain", "elan")
    code, _, err = run_cli(capsys, "prove", "--project", project, "--generator", "recorded")
    assert_one_line_error(code, err, "needs a model")
    code, _, err = run_cli(capsys, "prove", "--project", project, "--replay")
    assert_one_line_error(code, err, "--replay", "needs --dataset")
    code, _, err = run_cli(capsys, "prove", "--dataset", sample_dir, "--replay", "--branch", "b")
    assert_one_line_error(code, err, "--branch goes with --project")
    code, _, err = run_cli(
        capsys, "prove", "--project", "https://github.com/x/y", "--generator", "hf:out"
    )
    assert_one_line_error(code, err, "no Lean toolchain")  # before anything is cloned
