"""Filling sorries in a user's files: only the proof is replaced (what follows the declaration, line
endings, a byte order mark and every other byte stay), Lean judges the filled declaration in its
file (other declarations keep their sorries) and audits its axioms, and only then is the file
written — atomically, with a backup, or on a branch checked and committed in its own worktree.

Lean's answers here are leanloop's own verdict objects built by ``tests/audit_standin.py`` (a
sorry warning for each declaration that still uses sorry, the answer to ``#print axioms`` taken
from Lean's real reports where the theorem's name has one): these tests are about what filling
does with a verdict."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import stat
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from leanloop.agent.git_branch import BranchWorkspace
from leanloop.agent.sorry_filling import (
    BACKUP_DIR,
    FillResult,
    FillStatus,
    SorryFiller,
    outside_span_problem,
    proof_body,
    span_problem,
)
from leanloop.data.records import (
    AttemptStatus,
    Pos,
    ProofAttempt,
    Repository,
    Theorem,
    TheoremStatus,
)
from leanloop.database import DynamicDatabase
from leanloop.errors import LeanloopError
from leanloop.lean.audit import Judgement, Outcome
from leanloop.lean.axioms import AxiomPolicy
from leanloop.lean.errors import ServerCrashed
from leanloop.lean.server import LeanMessage, LeanServer
from tests.audit_standin import (
    audit_request,
    audited_answer,
    real_axiom_report,
    without_audit,
)


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


def kept_out(result: FillResult, outcome: Outcome) -> bool:
    """Whether the proof was left out of its file because it was judged ``outcome``."""
    return (
        result.status is FillStatus.NOT_ACCEPTED
        and result.judgement is not None
        and result.judgement.outcome is outcome
    )


def project(tmp_path: Path, text: str | bytes) -> Path:
    root = tmp_path / "demo"
    (root / "Demo").mkdir(parents=True)
    data = text.encode() if isinstance(text, str) else text
    (root / "Demo" / "Basic.lean").write_bytes(data)
    return root


def basic(root: Path) -> bytes:
    return (root / "Demo" / "Basic.lean").read_bytes()


class Lean(LeanServer):
    """Answers each check with leanloop's own verdict object (see the module docstring):
    ``errors(code)`` gives the error messages, ``axioms``/``texts`` the audit's answer."""

    def __init__(
        self, *, errors=None, axioms=None, texts=None, failure=None, before=None, account=True
    ):
        super().__init__()
        self.errors, self.axioms, self.texts = errors, axioms, texts
        self.failure, self.before = failure, before
        self.account = account  # False: a server that gives no account of its commands
        self.checked: list[str] = []  # the filled files, with leanloop's audit
        self.originals: list[str] = []  # the files as they were, asked for Lean's account

    def check(self, code):
        if audit_request(code) is None:  # the file before the fill: Lean's account of it
            self.originals.append(code)
            answer = audited_answer(code)
            return answer if self.account else dataclasses.replace(answer, commands=None)
        self.checked.append(code)
        if self.before is not None:
            self.before(code)
        if self.failure is not None:
            raise self.failure
        errors = self.errors(code) if self.errors is not None else []
        return audited_answer(code, errors, self.axioms, self.texts)

    generation = 0
    start_proof = start_theorem = open_sorries = run_tactic = close = None


# -- what is replaced, and what stays --------------------------------------------------------------

AFTER = {
    "proof_wanted": "\nproof_wanted later : 1 = 1\n",
    "notation3": '\nnotation3 "∑' + "' " + '"(...)", "r:67:(scoped f => Finset.sum s r) => r\n',
    "declare_syntax_cat": "\ndeclare_syntax_cat myterm\n",
    "register_simp_attr": "\nregister_simp_attr my_simps\n",
    "scoped notation": '\nscoped[Demo] notation "ε" => (0 : ℕ)\n',
    "indented end": "\n  end Demo\n",
    "doc and attribute": "\n/-- The next one. -/\n@[simp]\ntheorem next : True := trivial\n",
    "comment": "  -- the proof is still to come\n\n-- next\ntheorem next : True := trivial\n",
    "open": "\nopen Nat\n\n#check succ\n",
    "after a comment on its line": "/- helper -/ theorem b : 1 = 1 := rfl\n",
    "indented command": "\n  #eval 1 + 1\n",
}


@pytest.mark.parametrize("after", list(AFTER.values()), ids=list(AFTER))
def test_only_the_proof_is_replaced(tmp_path, after):
    original = f"namespace Demo\n\ntheorem a (n : ℕ) : n = n := by\n  sorry\n{after}"
    root = project(tmp_path, original)
    lean = Lean()
    result = SorryFiller(root, lean).fill(sorry_theorem("Demo.a", line=3), ["rfl"])
    assert result.status is FillStatus.WRITTEN, result.reason
    expected = original.replace(":= by\n  sorry", ":= by\n  rfl")
    assert basic(root) == expected.encode()
    assert result.backup.read_bytes() == original.encode()
    assert result.backup.is_relative_to(root / ".leanloop-backups")
    # Lean judged the whole filled file, what follows included, and audited Demo.a at the top
    (code,) = lean.checked
    assert without_audit(code) == expected.rstrip() + "\n"
    assert "\n  rfl\n\n#print axioms a\n" in code  # in its namespace, right after it
    assert code.endswith("\nset_option pp.fullNames true\n#print axioms Demo.a\n")
    assert code.count("end Demo") == 1  # the file's own 'end' closed it: none added
    assert result.axioms == ("propext",)


def test_a_command_on_the_proof_s_line_or_a_raw_string_in_it_is_kept(tmp_path):
    original = "theorem a : True := sorry theorem b : 1 = 1 := rfl\n"
    root = project(tmp_path, original)
    assert SorryFiller(root, Lean()).fill(sorry_theorem("a"), "trivial").written
    assert basic(root) == b"theorem a : True := trivial theorem b : 1 = 1 := rfl\n"
    raw = (
        'theorem c : True := by\n  have h : r"\\" = "\\\\" := rfl\n  sorry\n\n'
        "theorem d : True := trivial\n"
    )
    (root / "Demo" / "Basic.lean").write_text(raw)
    assert SorryFiller(root, Lean()).fill(sorry_theorem("c"), ["trivial"]).written
    assert (
        basic(root).decode() == "theorem c : True := by\n  trivial\n\ntheorem d : True := trivial\n"
    )


