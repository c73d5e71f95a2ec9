"""Filling sorries in a user's files: a proof is written only when Lean accepted the whole file
(Lean's verdicts are the recorded answers of a real Lean REPL, read by ReplServer), atomically,
with a backup; everything else leaves the file as it was."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from leanloop.agent.git_branch import BranchCommitter
from leanloop.agent.sorry_filling import FillStatus, SorryFiller, forbidden_words, proof_body
from leanloop.data.records import Pos, Repository, Theorem, TheoremStatus
from leanloop.database import DynamicDatabase
from leanloop.errors import LeanloopError
from leanloop.lean.errors import ServerCrashed
from leanloop.lean.repl import ReplServer
from leanloop.lean.replay import ReplayTransport
from leanloop.lean.server import CheckResult, LeanMessage, LeanServer
from leanloop.lean.verdict import Verdict


def recorded_lean(transcripts) -> ReplServer:
    """A ReplServer whose answers are the REPL's recorded answers to whole commands."""
    exchanges = [
        (request, response)
        for t in transcripts.values()
        if not t["needs_mathlib"] and not t["reads_files"]
        for request, response in zip(t["requests"], t["responses"], strict=False)
        if set(request) == {"cmd"}
    ]
    return ReplServer(ReplayTransport(exchanges, ordered=False))


def sorry_theorem(name: str, path: str = "Demo/Basic.lean", line: int = 1) -> Theorem:
    return Theorem(
        url="https://example.org/demo",
        commit="c0ffee",
        file_path=path,
        full_name=name,
        start=Pos(line, 1),
        end=Pos(line, 30),
        status=TheoremStatus.SORRY,
    )


def project(tmp_path: Path, text: str) -> Path:
    root = tmp_path / "demo"
    (root / "Demo").mkdir(parents=True)
    (root / "Demo" / "Basic.lean").write_text(text)
    return root


def test_an_accepted_proof_is_written_with_a_backup(tmp_path, transcripts):
    original = "theorem bar : 1 = 1 := sorry"
    root = project(tmp_path, original)
    filler = SorryFiller(root, recorded_lean(transcripts))
    result = filler.fill(sorry_theorem("bar"), "by\n\n/- Some long comment here -/\n\n  rfl")
    assert result.status is FillStatus.WRITTEN, result.reason
    written = (root / "Demo" / "Basic.lean").read_text()
    assert written == "theorem bar : 1 = 1 := by\n\n/- Some long comment here -/\n\n  rfl"
    assert result.backup.read_text() == original
    assert result.backup.is_relative_to(root / ".leanloop-backups")


@pytest.mark.parametrize(
    ("proof", "words"),
    [
        ("by exact?", "`exact?` could not close the goal"),
        ("by exact ex", "fail to show termination"),
    ],
)
def test_a_proof_lean_rejects_is_reported_not_written(tmp_path, transcripts, proof, words):
    original = "theorem ex : False := sorry"
    root = project(tmp_path, original)
    result = SorryFiller(root, recorded_lean(transcripts)).fill(sorry_theorem("ex"), proof)
    assert result.status is FillStatus.REJECTED
    assert words in result.reason and "line 1" in result.reason
    assert (root / "Demo" / "Basic.lean").read_text() == original
    assert not (root / ".leanloop-backups").exists()


@pytest.mark.parametrize(
    "proof", ["by sorry", "by\n  admit", "by native_decide", ["intro h", "exact sorry"]]
)
def test_proofs_that_are_not_proofs_are_refused_before_asking_lean(tmp_path, proof):
    original = "theorem ex : False := sorry"
    root = project(tmp_path, original)

    lean = _Fixed(Verdict.ACCEPTED)
    result = SorryFiller(root, lean).fill(sorry_theorem("ex"), proof)
    assert result.status is FillStatus.FORBIDDEN and not result.written
    assert lean.checked == []  # Lean was not even asked
    assert (root / "Demo" / "Basic.lean").read_text() == original
    assert forbidden_words('by simp -- no sorry here\n  exact ("admit")') == []


class _Fixed(LeanServer):
    """leanloop's own verdict object, built directly, for tests of what filling does with it."""

    def __init__(self, verdict: Verdict, messages=(), error: Exception | None = None):
        super().__init__()
        self.result = CheckResult(verdict, tuple(messages))
        self.error = error
        self.checked: list[str] = []

    def check(self, code):
        self.checked.append(code)
        if self.error:
            raise self.error
        return self.result

    generation = 0
    start_proof = start_theorem = open_sorries = run_tactic = close = None


def test_other_declarations_may_keep_their_sorries(tmp_path):
    text = "theorem a : True := sorry\n\ntheorem b : True := by\n  sorry\n"
    root = project(tmp_path, text)
    warning_b = LeanMessage("warning", "declaration uses `sorry`", line=3, column=8)
    ok = SorryFiller(root, _Fixed(Verdict.CONTAINS_SORRY, [warning_b]))
    result = ok.fill(sorry_theorem("a"), ["trivial"])
    assert result.written
    assert (root / "Demo" / "Basic.lean").read_text() == (
        "theorem a : True := by\n  trivial\n\ntheorem b : True := by\n  sorry\n"
    )
    # b now starts on line 4: a sorry warning there is b's own
    own = LeanMessage("warning", "declaration uses `sorry`", line=4, column=8)
    again = SorryFiller(root, _Fixed(Verdict.CONTAINS_SORRY, [own]))
    result = again.fill(sorry_theorem("b", line=4), ["exact?"])
    assert result.status is FillStatus.REJECTED and "thanks to a sorry" in result.reason


