"""End-to-end tests against a real Lean toolchain. They run wherever ``lake`` is on the PATH (or
in elan's bin directory) and a Lean REPL executable is found (``$LEANLOOP_REPL``, or ``repl`` on
the PATH); elsewhere they are skipped, saying why."""

from __future__ import annotations

import pytest

from leanloop.lean.audit import Outcome
from leanloop.lean.project import open_project
from leanloop.lean.repl import ReplServer
from leanloop.lean.server import ProofFinished, ProofState, TacticFailed
from leanloop.lean.toolchain import find_executable, find_server

pytestmark = pytest.mark.lean


@pytest.fixture(scope="module")
def lean_project(tmp_path_factory):
    lake = find_executable("lake")
    if lake is None:
        pytest.skip("no Lean toolchain here (lake not found)")
    repl = find_server("repl")
    if repl is None:
        pytest.skip("lake found but no Lean REPL: set LEANLOOP_REPL to test the REPL backend")
    root = tmp_path_factory.mktemp("leanproject")
    # no lean-toolchain file: lake uses the default toolchain, which the REPL must match
    (root / "lakefile.lean").write_text("import Lake\nopen Lake DSL\npackage demo\nlean_lib Demo\n")
    (root / "Demo.lean").write_text(
        "theorem add_zero' (n : Nat) : n + 0 = n := by\n  simp\n\n"
        "theorem open_one : 1 + 1 = 2 := by\n  sorry\n"
    )
    return open_project(root), lake, repl


@pytest.fixture
def server(lean_project):
    project, lake, repl = lean_project
    with ReplServer.launch(project.root, repl, lake=lake, timeout=120) as server:
        yield server


def test_check_verdicts(server):
    assert server.check("theorem t : 1 + 1 = 2 := by decide").verdict is Outcome.ACCEPTED
    assert server.check("theorem t : 1 + 1 = 3 := by decide").verdict is Outcome.REJECTED
    assert server.check("theorem t : 1 + 1 = 2 := by sorry").verdict is Outcome.SORRY


def test_tactics(server):
    state = server.start_proof("∀ p q : Prop, p ∧ q → q ∧ p")
    state = server.run_tactic(state, "intro p q h")
    assert isinstance(state, ProofState)
    assert isinstance(server.run_tactic(state, "exact nonexistent_lemma"), TacticFailed)
    assert isinstance(server.run_tactic(state, "exact ⟨h.2, h.1⟩"), ProofFinished)


def test_trace_into_database(lean_project, tmp_path):
    from leanloop.database import DynamicDatabase

    project, _, _ = lean_project
    db = DynamicDatabase(tmp_path / "real.db")
    report = db.trace_repository(path=project.root, build=False)
    assert report.counts.theorems_added == 2
    assert [t.full_name for t in db.get_sorry_theorems()] == ["open_one"]


def test_the_audit_on_real_lean(server):
    """leanloop's audited check as real Lean answers it: an earlier sorry does not count, the
    axioms read at top level are in full, native code and sorry are refused."""
    from leanloop.lean.audit import AuditedCode, check_declaration
    from leanloop.lean.axioms import AxiomPolicy

    text = (
        "theorem early : 1 = 2 := sorry\n\nnamespace N\nopen Classical\n\n"
        "theorem t (p : Prop) : p ∨ ¬p := by\n  exact em p\n"
    )
    start = text.index("theorem t")
    code = AuditedCode.around(text, start, len(text), "N.t", (("namespace", "N"),), "t")
    judgement, _ = check_declaration(server, code, AxiomPolicy())
    assert judgement.accepted, judgement.reason
    assert "Classical.choice" in judgement.axioms  # in full, though Classical was open
    for proof, why in (("native_decide", "allow_native"), ("sorry", "sorry")):
        source = f"theorem n : 2 + 2 = 4 := by\n  {proof}\n"
        audited = AuditedCode.around(source, 0, len(source), "n")
        refused, _ = check_declaration(server, audited, AxiomPolicy())
        assert refused.outcome in (Outcome.REFUSED, Outcome.SORRY) and why in refused.reason


def test_a_sorry_filled_by_real_lean(lean_project, tmp_path):
    """The write-back of the second sorry of a file, checked by real Lean and written."""
    import shutil

    from leanloop.agent.sorry_filling import SorryFiller
    from leanloop.data.records import Pos, Theorem, TheoremStatus

    project, lake, repl = lean_project
    root = tmp_path / "copy"
    shutil.copytree(project.root, root, ignore=shutil.ignore_patterns(".lake"))
    (root / "Demo.lean").write_text(
        "theorem first : 1 = 2 := sorry\n\ntheorem open_one : 1 + 1 = 2 := by\n  sorry\n"
    )
    theorem = Theorem(
        url=str(root), commit="c", file_path="Demo.lean", full_name="open_one",
        start=Pos(3, 1), end=Pos(4, 8), status=TheoremStatus.SORRY,
    )  # fmt: skip
    with ReplServer.launch(root, repl, lake=lake, timeout=120) as server:
        result = SorryFiller(root, server).fill(theorem, ["decide"])
    assert result.written, result.reason
    assert (root / "Demo.lean").read_text().endswith(":= by\n  decide\n")