def test_a_span_that_holds_more_than_a_proof_is_not_replaced(tmp_path, monkeypatch):
    from leanloop.lean.scanner import Declaration

    original = "theorem a : True := by\n  sorry\n\ntheorem b : 1 = 1 := rfl\n"
    root = project(tmp_path, original)

    def to_the_end(self):  # a scanner that got the proof's end wrong
        return self.assign.offset, len(self.source)

    monkeypatch.setattr(Declaration, "proof_span", property(to_the_end))
    # without Lean's account, the span is checked on its own and refused
    lean = Lean(account=False)
    result = SorryFiller(root, lean).fill(sorry_theorem("a"), ["trivial"])
    assert result.status is FillStatus.UNSAFE and "'theorem' starts a command" in result.reason
    assert result.attempt_status == "error"
    assert basic(root) == original.encode() and lean.checked == []
    # Lean's account of the file ends the declaration before 'theorem b': only the proof goes
    lean = Lean()
    result = SorryFiller(root, lean).fill(sorry_theorem("a"), ["trivial"])
    assert result.status is FillStatus.WRITTEN, result.reason
    assert basic(root) == original.replace("sorry", "trivial").encode()


def test_a_proof_the_screen_refuses_is_never_shown_to_lean(tmp_path):
    root = project(tmp_path, "theorem a : False := sorry\n")
    lean = Lean()
    result = SorryFiller(root, lean).fill(sorry_theorem("a"), ["run_tac Lean.Elab.admitGoal"])
    assert kept_out(result, Outcome.REFUSED) and "run_tac" in result.reason
    assert lean.checked == [] and basic(root) == b"theorem a : False := sorry\n"


def test_where_and_termination_clauses_stay_with_their_declaration(tmp_path):
    original = (
        "def f (n : ℕ) : ℕ := sorry\ntermination_by n\ndecreasing_by\n  simp_wf\n\n"
        "theorem g : f 0 = f 0 := by\n  exact helper\nwhere\n  helper : f 0 = f 0 := sorry\n"
    )
    root = project(tmp_path, original)
    filler = SorryFiller(root, Lean())
    assert filler.fill(sorry_theorem("f"), "go n").status is FillStatus.WRITTEN
    assert basic(root).decode() == original.replace("ℕ := sorry", "ℕ := go n", 1)
    # g's sorry is in its 'where' helper, not in its proof: nothing to replace there
    result = filler.fill(sorry_theorem("g", line=6), ["rfl"])
    assert result.status is FillStatus.NOT_FOUND and "proof has no sorry" in result.reason


def test_line_endings_a_byte_order_mark_tabs_and_no_final_newline_are_kept(tmp_path):
    original = (
        "\ufeffimport Demo.Base\r\n\r\n-- a\ttab\r\ntheorem a : True := by\r\n  sorry\r\n\r\n"
        "theorem b : True := by\r\n\tsorry"
    ).encode()
    root = project(tmp_path, original)
    lean = Lean()
    result = SorryFiller(root, lean).fill(sorry_theorem("b", line=7), ["trivial", "done"])
    assert result.written, result.reason
    assert basic(root) == original.replace(b"by\r\n\tsorry", b"by\r\n  trivial\r\n  done")
    # Lean is shown the file without the mark and with LF line ends (line numbers unchanged)
    (code,) = lean.checked
    assert not code.startswith("\ufeff") and "\r" not in code
    assert code.split("\n")[6:9] == ["theorem b : True := by", "  trivial", "  done"]


def test_a_later_theorem_is_proved_while_an_earlier_sorry_stays(tmp_path):
    text = "theorem a : True := sorry\n\ntheorem b : True := by\n  sorry\n"
    root = project(tmp_path, text)
    lean = Lean()
    result = SorryFiller(root, lean).fill(sorry_theorem("b", line=3), ["trivial"])
    assert result.written, result.reason
    assert basic(root) == b"theorem a : True := sorry\n\ntheorem b : True := by\n  trivial\n"
    # Lean warned about a's sorry in the file it checked: that did not decide b's verdict
    (code,) = lean.checked
    assert [m.line for m in audited_answer(code).messages if m.severity == "warning"] == [1]
    # a proof that keeps a sorry of its own is not one
    again = SorryFiller(root, Lean()).fill(sorry_theorem("a"), ["exact sorry"])
    assert kept_out(again, Outcome.REFUSED) and "uses sorry" in again.reason
    # (and where no screen sees it, Lean's warning inside the declaration decides)
    inside = [LeanMessage("warning", "declaration uses 'sorry'", 1, 8)]
    hidden = SorryFiller(root, Lean(errors=lambda code: inside)).fill(
        sorry_theorem("a"), ["exact hole"]
    )
    assert kept_out(hidden, Outcome.SORRY) and "thanks to a sorry" in hidden.reason
    assert basic(root).startswith(b"theorem a : True := sorry\n")


# -- what Lean and the audit decide ----------------------------------------------------------------


def test_a_proof_lean_rejects_is_reported_not_written(tmp_path):
    original = "theorem ex : False := sorry"
    root = project(tmp_path, original)

    def unsolved(code):
        return [LeanMessage("error", "unsolved goals\n⊢ False", 1, 22)]

    result = SorryFiller(root, Lean(errors=unsolved)).fill(sorry_theorem("ex"), "by simp")
    assert kept_out(result, Outcome.REJECTED) and result.attempt_status == "failed"
    assert result.reason == "Lean rejected it: line 1: unsolved goals"
    assert basic(root) == original.encode() and not (root / ".leanloop-backups").exists()


@pytest.mark.parametrize("proof", ["by native_decide", "by decide +native"])
def test_native_code_is_refused_by_the_audit_unless_allowed(tmp_path, fixtures, proof):
    original = "theorem one_add_one : 1 + 1 = 2 := sorry\n"
    root = project(tmp_path, original)
    # the proof's axioms as Lean reported them for a native_decide proof of this theorem
    report = real_axiom_report(fixtures, "#print axioms one_add_one")
    lean = Lean(texts={"one_add_one": report})
    refused = SorryFiller(root, lean).fill(sorry_theorem("one_add_one"), proof)
    assert kept_out(refused, Outcome.REFUSED) and "allow_native is off" in refused.reason
    assert refused.attempt_status == "refused"
    assert basic(root) == original.encode()
    policy = AxiomPolicy(allow_native=True)
    allowed = SorryFiller(root, lean, policy=policy).fill(sorry_theorem("one_add_one"), proof)
    assert allowed.written and "Lean.ofReduceBool" in allowed.axioms


def test_an_error_around_the_declaration_or_a_server_failure_leaves_the_file_alone(tmp_path):
    original = "import Nope\n\ntheorem ex : True := sorry\n"
    root = project(tmp_path, original)

    def broken_import(code):
        return [LeanMessage("error", "unknown module prefix 'Nope'", 1, 0)]

    broken = SorryFiller(root, Lean(errors=broken_import)).fill(
        sorry_theorem("ex", line=3), "by simp"
    )
    assert kept_out(broken, Outcome.BROKEN) and broken.attempt_status == "error"
    assert "before the declaration does not elaborate" in broken.reason
    crashed = Lean(failure=ServerCrashed("the Lean REPL exited with status 3"))
    result = SorryFiller(root, crashed).fill(sorry_theorem("ex", line=3), "by simp")
    assert result.status is FillStatus.CHECK_FAILED and "exited" in result.reason
    assert result.judgement is None and result.attempt_status == "error"
    assert basic(root) == original.encode()


