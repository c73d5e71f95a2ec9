"""prove_sorries: for each open sorry, the proving engine searches on a pooled server and checks
what it finds with Lean (audited); the engine's hook writes back only what Lean accepted in the
file (atomically, with a backup; a failure while writing leaves the file intact); each attempt
is recorded, a rerun skips what a run finished, a branch gets its own worktree, and a report
comes as JSON, Markdown and a plot; without a project, a replay that writes nothing.

Lean's verdicts on whole code are its recorded answers where one exists for the code checked
(the Kimina server's verdict on a Mathlib file, the REPL's on a core-Lean file); for code with
no recorded answer, and for the answer to ``#print axioms``, the server builds leanloop's own
verdict objects (``tests/audit_standin.py``). The search steps are leanloop's own objects
following a script: what prove_sorries does with a search's outcome."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
from pathlib import Path

import pytest

from leanloop.agent.proving import prove_sorries
from leanloop.data.records import AttemptStatus, Pos, Repository, Theorem, TheoremStatus
from leanloop.database import DynamicDatabase
from leanloop.errors import LeanloopError
from leanloop.lean.repl import ReplServer
from leanloop.lean.server import (
    CheckResult,
    LeanMessage,
    LeanServer,
    ProofFinished,
    ProofState,
    TacticFailed,
)
from leanloop.lean.transcript import TranscriptMismatch
from leanloop.prover.recorded import RecordedProver
from leanloop.prover.replay import ReplayServer
from tests.audit_standin import audited_answer, without_audit
from tests.helpers import sample_theorems
from tests.test_search_repl import Canned, Recorded

REPO = Repository(url="https://example.org/demo", commit="d" * 40)
#: the sorries of the demo project and the script each one's search follows
FILES = {
    # Kimina's Lean server accepted this file, recorded with its proof (the 'proof1' row)
    "Simple.lean": "import Mathlib\n\ntheorem simple_add : 2 + 2 = 4 := sorry\n",
    # the REPL rejected this file with its proof ('unsolved goals', the 'incomplete' test)
    "Incomplete.lean": "def f (x : Bool) : Nat := sorry",
    # a proof by native code, which the audit refuses; one theorem nothing is found for
    "Other.lean": "theorem two : 2 = 2 := sorry\n\ntheorem nope : 1 = 2 := sorry\n",
    # two sorries: the second is proved while the first stays open
    "Two.lean": "theorem first : 1 = 2 := sorry\n\ntheorem second : 2 = 2 := by\n  sorry\n",
}
SCRIPTS = {
    "simple_add": ["simp"],
    "f": ["by_cases x", "{ apply Nat.succ }"],
    "two": ["native_decide"],
    "second": ["rfl"],
}
#: the axioms the audit's stand-in answer reports for each proof (native code for 'two')
AXIOMS = {"two": ["Lean.ofReduceBool", "Lean.trustCompiler"], "second": []}
ACCEPTED = "import Mathlib\n\ntheorem simple_add : 2 + 2 = 4 := by\n  simp\n"


class RecordedVerdicts:
    """Lean's recorded verdicts on whole files (the Kimina server's and the REPL's), looked up
    for the code before its audit lines; the audit's answer is leanloop's own object."""

    def __init__(self, fixtures: Path, transcripts: dict) -> None:
        path = fixtures / "kimina_verdicts" / "verdicts.jsonl"
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        self.kimina = {
            row["code"].rstrip(): row["result"]["results"][0]["response"]
            for row in rows
            if not row["result"]["results"][0]["error"]
        }
        self.repl = ReplServer(
            Recorded(*(t for t in transcripts.values() if not t["needs_mathlib"]))
        )
        self.recorded: list[str] = []  # the codes whose verdict was Lean's recorded one

    def check(self, code: str) -> CheckResult:
        body = without_audit(code).rstrip()
        if body in self.kimina:
            self.recorded.append(body)
            messages = [
                LeanMessage(m["severity"], m["data"], m["pos"]["line"], m["pos"]["column"])
                for m in self.kimina[body].get("messages", [])
            ]
        else:
            try:
                messages = list(self.repl.check(body).messages)
                self.recorded.append(body)
            except TranscriptMismatch:  # no recorded answer: leanloop's own verdict object
                messages = []
        return audited_answer(code, messages, AXIOMS)


class ScriptedLean(LeanServer):
    """Search steps as leanloop's own objects, following ``SCRIPTS``; whole files checked by
    ``verdicts``."""

    backend = "scripted"

    def __init__(self, verdicts: RecordedVerdicts) -> None:
        super().__init__()
        self.verdicts = verdicts
        self.checked: list[str] = []
        self.closed = False
        self.live: set[int] = set()
        self._ids = itertools.count()
        self._states: dict[int, tuple[str, int]] = {}

    @property
    def generation(self) -> int:
        return 1

    def start_theorem(self, theorem):
        return self._state(theorem.full_name, 0)

    def _state(self, name: str, index: int) -> ProofState:
        state = ProofState(next(self._ids), (f"{name} step {index}",), 1, id(self))
        self._states[state.id] = (name, index)
        self.live.add(state.id)
        return state

    def release(self, *states):
        for state in states:
            self.live.discard(state.id)

    def run_tactic(self, state, tactic, *, goal=None):
        name, index = self._states[state.id]
        script = SCRIPTS.get(name, [])
        if index < len(script) and tactic == script[index]:
            if index + 1 == len(script):
                return ProofFinished(next(self._ids))
            return self._state(name, index + 1)
        return TacticFailed("not in the script")

    def check(self, code):
        self.checked.append(code)
        return self.verdicts.check(code)

    def close(self) -> None:
        self.closed = True

    start_proof = open_sorries = None


def scripted_prover(**config) -> Canned:
    table = {
        f"{name} step {i}": [t] for name, tactics in SCRIPTS.items() for i, t in enumerate(tactics)
    }
    return Canned(table, **config)


@pytest.fixture
def demo(tmp_path, fixtures, transcripts):
    root = tmp_path / "demo"
    root.mkdir()
    for name, text in FILES.items():
        (root / name).write_text(text)
    theorems = []
    for name, text in FILES.items():
        for line, content in enumerate(text.splitlines(), start=1):
            if content.startswith(("theorem ", "def ")):
                theorems.append(
                    Theorem(
                        url=REPO.url,
                        commit=REPO.commit,
                        file_path=name,
                        full_name=content.split()[1],
                        start=Pos(line, 1),
                        end=Pos(line, len(content)),
                        status=TheoremStatus.SORRY,
                    )
                )
    database = DynamicDatabase(tmp_path / "lean.db")
    database.add_repository(REPO, theorems)
    servers: list[ScriptedLean] = []

    def factory() -> ScriptedLean:
        servers.append(ScriptedLean(RecordedVerdicts(fixtures, transcripts)))
        return servers[-1]

    return root, database, factory, servers


def test_only_what_lean_accepted_is_written(demo, tmp_path):
    root, database, factory, servers = demo
    theorems = database.get_sorry_theorems(REPO)
    names = ["simple_add", "f", "two", "nope", "first", "second"]
    assert [t.full_name for t in theorems] == names
    seen: list[tuple[int, int]] = []
    report = prove_sorries(
        theorems,
        scripted_prover(),
        root,
        servers=factory,
        database=database,
        run="sorries",
        progress=lambda done, total: seen.append((done, total)),
    )
    rows = {row.full_name: row for row in report.rows}
    assert {name: row.outcome for name, row in rows.items()} == {
        "simple_add": "written",
        "f": "failed",
        "two": "refused",
        "nope": "failed",
        "first": "failed",
        "second": "written",
    }
    assert seen == [(i, 6) for i in range(7)]
    assert len(servers) == 1 and servers[0].closed  # one warm server for every theorem
    assert not servers[0].live  # every proof state was released

    # accepted: the file is exactly the one Lean accepted, the original kept as a backup
    assert (root / "Simple.lean").read_text() == ACCEPTED
    assert Path(rows["simple_add"].backup).read_text() == FILES["Simple.lean"]
    assert Path(rows["simple_add"].backup).is_relative_to(root / ".leanloop-backups")
    assert rows["simple_add"].proof == "by\n  simp" and rows["simple_add"].proof_length == 1
    assert rows["simple_add"].status is AttemptStatus.PROVED
    assert rows["simple_add"].axioms == ["propext"]
    # the second sorry of Two.lean is proved while the first stays open: Lean's warning about
    # the first one's sorry did not decide the verdict on the second, in the search's check
    # nor in the file's
    assert (root / "Two.lean").read_text() == (
        "theorem first : 1 = 2 := sorry\n\ntheorem second : 2 = 2 := by\n  rfl\n"
    )
    assert rows["second"].axioms == []
    proved = {t.full_name: t.proof for t in database.get_theorems(REPO, status="sorry_proved")}
    assert proved == {"simple_add": "by\n  simp", "second": "by\n  rfl"}

    # Lean rejected f's proof when the search checked it whole: never offered to the file
    assert (root / "Incomplete.lean").read_text() == FILES["Incomplete.lean"]
    assert rows["f"].status is AttemptStatus.FAILED and "unsolved goals" in rows["f"].detail
    # native code: Lean accepted it, the audit refused it; nothing found for the others
    assert rows["two"].status is AttemptStatus.REFUSED
    assert "Lean.ofReduceBool" in rows["two"].detail and "allow_native" in rows["two"].detail
    assert (root / "Other.lean").read_text() == FILES["Other.lean"]
    assert rows["nope"].proof is None and rows["first"].proof is None
    checked = [without_audit(code) for code in servers[0].checked]
    recorded = servers[0].verdicts.recorded
    assert ACCEPTED in checked and "def f (x : Bool) : Nat := by\n  by_cases x\n" in "".join(
        checked
    )
    assert ACCEPTED.rstrip() in recorded and any(c.startswith("def f") for c in recorded)
    # every check is audited, but Lean's account of a file as it was before a fill
    originals = [code for code in servers[0].checked if "#print axioms" not in code]
    assert originals and all(code in FILES.values() for code in originals)
    remaining = [t.full_name for t in database.get_sorry_theorems(REPO)]
    assert remaining == ["f", "two", "nope", "first"]

    stored = {a.full_name: a for a in database.get_attempts("sorries")}
    assert stored["simple_add"].status is AttemptStatus.PROVED
    assert stored["simple_add"].environment == "lean"
    assert stored["simple_add"].axioms == ("propext",)
    assert stored["two"].status is AttemptStatus.REFUSED and stored["two"].proof is None

    written = report.write(tmp_path / "report")
    assert [p.name for p in written] == ["report.json", "report.md", "report.png"]
    data = json.loads(written[0].read_text())
    assert data["environment"] == "lean" and data["mode"] == "search"
    assert [r["outcome"] for r in data["rows"]] == [rows[n].outcome for n in names]
    markdown = written[1].read_text()
    assert "| `simple_add` | `Simple.lean` | written | 1 |" in markdown
    assert "| propext |" in markdown
    assert "```lean\nby\n  simp\n```" in markdown
    assert "2 of 6 sorries proved by Lean and written" in report.summary()

    # the same run again: everything finished is skipped, Lean is not asked again
    again = prove_sorries(
        theorems, scripted_prover(), root, servers=factory, database=database, run="sorries"
    )
    assert [row.outcome for row in again.rows] == ["skipped"] * 6
    assert [row.status for row in again.rows] == [row.status for row in report.rows]
    assert len(servers) == 1  # no server was even started
    assert (root / "Simple.lean").read_text() == ACCEPTED


def test_native_code_is_accepted_where_the_user_allows_it(demo):
    root, database, factory, _ = demo
    (two,) = [t for t in database.get_sorry_theorems(REPO) if t.full_name == "two"]
    report = prove_sorries(
        [two], scripted_prover(allow_native=True), root, servers=factory, database=database
    )
    (row,) = report.rows
    assert row.outcome == "written" and row.axioms == ["Lean.ofReduceBool", "Lean.trustCompiler"]
    assert (
        (root / "Other.lean").read_text().startswith("theorem two : 2 = 2 := by\n  native_decide\n")
    )


def test_a_failure_while_writing_leaves_the_file_intact(demo, monkeypatch):
    root, database, factory, _ = demo
    (simple,) = [t for t in database.get_sorry_theorems(REPO) if t.full_name == "simple_add"]

    def disk_full(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", disk_full)
    report = prove_sorries(
        [simple], scripted_prover(), root, servers=factory, database=database, run="full"
    )
    monkeypatch.undo()
    (row,) = report.rows
    assert row.outcome == "write_failed" and "No space left on device" in row.detail
    assert (root / "Simple.lean").read_text() == FILES["Simple.lean"]
    assert sorted(p.name for p in root.iterdir() if p.is_file()) == sorted(FILES)  # no temporary
    assert "simple_add" in {t.full_name for t in database.get_sorry_theorems(REPO)}
    (attempt,) = database.get_attempts("full")
    assert attempt.status is AttemptStatus.ERROR  # tried again by the next call of the run
    again = prove_sorries(
        [simple], scripted_prover(), root, servers=factory, database=database, run="full"
    )
    assert again.rows[0].outcome == "written"
    assert (root / "Simple.lean").read_text() == ACCEPTED


def test_proofs_go_on_a_branch_checked_in_its_own_worktree(demo):
    root, database, factory, _ = demo

    def git(*args):
        return subprocess.run(
            ["git", *args], cwd=root, check=True, capture_output=True, text=True
        ).stdout.strip()

    git("init", "-q", "-b", "main")
    git("add", ".")
    git("-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q", "-m", "start")
    head = git("rev-parse", "HEAD")
    (root / "Two.lean").write_text(FILES["Two.lean"] + "\n-- my work in progress\n")
    started_in: list[Path] = []

    def worktree_servers(project_root):
        started_in.append(project_root)
        return factory

    theorems = database.get_sorry_theorems(REPO)
    with pytest.raises(LeanloopError, match="checked out"):
        prove_sorries(theorems, scripted_prover(), root, servers=factory, branch="main")
    with pytest.raises(LeanloopError, match="cannot start the given Lean servers there"):
        prove_sorries(theorems, scripted_prover(), root, servers=factory, branch="proofs")
    report = prove_sorries(
        theorems,
        scripted_prover(),
        root,
        servers=factory,
        database=database,
        branch="proofs",
        worktree_servers=worktree_servers,
    )
    assert report.branch == "proofs"
    assert len(started_in) == 1 and started_in[0] != root and not started_in[0].exists()
    rows = {row.full_name: row for row in report.written}
    assert set(rows) == {"simple_add", "second"}
    assert git("rev-parse", "proofs") == rows["second"].git_commit
    assert git("rev-parse", "HEAD") == head and git("symbolic-ref", "--short", "HEAD") == "main"
    # the branch is HEAD plus the two proofs, nothing else (the user's edit is not in it)
    assert git("rev-list", "--count", f"{head}..proofs") == "2"
    assert set(git("diff", "--name-only", head, "proofs").split()) == {"Simple.lean", "Two.lean"}
    assert git("show", "proofs:Simple.lean") + "\n" == ACCEPTED
    assert "work in progress" not in git("show", "proofs:Two.lean")
    # the working tree: Simple.lean still matched and got the proof; Two.lean was left
    assert rows["simple_add"].working_tree == "written"
    assert (root / "Simple.lean").read_text() == ACCEPTED
    assert rows["second"].working_tree == "left"
    assert (root / "Two.lean").read_text().endswith("-- my work in progress\n")
    assert "sorry" in (root / "Two.lean").read_text().split("theorem second")[1]
    assert "working tree: left" in report.to_markdown()


def test_without_a_project_it_is_a_replay_that_writes_nothing(sample_dir, tmp_path):
    theorems = [t for t in sample_theorems(sample_dir) if t.traced_tactics][:6]
    database = DynamicDatabase(tmp_path / "lean.db")
    database.import_leandojo(sample_dir)
    report = prove_sorries(
        theorems,
        RecordedProver(sample_dir),
        None,
        servers=lambda: ReplayServer(theorems),
        database=database,
        run="replay",
    )
    assert report.environment == "replay" and not report.written
    assert {row.outcome for row in report.rows} == {"replayed"}
    assert all(row.status is AttemptStatus.REPLAYED for row in report.rows)
    for row, theorem in zip(report.rows, theorems, strict=True):  # the search may find shortcuts
        assert 1 <= row.proof_length <= len(theorem.traced_tactics) and row.proof
    assert "not proving" in report.summary()
    assert "replay of recorded steps without Lean" in report.to_markdown()
    assert {a.environment for a in database.get_attempts("replay")} == {"replay"}
    # whole-proof mode: each recorded proof offered whole, replayed tactic by tactic
    whole = Canned(whole=["\n".join(s.tactic for s in theorems[0].traced_tactics)])
    (row,) = prove_sorries(
        theorems[:1], whole, None, servers=lambda: ReplayServer(theorems), mode="whole"
    ).rows
    assert row.outcome == "replayed" and row.proof_length == len(theorems[0].traced_tactics)
    with pytest.raises(LeanloopError, match="no project to commit in"):
        prove_sorries(theorems, whole, None, servers=lambda: ReplayServer(theorems), branch="b")
    with pytest.raises(LeanloopError, match="needs servers"):
        prove_sorries(theorems, whole, None)


def test_the_lean_servers_it_starts_are_closed(demo, monkeypatch):
    from leanloop.agent import proving

    root, database, factory, servers = demo
    started = []

    def launcher(project_root, config):
        started.append(project_root)
        return factory

    monkeypatch.setattr(proving, "_launcher", launcher)
    theorems = database.get_sorry_theorems(REPO)[:2]
    report = prove_sorries(theorems, scripted_prover(), root, database=database)
    assert started == [root.resolve()] and report.environment == "lean"
    assert len(servers) == 1 and servers[0].closed  # no Lean process left behind
