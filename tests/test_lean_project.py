"""Getting Lean projects (git URL at a commit, local directory, single file) and finding the
toolchain; errors that say what is wrong and what to do."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path

import pytest

from leanloop.lean import toolchain
from leanloop.lean.errors import (
    CloneFailed,
    MissingToolchainFile,
    NotALeanProject,
    ServerNotFound,
    ToolchainNotFound,
)
from leanloop.lean.project import _auth_args, open_project

MANIFEST = {
    "version": 7,
    "packagesDir": ".lake/packages",
    "packages": [
        {
            "url": "https://github.com/leanprover-community/batteries",
            "type": "git",
            "subDir": None,
            "rev": "0123abcd",
            "name": "batteries",
            "inputRev": "main",
            "inherited": False,
            "configFile": "lakefile.lean",
        }
    ],
    "name": "demo",
    "lakeDir": ".lake",
}


def git(*args, cwd):
    subprocess.run(
        ["git", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        env={
            **os.environ,
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@t",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@t",
        },
    )
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture
def repo(tmp_path) -> tuple[Path, str, str]:
    root = tmp_path / "demo"
    (root / "Demo").mkdir(parents=True)
    (root / "lakefile.lean").write_text("import Lake\nopen Lake DSL\npackage demo\n")
    (root / "lean-toolchain").write_text("leanprover/lean4:v4.9.0\n")
    (root / "lake-manifest.json").write_text(json.dumps(MANIFEST))
    (root / "Demo.lean").write_text("import Demo.Basic\n")
    (root / "Demo" / "Basic.lean").write_text("theorem one : 1 = 1 := rfl\n")
    dependency = root / ".lake" / "packages" / "batteries" / "Batteries.lean"
    dependency.parent.mkdir(parents=True)
    dependency.write_text("theorem dep : True := trivial\n")
    (root / ".gitignore").write_text(".lake\n")
    git("init", "-q", cwd=root)
    first = git("add", "-A", cwd=root) and git("commit", "-qm", "one", cwd=root)
    (root / "Demo" / "Extra.lean").write_text("theorem two : 2 = 2 := rfl\n")
    second = git("add", "-A", cwd=root) and git("commit", "-qm", "two", cwd=root)
    return root, first, second


def test_local_directory_as_it_is(repo):
    root, _, second = repo
    project = open_project(root)
    assert project.kind == "local" and project.commit == second
    assert project.toolchain == "leanprover/lean4:v4.9.0" and project.lean_version == "v4.9.0"
    assert [p.name for p in project.packages] == ["batteries"]
    assert project.packages[0].input_rev == "main"
    assert project.lean_files() == ["Demo.lean", "Demo/Basic.lean", "Demo/Extra.lean"]
    assert [name for name, _ in project.package_roots()] == ["batteries"]
    assert project.module_path("Demo.Basic") == "Demo/Basic.lean"
    assert project.module_path("Batteries") == ".lake/packages/batteries/Batteries.lean"


def test_local_directory_at_an_earlier_commit(repo, tmp_path):
    root, first, second = repo
    project = open_project(root, commit=first, cache_dir=tmp_path / "cache")
    assert project.commit == first and project.root != root
    assert project.lean_files() == ["Demo.lean", "Demo/Basic.lean"]
    assert (root / "Demo" / "Extra.lean").exists()  # the user's checkout is untouched
    # every commit of the directory is the same repository (so sorries close across commits)
    later = open_project(root, commit=second, cache_dir=tmp_path / "cache")
    as_is = open_project(root)
    assert project.identity == later.identity == as_is.identity == str(root.absolute())
    assert project.name == later.name == as_is.name == root.name


def test_git_url_cloned_once_into_the_cache(repo, tmp_path):
    root, first, second = repo
    url = f"file://{root}"
    cache = tmp_path / "cache"
    project = open_project(url, commit=second, cache_dir=cache)
    assert project.kind == "git" and project.url == url and project.commit == second
    assert project.root.parent == cache / "repos"
    marker = project.root / "marker"
    marker.write_text("kept")
    again = open_project(url, commit=second, cache_dir=cache)
    assert again.root == project.root and marker.read_text() == "kept"  # reused, not re-cloned
    older = open_project(url, commit=first, cache_dir=cache)
    assert older.root != project.root and "Demo/Extra.lean" not in older.lean_files()
    head = open_project(url, cache_dir=tmp_path / "other")  # no commit: the remote's HEAD
    assert head.commit == second


def test_concurrent_opens_share_one_clone(repo, tmp_path):
    root, _, second = repo
    results, errors = [], []

    def worker():
        try:
            results.append(open_project(f"file://{root}", commit=second, cache_dir=tmp_path / "c"))
        except Exception as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and len({p.root for p in results}) == 1
    clones = [p for p in (tmp_path / "c" / "repos").iterdir() if p.is_dir()]
    assert len(clones) == 1


def test_single_file(repo):
    root, _, _ = repo
    project = open_project(root / "Demo" / "Basic.lean")
    assert project.kind == "file" and project.lean_files() == ["Basic.lean"]
    assert project.toolchain == "leanprover/lean4:v4.9.0"  # from the enclosing project


def test_errors(repo, tmp_path):
    root, _, _ = repo
    with pytest.raises(NotALeanProject, match=r"no lakefile\.lean"):
        open_project(tmp_path)
    with pytest.raises(NotALeanProject, match="no such file"):
        open_project(tmp_path / "absent")
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(NotALeanProject, match=r"not a \.lean file"):
        open_project(tmp_path / "notes.txt")
    with pytest.raises(CloneFailed) as err:
        open_project(f"file://{root}", commit="f" * 40, cache_dir=tmp_path / "c")
    assert "\n" not in err.value.message and err.value.hint
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "lakefile.lean").write_text("package x\n")
    with pytest.raises(MissingToolchainFile, match="no lean-toolchain"):
        open_project(bare).require_toolchain()


def test_github_token_only_when_needed(monkeypatch):
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    monkeypatch.delenv("GITHUB_ACCESS_TOKEN", raising=False)
    assert _auth_args("https://github.com/a/b") == []
    monkeypatch.setenv("GITHUB_TOKEN", "secret")
    assert _auth_args("https://gitlab.com/a/b") == []
    assert "Authorization: Bearer secret" in _auth_args("https://github.com/a/b")[1]


# -- toolchain discovery ---------------------------------------------------------------------------


@pytest.fixture
def no_lean(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    monkeypatch.setenv("ELAN_HOME", str(tmp_path / "elan"))
    monkeypatch.delenv("LEANLOOP_REPL", raising=False)
    monkeypatch.delenv("LEANLOOP_PANTOGRAPH", raising=False)
    # the toolchain alone: whether bubblewrap is here is tests/test_lean_sandbox.py's question
    monkeypatch.setenv("LEANLOOP_SANDBOX", "off")
    return tmp_path / "elan"


def test_doctor_says_what_is_missing_and_how_to_install_it(repo, no_lean):
    report = toolchain.diagnose(open_project(repo[0]))
    assert not report.ok
    missing = {c.name for c in report.missing()}
    assert missing == {"elan", "lake", "lean", "project toolchain", "Lean REPL"}
    text = "\n".join(report.render())
    assert "elan-init.sh" in text and "elan toolchain install leanprover/lean4:v4.9.0" in text
    assert "leanprover-community/repl" in text


def test_require_fails_fast_with_the_fix(repo, no_lean):
    with pytest.raises(ToolchainNotFound) as err:
        toolchain.require(open_project(repo[0]))
    assert "elan" in err.value.message and "leanloop doctor" in err.value.hint


def test_installed_toolchains_and_servers(repo, no_lean, monkeypatch, tmp_path):
    (no_lean / "toolchains" / "leanprover--lean4---v4.9.0").mkdir(parents=True)
    assert toolchain.installed_toolchains() == ["leanprover/lean4:v4.9.0"]
    assert toolchain.toolchain_installed("leanprover/lean4:v4.9.0")
    bin_dir = no_lean / "bin"
    bin_dir.mkdir()
    for name in ("elan", "lake", "lean"):
        (bin_dir / name).write_text("#!/bin/sh\nexit 0\n")
        (bin_dir / name).chmod(0o755)
    root = repo[0]
    repl = root / ".lake" / "packages" / "repl" / ".lake" / "build" / "bin" / "repl"
    repl.parent.mkdir(parents=True)
    repl.write_text("")
    report = toolchain.require(open_project(root))
    assert report.repl == repl and report.lake == bin_dir / "lake" and report.ok
    configured = tmp_path / "my-repl"
    configured.write_text("")
    monkeypatch.setenv("LEANLOOP_REPL", str(configured))
    assert toolchain.find_server("repl", open_project(root)) == configured
    with pytest.raises(ServerNotFound, match="pantograph"):
        toolchain.require(open_project(root), server="pantograph")


def test_failed_build_is_one_clear_line(repo, tmp_path):
    from leanloop.lean.build import build
    from leanloop.lean.errors import BuildFailed

    # a stand-in for lake that fails like a broken build does (this tests the reporting only)
    lake = tmp_path / "lake"
    lake.write_text(
        "#!/bin/sh\necho 'building Demo.Basic'\n"
        "echo 'error: Demo/Basic.lean:1:0: stand-in failure' >&2\nexit 1\n"
    )
    lake.chmod(0o755)
    with pytest.raises(BuildFailed) as err:
        build(open_project(repo[0]), lake)
    assert "stand-in failure" in err.value.message and "\n" not in err.value.message
    assert "lake build" in err.value.hint