# -- the file and the database ---------------------------------------------------------------------


def test_a_failure_while_writing_leaves_the_original_intact(tmp_path, monkeypatch):
    original = "theorem a : True := sorry\n"
    root = project(tmp_path, original)

    def disk_full(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", disk_full)
    result = SorryFiller(root, Lean()).fill(sorry_theorem("a"), ["trivial"])
    monkeypatch.undo()
    assert result.status is FillStatus.WRITE_FAILED and "No space left" in result.reason
    assert basic(root) == original.encode()
    assert [p.name for p in (root / "Demo").iterdir()] == ["Basic.lean"]  # no temporary left


def test_gone_or_changed_declarations_are_not_touched(tmp_path):
    root = project(tmp_path, "theorem a : True := trivial\n\ndef f : ℕ → ℕ\n  | _ => sorry\n")
    filler = SorryFiller(root, Lean())
    assert filler.fill(sorry_theorem("a"), ["trivial"]).status is FillStatus.NOT_FOUND
    assert filler.fill(sorry_theorem("zzz"), ["trivial"]).status is FillStatus.NOT_FOUND
    matching = filler.fill(sorry_theorem("f", line=3), "0")
    assert matching.status is FillStatus.NOT_FOUND and "not ':= ...'" in matching.reason
    outside = sorry_theorem("a", path="../elsewhere.lean")
    with pytest.raises(LeanloopError, match="outside the project"):
        filler.fill(outside, ["trivial"])


def test_the_database_marks_the_theorem_proved(tmp_path):
    root = project(tmp_path, "theorem a : True := sorry\n")
    database = DynamicDatabase(tmp_path / "lean.db")
    theorem = sorry_theorem("a")
    database.add_repository(Repository(url=theorem.url, commit=theorem.commit), [theorem])
    filler = SorryFiller(root, Lean(), database=database)
    assert filler.fill(theorem, ["trivial"]).written
    (proved,) = database.get_theorems(status="sorry_proved")
    assert proved.full_name == "a" and proved.proof == "by\n  trivial"
    assert database.get_sorry_theorems() == []


def test_a_file_edited_while_lean_checks_is_left_as_the_user_made_it(tmp_path):
    root = project(tmp_path, "theorem a : True := sorry\n")
    file = root / "Demo" / "Basic.lean"
    edited = "theorem a : True := sorry\n\ntheorem b : 2 = 2 := rfl\n"
    lean = Lean(before=lambda code: file.write_text(edited))  # the user saves meanwhile
    result = SorryFiller(root, lean).fill(sorry_theorem("a"), ["trivial"])
    assert result.status is FillStatus.CHANGED and "changed while Lean checked" in result.reason
    assert file.read_text() == edited


def test_a_written_proof_the_database_cannot_record_is_still_reported_written(tmp_path):
    root = project(tmp_path, "theorem a : True := sorry\n")
    database = DynamicDatabase(tmp_path / "lean.db")  # the theorem is not in it
    filler = SorryFiller(root, Lean(), database=database)
    result = filler.fill(sorry_theorem("a"), ["trivial"])
    assert result.status is FillStatus.WRITTEN and result.backup is not None
    assert "not recorded in the database" in result.reason
    assert basic(root) == b"theorem a : True := by\n  trivial\n"


# -- a branch of its own ---------------------------------------------------------------------------


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=root, check=True, capture_output=True, text=True
    ).stdout.strip()


def committed_project(tmp_path: Path, files: dict[str, str]) -> tuple[Path, str]:
    root = tmp_path / "repo"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", ".")
    git(root, "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q", "-m", "start")
    return root, git(root, "rev-parse", "HEAD")


def test_on_a_branch_lean_checks_and_commits_what_the_branch_holds(tmp_path):
    files = {
        "Demo/Basic.lean": "import Demo.Base\n\ntheorem a : True := sorry\n",
        "Demo/Base.lean": "def base : ℕ := 1\n",
    }
    root, head = committed_project(tmp_path, files)
    # uncommitted work of the user: another file, and the file to fill itself
    (root / "Demo" / "Base.lean").write_text("def base : ℕ := 2 -- not committed\n")
    with pytest.raises(LeanloopError, match="checked out"):
        BranchWorkspace(root, "main")
    lean = Lean()
    with BranchWorkspace(root, "leanloop/proofs") as branch:
        filler = SorryFiller(root, lean, branch=branch)
        assert filler.tree == branch.worktree and filler.tree != root
        result = filler.fill(sorry_theorem("a"), ["trivial"])
        worktree = branch.worktree
    assert result.written and result.commit == git(root, "rev-parse", "leanloop/proofs")
    assert not worktree.exists()  # the worktree is gone, the branch stays
    # the branch is HEAD plus the proof, nothing else
    assert git(root, "rev-parse", "leanloop/proofs^") == head
    assert git(root, "diff", "--name-only", head, "leanloop/proofs") == "Demo/Basic.lean"
    filled = "import Demo.Base\n\ntheorem a : True := by\n  trivial\n"
    assert git(root, "show", "leanloop/proofs:Demo/Basic.lean") + "\n" == filled
    assert git(root, "show", "leanloop/proofs:Demo/Base.lean") + "\n" == files["Demo/Base.lean"]
    (code,) = lean.checked
    assert code.startswith(filled.rstrip())  # what Lean checked is what the branch holds
    # the user's file matched the branch's: it got the proof too; their other work is kept
    assert result.working_tree == "written" and basic(root) == filled.encode()
    assert (root / "Demo" / "Base.lean").read_text() == "def base : ℕ := 2 -- not committed\n"
    assert (
        git(root, "rev-parse", "HEAD") == head and git(root, "branch", "--show-current") == "main"
    )
    assert git(root, "diff", "--cached", "--name-only") == ""  # the user's index is untouched


def test_on_a_branch_a_user_s_changed_file_is_left_as_it_is(tmp_path):
    root, _head = committed_project(tmp_path, {"Demo/Basic.lean": "theorem a : True := sorry\n"})
    mine = "theorem a : True := sorry\n\ntheorem mine : 1 = 1 := rfl\n"
    (root / "Demo" / "Basic.lean").write_text(mine)
    with BranchWorkspace(root, "proofs") as branch:
        result = SorryFiller(root, Lean(), branch=branch).fill(sorry_theorem("a"), ["trivial"])
    assert result.written and result.working_tree == "left" and "differs" in result.reason
    assert basic(root) == mine.encode() and result.backup is None
    assert git(root, "show", "proofs:Demo/Basic.lean") == "theorem a : True := by\n  trivial"