def test_a_server_failure_leaves_the_file_alone(tmp_path):
    original = "theorem ex : False := sorry"
    root = project(tmp_path, original)
    crashed = _Fixed(Verdict.ACCEPTED, error=ServerCrashed("the Lean REPL exited with status 3"))
    result = SorryFiller(root, crashed).fill(sorry_theorem("ex"), "by simp")
    assert result.status is FillStatus.CHECK_FAILED and "exited" in result.reason
    assert (root / "Demo" / "Basic.lean").read_text() == original


def test_a_failure_while_writing_leaves_the_original_intact(tmp_path, monkeypatch):
    original = "theorem a : True := sorry\n"
    root = project(tmp_path, original)

    def disk_full(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", disk_full)
    with pytest.raises(OSError, match="No space"):
        SorryFiller(root, _Fixed(Verdict.ACCEPTED)).fill(sorry_theorem("a"), ["trivial"])
    monkeypatch.undo()
    assert (root / "Demo" / "Basic.lean").read_text() == original
    assert [p.name for p in (root / "Demo").iterdir()] == ["Basic.lean"]  # no temporary left


def test_gone_or_changed_declarations_are_not_touched(tmp_path):
    root = project(tmp_path, "theorem a : True := trivial\n")
    filler = SorryFiller(root, _Fixed(Verdict.ACCEPTED))
    assert filler.fill(sorry_theorem("a"), ["trivial"]).status is FillStatus.NOT_FOUND
    assert filler.fill(sorry_theorem("zzz"), ["trivial"]).status is FillStatus.NOT_FOUND
    outside = sorry_theorem("a", path="../elsewhere.lean")
    with pytest.raises(LeanloopError, match="outside the project"):
        filler.fill(outside, ["trivial"])


def test_the_database_marks_the_theorem_proved(tmp_path):
    root = project(tmp_path, "theorem a : True := sorry\n")
    database = DynamicDatabase(tmp_path / "lean.db")
    theorem = sorry_theorem("a")
    database.add_repository(Repository(url=theorem.url, commit=theorem.commit), [theorem])
    filler = SorryFiller(root, _Fixed(Verdict.ACCEPTED), database=database)
    assert filler.fill(theorem, ["trivial"]).written
    (proved,) = database.get_theorems(status="sorry_proved")
    assert proved.full_name == "a" and proved.proof == "by\n  trivial"
    assert database.get_sorry_theorems() == []


def test_a_file_edited_while_lean_checks_is_left_as_the_user_made_it(tmp_path):
    root = project(tmp_path, "theorem a : True := sorry\n")
    file = root / "Demo" / "Basic.lean"
    edited = "theorem a : True := sorry\n\ntheorem b : 2 = 2 := rfl\n"

    class EditedMeanwhile(_Fixed):
        def check(self, code):
            file.write_text(edited)  # the user saves the file while Lean works
            return super().check(code)

    result = SorryFiller(root, EditedMeanwhile(Verdict.ACCEPTED)).fill(
        sorry_theorem("a"), ["trivial"]
    )
    assert result.status is FillStatus.NOT_FOUND and "changed while Lean checked" in result.reason
    assert file.read_text() == edited


def test_a_written_proof_the_database_cannot_record_is_still_reported_written(tmp_path):
    root = project(tmp_path, "theorem a : True := sorry\n")
    database = DynamicDatabase(tmp_path / "lean.db")  # the theorem is not in it
    filler = SorryFiller(root, _Fixed(Verdict.ACCEPTED), database=database)
    result = filler.fill(sorry_theorem("a"), ["trivial"])
    assert result.status is FillStatus.WRITTEN and result.backup is not None
    assert "not recorded in the database" in result.reason
    assert (root / "Demo" / "Basic.lean").read_text() == "theorem a : True := by\n  trivial\n"


def test_proofs_are_committed_on_their_own_branch(tmp_path):
    root = project(tmp_path, "theorem a : True := sorry\n")

    def git(*args):
        return subprocess.run(
            ["git", *args], cwd=root, check=True, capture_output=True, text=True
        ).stdout.strip()

    git("init", "-q", "-b", "main")
    git("add", ".")
    git("-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q", "-m", "start")
    head = git("rev-parse", "HEAD")
    with pytest.raises(LeanloopError, match="checked out"):
        BranchCommitter(root, "main")
    branch = BranchCommitter(root, "leanloop/proofs")
    result = SorryFiller(root, _Fixed(Verdict.ACCEPTED), branch=branch).fill(
        sorry_theorem("a"), ["trivial"]
    )
    assert result.written and result.commit
    assert git("rev-parse", "HEAD") == head and git("symbolic-ref", "--short", "HEAD") == "main"
    assert (
        git("show", "leanloop/proofs:Demo/Basic.lean") + "\n"
        == (root / "Demo" / "Basic.lean").read_text()
    )
    assert git("rev-parse", "leanloop/proofs^") == head
    assert git("diff", "--cached", "--name-only") == ""  # the user's index is untouched


def test_proof_bodies():
    assert proof_body(":= by simp") == "by simp"
    assert proof_body(["intro h", "cases h with\n| inl a => exact a\n| inr b => exact b"], 2) == (
        "by\n    intro h\n    cases h with\n    | inl a => exact a\n    | inr b => exact b"
    )