# -- the pieces ------------------------------------------------------------------------------------


def test_proof_bodies_and_splices():
    assert proof_body(":= by simp") == "by simp"
    assert proof_body(["intro h", "cases h with\n| inl a => exact a\n| inr b => exact b"], 2) == (
        "by\n    intro h\n    cases h with\n    | inl a => exact a\n    | inr b => exact b"
    )
    assert proof_body(["intro h", "exact h"], 0, "\r\n") == "by\r\n  intro h\r\n  exact h"
    before = b"\xef\xbb\xbfa := sorry\r\nb\r\n"
    assert outside_span_problem(before, before.replace(b"sorry", b"rfl"), 8, 13) == ""
    # what a rewrite of the whole file would do: line endings or the mark changed
    assert "after the proof" in outside_span_problem(
        before, before.replace(b"sorry", b"rfl").replace(b"\r\n", b"\n"), 8, 13
    )
    assert outside_span_problem(before, before[3:].replace(b"sorry", b"rfl"), 8, 13) == (
        "byte 0, before the proof, would change"
    )


# -- the invariant, over generated files -----------------------------------------------------------

# Blocks of Lean source a filled declaration may sit among: commands of every kind, with and
# without indentation, that must come out of a fill exactly as they went in.
OTHER_BLOCKS = [
    "proof_wanted later : 1 = 1\n",
    'notation3 "∑ " x => x\n',
    "declare_syntax_cat myterm\n",
    "register_simp_attr my_simps\n",
    'scoped[Demo] notation "ε" => (0 : ℕ)\n',
    "open Nat in\ntheorem other : True := trivial\n",
    "/-- A doc. -/\n@[simp] lemma other2 : True := trivial\n",
    "-- a comment\n",
    "/-! # A module doc -/\n",
    "#check Nat.succ\n",
    "section\nvariable (n : ℕ)\nend\n",
    "example : True := by\n\ttrivial\n",
    "theorem open_one : False := sorry\n",
    "instance : Inhabited ℕ := ⟨0⟩\n",
    "set_option maxHeartbeats 400 in\ndef d : ℕ := 1\n",
    "/- note -/ theorem after_comment : True := trivial\n",
    'def s : String := r"\\" ++ "x"\n',
    # commands indented to column 2, where a proof's tactics may stand
    "  run_meta pure ()\n",
    '  binder_predicate x " > " y:term => `($x > $y)\n',
    "  #eval 1 + 1\n",
    "  private lemma indented : True := trivial\n",
]
#: Blocks that, right after a proof whose tactics stand at their column, read as a tactic
#: followed by a command: the fill refuses (nothing is replaced).
AMBIGUOUS_BLOCKS = frozenset(
    {
        "  open Nat in\ntheorem other_in : True := trivial\n",
        "  set_option maxHeartbeats 400 in\n  #check Nat\n",
        "  #check Nat.succ\n",
        "  open Nat in\n  theorem indented_in : True := trivial\n",
        "  set_option maxHeartbeats 400 in\ntheorem indented_in2 : True := trivial\n",
    }
)
OTHER_BLOCKS += sorted(AMBIGUOUS_BLOCKS)
# (the proof a fill replaces, what follows it on its lines and stays: a trailing comment)
BODIES = [  # (proof, what follows it on its line and stays, the column of its tactics)
    (":= sorry", "", None),
    (":= by\n  sorry", "", 2),
    (":= by\n  intro h\n  sorry", "", 2),
    (":=\n  by\n    sorry", "", 4),
    (":= by\n    intro h\n    sorry", "", 4),
    (":= by sorry", "\n  -- left for later", None),
    (":= by\n  have h : True := by\n    sorry\n  exact h", " -- done?", 2),
    (':= by\n  have h : r"\\" = "\\\\" := rfl\n  sorry', "", 2),
    (":= sorry", " theorem same_line : True := trivial", None),
    # a command on the proof's own line: after a term, after a tactic
    (":= sorry", " #check Nat", None),
    (":= sorry", " open Nat", None),
    (":= by sorry", " open Nat in #check succ", None),
]
TRAILERS = ["", "\nwhere\n  helper : True := trivial", "\ntermination_by 0", "\ndecreasing_by simp"]


@st.composite
def lean_files(draw):
    before = draw(st.lists(st.sampled_from(OTHER_BLOCKS), max_size=4))
    after = draw(st.lists(st.sampled_from(OTHER_BLOCKS), max_size=4))
    indent = draw(st.sampled_from(["", "  "]))
    after_end = draw(st.sampled_from(["", f"{indent}end Demo\n"]))
    body, kept, column = draw(st.sampled_from(BODIES))
    trailer = draw(st.sampled_from(TRAILERS))
    statement = draw(
        st.sampled_from(["theorem target : True", "theorem target (n : ℕ) :\n    n = n"])
    )
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    bom = draw(st.booleans())
    final_newline = draw(st.booleans())
    head = "namespace Demo\n\n" + "\n".join(before) + "\n"
    target = f"{statement} {body}{kept}{trailer}\n"
    tail = "\n" + "\n".join(after) + after_end
    if not final_newline:
        tail = tail.rstrip("\n")

    def encode(text: str) -> bytes:
        mark = "\ufeff" if bom else ""
        return (mark + text.replace("\n", newline)).encode()

    proof = draw(st.sampled_from([["trivial"], ["intro h", "exact h"], ["simp\nrfl"]]))
    expected_body = proof_body(proof, 0)
    # right after the proof (comments aside), a block that reads as a tactic at the tactics'
    # column
    following = [block for block in after if not block.startswith("--")]
    ambiguous = column == 2 and not trailer and bool(following)
    ambiguous = ambiguous and following[0] in AMBIGUOUS_BLOCKS
    return (
        encode(head + target + tail),
        encode(head + f"{statement} := {expected_body}{kept}{trailer}\n" + tail),
        proof,
        head.count("\n") + 1,
        ambiguous,
    )


@settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(case=lean_files())
def test_a_fill_changes_nothing_but_the_proof(tmp_path_factory, case):
    original, expected, proof, line, ambiguous = case
    root = project(tmp_path_factory.mktemp("gen"), original)
    lean = Lean()
    result = SorryFiller(root, lean).fill(sorry_theorem("Demo.target", line=line), proof)
    if ambiguous and result.status is not FillStatus.WRITTEN:  # Lean's account did not settle
        assert result.status in (FillStatus.UNSAFE, FillStatus.NOT_ACCEPTED), result.reason
        assert basic(root) == original
        return
    assert result.status is FillStatus.WRITTEN, (ambiguous, result.reason)
    assert basic(root) == expected
    (code,) = lean.checked
    assert audit_request(code)[0] == "Demo.target"


def test_a_branch_that_cannot_be_used_says_so_in_one_line(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q", "-b", "main")
    with pytest.raises(LeanloopError, match="has no commit yet"):
        BranchWorkspace(empty, "proofs")
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(LeanloopError, match="not in a git repository"):
        BranchWorkspace(plain, "proofs")


def test_a_branch_is_continued_only_when_it_is_head_plus_proofs(tmp_path):
    root, head = committed_project(tmp_path, {"Demo/Basic.lean": "theorem a : True := sorry\n"})
    git(root, "branch", "old", head)
    (root / "Demo" / "Other.lean").write_text("def x := 1\n")
    git(root, "add", ".")
    git(root, "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q", "-m", "more")
    # 'old' starts before HEAD: proofs there would not be HEAD plus the proofs
    with pytest.raises(LeanloopError, match="does not start from HEAD"):
        BranchWorkspace(root, "old")
    # a branch of an earlier run (HEAD plus its proofs) is continued
    with BranchWorkspace(root, "proofs") as branch:
        first = SorryFiller(root, Lean(), branch=branch).fill(sorry_theorem("a"), ["trivial"])
    (root / "Demo" / "Basic.lean").write_text(
        "theorem a : True := sorry\n\ntheorem b : True := sorry\n"
    )
    git(root, "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qam", "b")  # HEAD moves
    with pytest.raises(LeanloopError, match="does not start from HEAD"):
        BranchWorkspace(root, "proofs")
    assert first.written and git(root, "rev-list", "--count", "main..proofs") == "1"


def test_a_worktree_left_by_a_killed_run_does_not_block_the_next(tmp_path):
    import shutil as shell

    root, _head = committed_project(tmp_path, {"Demo/Basic.lean": "theorem a : True := sorry\n"})
    killed = BranchWorkspace(root, "proofs")
    left = killed.open()
    shell.rmtree(left.parent)  # the run died: its temporary directory is gone, git remembers it
    with BranchWorkspace(root, "proofs") as again:
        assert again.open() != left
        result = SorryFiller(root, Lean(), branch=again).fill(sorry_theorem("a"), ["trivial"])
    assert result.written
    assert "prunable" not in git(root, "worktree", "list", "--porcelain")


@pytest.mark.parametrize(
    ("declaration", "tail"),
    [
        # '#' that is no command: a finset's card, an array, Mathlib's note tactic
        ("theorem c (s : Finset ℕ) : #s = #s := by\n  calc #s = #s := by\n    sorry\n", ""),
        (
            "theorem arr : (#[1, 2] : Array ℕ).size = 2 := by\n  have : #[1] ++\n"
            "    #[2] = #[1, 2] := sorry\n  rfl\n",
            "",
        ),
        ("theorem n : True := by\n  #adaptation_note /-- a note -/\n  sorry\n", ""),
        # an attribute on the declaration's own line: the proof is still indented past it
        ("@[simp] theorem at_line : True := by\n  sorry\n", ""),
    ],
    ids=["finset card", "array", "adaptation note", "attribute on the line"],
)
def test_proofs_with_hashes_and_attributes_are_filled(tmp_path, declaration, tail):
    original = declaration + "\ntheorem zz : True := trivial\n"
    root = project(tmp_path, original)
    name = declaration.split("theorem ")[1].split()[0]
    result = SorryFiller(root, Lean()).fill(sorry_theorem(name), ["trivial"])
    assert result.status is FillStatus.WRITTEN, result.reason
    written = basic(root).decode()
    assert written.endswith("\ntheorem zz : True := trivial\n")
    assert f"theorem {name}" in written and ":= by\n  trivial\n" in written


def test_a_proof_that_would_leave_its_by_block_is_never_written(tmp_path):
    original = "theorem a : True := sorry\n\ntheorem b : (1 : ℕ) = 2 := sorry\n"
    root = project(tmp_path, original)
    lean = Lean()
    for proof in (["trivial", "variable (hf : False)", "include hf"], ["trivial\nend X"]):
        result = SorryFiller(root, lean).fill(sorry_theorem("a"), proof)
        assert kept_out(result, Outcome.REFUSED) and "is a command" in result.reason
    assert lean.checked == [] and basic(root) == original.encode()


def test_a_worktree_of_a_killed_process_is_removed(tmp_path):
    import subprocess as sp
    import sys

    root, _head = committed_project(tmp_path, {"Demo/Basic.lean": "theorem a : True := sorry\n"})
    # another process opens the branch's worktree and is killed: its directory stays
    script = (
        "import sys, os; from leanloop.agent.git_branch import BranchWorkspace; "
        f"BranchWorkspace({str(root)!r}, 'proofs').open(); os._exit(0)"
    )
    sp.run([sys.executable, "-c", script], check=True)
    listed = git(root, "worktree", "list", "--porcelain")
    (left,) = [
        line.split(" ", 1)[1] for line in listed.splitlines() if "leanloop-worktree-" in line
    ]
    assert Path(left).is_dir()
    with BranchWorkspace(root, "proofs") as again:
        assert again.open() != Path(left)
        assert SorryFiller(root, Lean(), branch=again).fill(sorry_theorem("a"), ["trivial"]).written
    assert not Path(left).exists()


def test_a_branch_with_commits_leanloop_did_not_make_is_refused(tmp_path):
    root, _head = committed_project(tmp_path, {"Demo/Basic.lean": "theorem a : True := sorry\n"})
    git(root, "checkout", "-q", "-b", "proofs")
    (root / "Demo" / "Evil.lean").write_text("theorem evil : False := sorry\n")
    git(root, "add", ".")
    git(root, "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "helper lemma")
    git(root, "checkout", "-q", "main")
    with pytest.raises(LeanloopError, match="commits leanloop did not make"):
        BranchWorkspace(root, "proofs")


def test_a_protected_theorem_is_audited_by_the_name_lean_resolves(tmp_path):
    root = project(tmp_path, "namespace Demo\n\nprotected theorem t : True := sorry\n\nend Demo\n")
    lean = Lean()
    assert SorryFiller(root, lean).fill(sorry_theorem("Demo.t", line=3), "trivial").written
    (code,) = lean.checked
    assert "\n\n#print axioms Demo.t\n" in code  # its short name does not reach it


# -- every layout: the user's other bytes stay, or nothing is written ------------------------------

# (proof, what follows it, written?) — a command after the proof at any column or on its line,
# in every family: `... in` commands left of the tactics, command words leanloop must know,
# a command on the proof's own line after a term or a tactic; and the layouts where the proof's
# end cannot be told, which are refused.
LAYOUT_FAMILIES = {
    "open in left of tactics": (
        ":= by\n    sorry", "\n  open Nat in\ntheorem o : True := trivial\n"),
    "open in left, indented theorem": (
        ":= by\n    sorry", "\n  open Nat in\n  theorem o : True := trivial\n"),
    "set_option in left of tactics": (
        ":= by\n    intro h\n    sorry", "\n  set_option maxHeartbeats 400 in\n  #check Nat\n"),
    "open in after own-line by": (":=\n  by\n    sorry", "\n  open Nat in\n#check succ\n"),
    "open in after a term": (":= sorry", "\n  open Nat in\ntheorem o : True := trivial\n"),
    "run_meta": (":= by\n  sorry", "\n  run_meta pure ()\n"),
    "run_elab": (":= by\n  sorry", "\n  run_elab pure ()\n"),
    "run_cmd": (":= by\n    sorry", "\n  run_cmd pure ()\n"),
    "binder_predicate": (":= by\n  sorry", '\n  binder_predicate x " > " y:term => `($x > $y)\n'),
    "#eval": (":= by\n  sorry", "\n  #eval 1 + 1\n"),
    "elab_rules": (":= by\n  sorry", "\n  elab_rules : tactic | `(tactic| done) => pure ()\n"),
    "initialize": (":= by\n  sorry", "\n  initialize pure ()\n"),
    "declare_syntax_cat": (":= by\n  sorry", "\n  declare_syntax_cat myterm\n"),
    "syntax": (":= by\n  sorry", '\n  syntax "mine" : tactic\n'),
    "notation3": (":= sorry", '\n  notation3 "∑ " x => x\n'),
    "add_decl_doc": (":= by\n  sorry", "\n  /-- The doc. -/\n  add_decl_doc Nat.succ\n"),
    "compile_inductive": (":= by\n  sorry", "\n  compile_inductive% Nat\n"),
    "assert_not_exists": (":= by\n  sorry", "\n  assert_not_exists Real\n"),
    "suppress_compilation": (":= by\n  sorry", "\n  suppress_compilation\n"),
    "unseal in": (":= by\n  sorry", "\n  unseal Nat.add in\n  example : True := trivial\n"),
    "irreducible_def": (":= by\n  sorry", "\n  irreducible_def k : ℕ := 1\n"),
    "alias": (":= by\n  sorry", "\n  alias o := Nat.succ\n"),
    "lemma": (":= sorry", "\n  lemma o : True := trivial\n"),
    "proof_wanted": (":= by\n  sorry", "\n  proof_wanted o : 1 = 1\n"),
    "attribute": (":= by\n  sorry", "\n  @[simp] lemma o : True := trivial\n"),
    "modifiers": (":= by\n  sorry", "\n  private noncomputable def o : ℕ := 1\n"),
    "include in": (":= by\n  sorry", "\n  include h in\n  theorem o : True := trivial\n"),
    "#check on the line": (":= sorry", " #check foo\n"),
    "open on the line": (":= sorry", " open Nat\n"),
    "open on a tactic's line": (":= by sorry", " open Nat\n"),
    "#eval after tactics": (":= by simp; sorry", " #eval 1\n"),
    "declaration on the line": (":= sorry", " private theorem o : True := trivial\n"),
    "open in on the line": (":= sorry", " open Nat in theorem o : True := trivial\n"),
    "set_option in on the line": (":= id sorry", " set_option pp.all true in #check Nat\n"),
}  # fmt: skip
REFUSED_FAMILIES = {
    # a tactic (`open Nat in` at the tactics' column) followed by a command
    "open in at the tactics' column": (
        ":= by\n  sorry", "\n  open Nat in\ntheorem o : True := trivial\n"),
    # Mathlib's `#check` tactic, or the `#check` command
    "#check at the tactics' column": (":= by\n  sorry", "\n  #check Nat\n"),
    "unknown # at the tactics' column": (":= by\n  sorry", "\n  #my_command foo\n"),
    "# word after a term": (":= foo sorry", " #s\n"),
    "operator left of the tactics": (":= by\n    exact sorry", "\n  |>.trans h\n"),
}  # fmt: skip
VARIANTS = [
    "plain", "crlf", "bom", "no final newline", "tabs", "where", "termination_by",
    "next has a doc", "nested namespaces",
]  # fmt: skip


def layout(proof: str, after: str, variant: str) -> tuple[str, str, str]:
    """A file with ``theorem target`` proved by ``proof`` and followed by ``after`` in the
    variant's form, the same file with the proof filled by ``trivial``, and the target's name."""
    clause = {
        "where": "\nwhere\n  helper : True := trivial",
        "termination_by": "\ntermination_by 0",
    }
    after = after if after.startswith("\n") or variant not in clause else after.lstrip(" ")
    trailer = clause.get(variant, "")
    if trailer and not after.startswith("\n"):  # a command on the line: the clause before it
        after = "\n" + after
    if variant == "tabs":  # a tab in a comment line after the proof (Lean allows none elsewhere)
        after = "\n-- a\ttab" + after if after.startswith("\n") else after + "-- a\ttab\n"
    if variant == "next has a doc":
        after += "\n/-- The next one. -/\ntheorem next : True := trivial\n"
    opened, closed, name = "namespace Demo\n\n", "\nend Demo\n", "Demo.target"
    if variant == "nested namespaces":
        opened = "namespace Outer\n\nnamespace Demo\n\n"
        closed, name = "\nend Demo\n\nend Outer\n", "Outer.Demo.target"
    head = opened + "theorem before : True := trivial\n\ntheorem target : True "
    original = head + proof + trailer + after + closed
    filled = head + ":= by\n  trivial" + trailer + after + closed

    def form(text: str) -> str:
        if variant == "crlf":
            text = text.replace("\n", "\r\n")
        if variant == "bom":
            text = "\ufeff" + text
        return text.rstrip("\n") if variant == "no final newline" else text

    return form(original), form(filled), name


#: (family, variant, whether it is written): a clause between the proof and what follows it
#: ends the proof before anything unclear.
LAYOUTS = [
    (family, variant, family in LAYOUT_FAMILIES or variant in ("where", "termination_by"))
    for family in (*LAYOUT_FAMILIES, *REFUSED_FAMILIES)
    for variant in VARIANTS
]


@pytest.mark.parametrize(
    ("family", "variant", "written"),
    LAYOUTS,
    ids=[f"{'written' if w else 'refused'}: {f} ({v})" for f, v, w in LAYOUTS],
)
def test_every_layout_keeps_the_user_s_text_or_is_refused(tmp_path, family, variant, written):
    proof, after = {**LAYOUT_FAMILIES, **REFUSED_FAMILIES}[family]
    original, filled, name = layout(proof, after, variant)
    root = project(tmp_path, original.encode())
    lean = Lean()
    result = SorryFiller(root, lean).fill(
        sorry_theorem(name, line=original.count("\n", 0, original.index("theorem target")) + 1),
        ["trivial"],
    )
    # Lean's account settles where the proof ends; where the layout is ambiguous the stand-in's
    # reading of the filled file may not confirm it: written as expected, or left untouched
    if not written and result.status is not FillStatus.WRITTEN:
        assert result.status in (FillStatus.UNSAFE, FillStatus.NOT_ACCEPTED), result.reason
        assert basic(root) == original.encode()
    else:
        assert result.status is FillStatus.WRITTEN, result.reason
        assert basic(root) == filled.encode()
    if written:
        assert basic(root) == filled.encode()
        (code,) = lean.checked
        assert audit_request(code)[0] == name
        # Lean judged the declaration up to its proof and clause, the next command after it
        # (but a line of operators after a clause goes on with the clause's term)
        # (the audit of the name goes after the declaration's line: a command on that line
        # stays beside the proof, as in the file)
        declaration = code.split("\n\n#print axioms target")[0]
        ends = ("|>.trans h",) if "|>" in after else ("trivial", "by 0")
        last = declaration.rsplit("\n", 1)[-1]
        assert declaration.endswith(ends) or last.startswith(("  trivial ", "trivial ")), last
    else:  # without Lean's account an unclear end is refused: not a byte written
        root = project(tmp_path / "unaccounted", original.encode())
        lean = Lean(account=False)
        line = original.count("\n", 0, original.index("theorem target")) + 1
        result = SorryFiller(root, lean).fill(sorry_theorem(name, line=line), ["trivial"])
        assert result.status is FillStatus.UNSAFE, (result.status, result.reason)
        assert "where its proof ends is unclear (line " in result.reason
        assert basic(root) == original.encode() and lean.checked == []
        assert not (root / ".leanloop-backups").exists()


# -- files that may not be written -------------------------------------------------------------


@pytest.mark.parametrize(
    ("what", "mode", "reason"),
    [
        ("file", 0o444, "the file is read-only (mode 0444)"),
        ("file", 0o400, "the file is read-only (mode 0400)"),
        ("directory", 0o555, "its directory is read-only (mode 0555)"),
    ],
)
def test_a_read_only_file_is_refused_before_lean_is_asked(tmp_path, what, mode, reason):
    original = "theorem a : True := sorry\n"
    root = project(tmp_path, original)
    file = root / "Demo" / "Basic.lean"
    target = file if what == "file" else file.parent
    target.chmod(mode)
    try:
        lean = Lean()
        result = SorryFiller(root, lean).fill(sorry_theorem("a"), ["trivial"])
        assert result.status is FillStatus.READ_ONLY, result.reason
        assert result.reason == f"{reason}; it was left as it is"
        assert result.attempt_status == "error"  # tried again once it may be written
        assert result.proof == "by\n  trivial" and result.backup is None
        assert lean.checked == [] and basic(root) == original.encode()
        assert stat.S_IMODE(target.stat().st_mode) == mode
        assert not (root / ".leanloop-backups").exists()  # not even the backup
        assert sorted(p.name for p in file.parent.iterdir()) == ["Basic.lean"]
    finally:
        target.chmod(0o755 if what == "directory" else 0o644)


def test_a_file_that_becomes_read_only_while_lean_checks_is_not_written(tmp_path):
    original = "theorem a : True := sorry\n"
    root = project(tmp_path, original)
    file = root / "Demo" / "Basic.lean"
    lean = Lean(before=lambda code: file.chmod(0o444))  # the user locks it meanwhile
    result = SorryFiller(root, lean).fill(sorry_theorem("a"), ["trivial"])
    assert result.status is FillStatus.READ_ONLY and len(lean.checked) == 1
    assert result.reason == (
        "Lean accepted the proof but it was not written: the file is read-only (mode 0444)"
    )
    assert result.axioms == ("propext",)
    assert basic(root) == original.encode() and stat.S_IMODE(file.stat().st_mode) == 0o444
    assert not (root / ".leanloop-backups").exists()


def test_a_file_this_user_may_not_write_is_refused(tmp_path, monkeypatch):
    original = "theorem a : True := sorry\n"
    root = project(tmp_path, original)
    file = root / "Demo" / "Basic.lean"
    allowed = os.access

    def owned_by_another(path, mode, **kwargs):  # what the system answers another user
        return False if Path(path) == file and mode & os.W_OK else allowed(path, mode, **kwargs)

    monkeypatch.setattr(os, "access", owned_by_another)
    lean = Lean()
    result = SorryFiller(root, lean).fill(sorry_theorem("a"), ["trivial"])
    assert result.status is FillStatus.READ_ONLY and "you may not write it" in result.reason
    assert lean.checked == [] and basic(root) == original.encode()


def test_an_immutable_file_is_refused(tmp_path):
    original = "theorem a : True := sorry\n"
    root = project(tmp_path, original)
    file = root / "Demo" / "Basic.lean"
    marked = subprocess.run(["chattr", "+i", str(file)], capture_output=True, check=False)
    if marked.returncode != 0:
        pytest.skip(f"this system cannot mark a file immutable: {marked.stderr.decode().strip()}")
    try:
        lean = Lean()
        result = SorryFiller(root, lean).fill(sorry_theorem("a"), ["trivial"])
        assert result.status is FillStatus.READ_ONLY, result.reason
        assert "immutable" in result.reason and lean.checked == []
        assert basic(root) == original.encode()
        assert not (root / ".leanloop-backups").exists()
    finally:
        subprocess.run(["chattr", "-i", str(file)], check=True)


def test_on_a_branch_a_read_only_working_tree_file_is_left(tmp_path):
    root, _head = committed_project(tmp_path, {"Demo/Basic.lean": "theorem a : True := sorry\n"})
    mine = root / "Demo" / "Basic.lean"
    mine.chmod(0o444)
    try:
        with BranchWorkspace(root, "proofs") as branch:
            result = SorryFiller(root, Lean(), branch=branch).fill(sorry_theorem("a"), ["trivial"])
        assert result.written and result.working_tree == "left" and result.backup is None
        assert "read-only (mode 0444)" in result.reason
        assert basic(root) == b"theorem a : True := sorry\n"
        assert git(root, "show", "proofs:Demo/Basic.lean") == "theorem a : True := by\n  trivial"
    finally:
        mine.chmod(0o644)


@pytest.mark.parametrize(
    ("span", "problem"),
    [
        (":= by\n  sorry\n  run_meta pure ()", "line 3 of the proof: 'run_meta' starts a command"),
        (":= sorry #eval 1", "line 1 of the proof: '#eval' starts a command"),
        (":= sorry open Nat", "line 1 of the proof: 'open' without 'in' starts a command"),
        (":= sorry private theorem b", "line 1 of the proof: 'private' starts a command"),
        (":= by\n  simp\n  binder_predicate x", "'binder_predicate' starts a command"),
        (":= by\n  exact (foo\n theorem", "'theorem' starts a command"),  # any depth
        (":= by\n  open Nat in simp\n  set_option x 1 in\n  sorry", ""),
        (":= by\n  #adaptation_note /-- a note -/\n  sorry", ""),
        (":= by\n  have : #s = #s := rfl\n  #check s\n  sorry", ""),  # #check: a tactic too
        (":= by\n  simp [alias_foo, (run_meta)]", ""),  # not at the proof's depth
    ],
)
def test_a_span_is_checked_for_commands_on_its_own(span, problem):
    found = span_problem(span)
    assert (problem in found and found) if problem else found == ""


def test_a_proof_that_would_change_how_the_rest_of_the_file_reads_is_refused(tmp_path):
    """Lean's account of the file before the fill lists the commands after the declaration; the
    filled file must hold the same ones: a proof ending in a line comment would swallow the
    command after it on its line (Lean reads `#eval` there as a command, never a term)."""
    original = "theorem a : True := sorry #eval 1\n\ntheorem b : 1 = 1 := rfl\n"
    root = project(tmp_path, original)
    lean = Lean()
    result = SorryFiller(root, lean).fill(sorry_theorem("a"), "trivial -- done")
    assert kept_out(result, Outcome.REFUSED), result.reason
    assert "'eval' command expected" in result.reason
    assert basic(root) == original.encode()
    assert len(lean.originals) == 1 and len(lean.checked) == 1
    # the same proof without the comment keeps the #eval and is written
    assert SorryFiller(root, lean).fill(sorry_theorem("a"), "trivial").written
    assert basic(root) == original.replace("sorry", "trivial").encode()


def test_lean_s_account_of_a_file_is_asked_once_per_content(tmp_path):
    original = "theorem a : True := sorry\n\ntheorem b : True := sorry\n"
    root = project(tmp_path, original)
    lean = Lean(errors=lambda code: [])
    filler = SorryFiller(root, lean)
    assert filler.fill(sorry_theorem("a"), "trivial").written
    assert filler.fill(sorry_theorem("b", line=3), "trivial").written
    # the file changed after the first fill: Lean was asked about each content once
    assert len(lean.originals) == 2 and lean.originals[0] != lean.originals[1]


# -- how a fill is stored as the attempt -----------------------------------------------------------


def stored_attempt(root: Path, lean: Lean, proof: list[str]) -> tuple[FillResult, ProofAttempt]:
    """The attempt a sorry run stores for a proof of ``a`` the engine found, once the write-back
    (``SorryWriter``, the run's hook) has offered it to the file on ``lean``."""
    from leanloop.agent.proving import SorryWriter
    from leanloop.prover.config import ProverConfig

    theorem = sorry_theorem("a")
    writer = SorryWriter(
        root,
        database=None,
        branch=None,
        backup_dir=root / BACKUP_DIR / "now",
        config=ProverConfig(),
        worktree_servers=None,
    )
    found = ProofAttempt(
        run="r",
        url=theorem.url,
        commit=theorem.commit,
        file_path=theorem.file_path,
        full_name=theorem.full_name,
        status=AttemptStatus.PROVED,
        proof=tuple(proof),
        axioms=("propext",),
    )
    stored = writer(theorem, found, lambda: contextlib.nullcontext(lean))
    (fill,) = writer.results.values()
    return fill, stored


#: A Lean whose judgement on the filled declaration is each outcome, in ``import Nope\n\n
#: theorem a : True := sorry``: the declaration is on line 3.
JUDGED = {
    Outcome.ACCEPTED: lambda: Lean(),
    Outcome.REJECTED: lambda: Lean(errors=lambda code: [LeanMessage("error", "type mismatch", 3)]),
    Outcome.SORRY: lambda: Lean(
        errors=lambda code: [LeanMessage("warning", "declaration uses 'sorry'", 3, 8)]
    ),
    Outcome.REFUSED: lambda: Lean(axioms={"a": ["propext", "sorryAx"]}),
    Outcome.BROKEN: lambda: Lean(
        errors=lambda code: [LeanMessage("error", "unknown module prefix 'Nope'", 1, 0)]
    ),
}


@pytest.mark.parametrize("outcome", list(Outcome))
def test_a_fill_is_stored_as_its_judgement_reads(tmp_path, outcome):
    """The stored status of a fill Lean judged is ``AttemptStatus.judged`` of that judgement,
    whatever its outcome: the write-back has no reading of Lean's verdict of its own."""
    original = "import Nope\n\ntheorem a : True := sorry\n"
    root = project(tmp_path, original)
    fill, stored = stored_attempt(root, JUDGED[outcome](), ["trivial"])
    assert fill.judgement is not None and fill.judgement.outcome is outcome, fill.reason
    assert stored.status is AttemptStatus.judged(fill.judgement) is fill.attempt_status
    assert fill.written is (outcome is Outcome.ACCEPTED)
    assert fill.status is (FillStatus.WRITTEN if fill.written else FillStatus.NOT_ACCEPTED)
    if fill.written:
        assert stored.proof == ("trivial",) and basic(root) != original.encode()
    else:  # the attempt keeps Lean's reason, and no proof
        assert stored.proof is None and stored.error == fill.judgement.reason
        assert basic(root) == original.encode()


def test_a_proof_lean_accepted_but_not_written_is_stored_as_an_error(tmp_path, monkeypatch):
    """Whatever kept an accepted proof out of its file (here the disk), the attempt is stored
    as an error, tried again by the next run; a proof Lean did not judge is one too."""
    original = "theorem a : True := sorry\n"
    root = project(tmp_path, original)

    def disk_full(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", disk_full)
    fill, stored = stored_attempt(root, Lean(), ["trivial"])
    monkeypatch.undo()
    assert fill.status is FillStatus.WRITE_FAILED and fill.judgement is not None
    assert fill.judgement.accepted and AttemptStatus.judged(fill.judgement) is AttemptStatus.PROVED
    assert stored.status is AttemptStatus.ERROR and stored.proof is None
    assert "No space left" in (stored.error or "")
    crashed = Lean(failure=ServerCrashed("the Lean REPL exited with status 3"))
    fill, stored = stored_attempt(root, crashed, ["trivial"])
    assert fill.status is FillStatus.CHECK_FAILED and fill.judgement is None
    assert stored.status is AttemptStatus.ERROR and basic(root) == original.encode()


def test_a_fill_result_holds_the_judgement_its_status_needs():
    """A written fill without an accepting judgement, or one not accepted without the judgement
    that did not accept it, cannot be made."""
    with pytest.raises(ValueError, match="only when Lean's judgement accepted it"):
        FillResult("a", "A.lean", FillStatus.WRITTEN, "by trivial")
    with pytest.raises(ValueError, match="needs the judgement"):
        FillResult(
            "a",
            "A.lean",
            FillStatus.NOT_ACCEPTED,
            "by trivial",
            judgement=Judgement(Outcome.ACCEPTED),
        )
