"""prove_sorries: for each open sorry, search on a pooled server, write back only what Lean accepted
in the whole file (atomically, with a backup; a failure while writing leaves the file intact),
record each attempt, skip what a run finished, commit on a branch of its own, report as JSON,
Markdown and a plot; without a project, a replay that writes nothing.

The whole-file verdicts are Lean's recorded answers (the Kimina server's verdict on a Mathlib
file, the REPL's on a core-Lean file). The search steps that lead to the proofs are leanloop's
own objects following a script: what prove_sorries does with a search's outcome."""

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
from leanloop.prover.recorded import RecordedProver
from leanloop.prover.replay import ReplayServer
from tests.helpers import sample_theorems
from tests.test_search_repl import Canned, Recorded

REPO = Repository(url="https://example.org/demo", commit="d" * 40)
#: the sorries of the demo project and the script each one's search follows
FILES = {
    # Kimina's Lean server accepted this file, recorded with its proof (the 'proof1' row)
    "Simple.lean": "import Mathlib\n\ntheorem simple_add : 2 + 2 = 4 := sorry\n",
    # the REPL rejected this file with its proof ('unsolved goals', the 'incomplete' test)
    "Incomplete.lean": "def f (x : Bool) : Nat := sorry",
    # never shown to Lean: one proof is not a proof, the other is not found
    "Other.lean": "theorem two : 2 = 2 := sorry\n\ntheorem nope : 1 = 2 := sorry\n",
}
SCRIPTS = {
    "simple_add": ["simp"],
    "f": ["by_cases x", "{ apply Nat.succ }"],
    "two": ["native_decide"],
}
ACCEPTED = "import Mathlib\n\ntheorem simple_add : 2 + 2 = 4 := by\n  simp\n"


class RecordedVerdicts:
    """Lean's recorded verdicts on whole files: the Kimina server's and the REPL's; any other
    file has no recorded verdict (a ReplayMismatch)."""

    def __init__(self, fixtures: Path, transcripts: dict) -> None:
        path = fixtures / "kimina_verdicts" / "verdicts.jsonl"
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        self.kimina = {
            row["code"]: row["result"]["results"][0]["response"]
            for row in rows
            if not row["result"]["results"][0]["error"]
        }
        self.repl = ReplServer(
            Recorded(*(t for t in transcripts.values() if not t["needs_mathlib"]))
        )

    def check(self, code: str) -> CheckResult:
        if code in self.kimina:
            messages = [
                LeanMessage(m["severity"], m["data"], m["pos"]["line"], m["pos"]["column"])
                for m in self.kimina[code].get("messages", [])
            ]
            return CheckResult.from_messages(messages)
        return self.repl.check(code)


class ScriptedLean(LeanServer):
    """Search steps as leanloop's own objects, following ``SCRIPTS``; whole files checked by
    ``verdicts``."""

    backend = "scripted"

    def __init__(self, verdicts: RecordedVerdicts) -> None:
        super().__init__()
        self.verdicts = verdicts
        self.checked: list[str] = []
        self.closed = False
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
        return state

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


def scripted_prover() -> Canned:
    table = {
        f"{name} step {i}": [t] for name, tactics in SCRIPTS.items() for i, t in enumerate(tactics)
    }
    # the search's own check of the proof is off: only the whole file's recorded verdict decides
    return Canned(table, lean_check=False)


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
    assert [t.full_name for t in theorems] == ["simple_add", "f", "two", "nope"]
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
        "f": "rejected",
        "two": "forbidden",
        "nope": "failed",
    }
    assert seen == [(0, 4), (1, 4), (2, 4), (3, 4), (4, 4)]
    assert len(servers) == 1 and servers[0].closed  # one warm server for every theorem

    # accepted: the file is exactly the one Lean accepted, the original kept as a backup
    assert (root / "Simple.lean").read_text() == ACCEPTED
    assert Path(rows["simple_add"].backup).read_text() == FILES["Simple.lean"]
    assert Path(rows["simple_add"].backup).is_relative_to(root / ".leanloop-backups")
    assert rows["simple_add"].proof == "by\n  simp" and rows["simple_add"].proof_length == 1
    assert rows["simple_add"].status is AttemptStatus.PROVED
    (proved,) = database.get_theorems(REPO, status="sorry_proved")
    assert proved.full_name == "simple_add" and proved.proof == "by\n  simp"

    # rejected by Lean in the whole file: reported with Lean's reason, the file untouched
    assert (root / "Incomplete.lean").read_text() == FILES["Incomplete.lean"]
    assert "unsolved goals" in rows["f"].detail and rows["f"].status is AttemptStatus.FAILED
    assert rows["f"].proof == "by\n  by_cases x\n  { apply Nat.succ }"
    assert rows["f"].proof_length == 2
    # not a proof: never shown to Lean; not found: nothing to write
    assert "native_decide" in rows["two"].detail and rows["nope"].proof is None
    assert (root / "Other.lean").read_text() == FILES["Other.lean"]
    assert servers[0].checked == [
        ACCEPTED,
        FILES["Incomplete.lean"].replace("sorry", "") + rows["f"].proof,
    ]
    assert [t.full_name for t in database.get_sorry_theorems(REPO)] == ["f", "two", "nope"]

    stored = {a.full_name: a for a in database.get_attempts("sorries")}
    assert stored["simple_add"].status is AttemptStatus.PROVED
    assert stored["f"].status is AttemptStatus.FAILED and stored["f"].proof is None
    assert stored["f"].error == rows["f"].detail

    written = report.write(tmp_path / "report")
    assert [p.name for p in written] == ["report.json", "report.md", "report.png"]
    data = json.loads(written[0].read_text())
    assert data["mode"] == "lean" and [r["outcome"] for r in data["rows"]] == [
        "written",
        "rejected",
        "forbidden",
        "failed",
    ]
    markdown = written[1].read_text()
    assert "| `simple_add` | `Simple.lean` | written | 1 |" in markdown
    assert "```lean\nby\n  simp\n```" in markdown
    assert "1 of 4 sorries proved by Lean and written" in report.summary()

    # the same run again: everything finished is skipped, Lean is not asked again
    again = prove_sorries(
        theorems, scripted_prover(), root, servers=factory, database=database, run="sorries"
    )
    assert [row.outcome for row in again.rows] == ["skipped"] * 4
    assert [row.status for row in again.rows] == [row.status for row in report.rows]
    assert len(servers) == 1  # no server was even started
    assert (root / "Simple.lean").read_text() == ACCEPTED


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


def test_proofs_go_on_a_branch_of_their_own(demo):
    root, database, factory, _ = demo

    def git(*args):
        return subprocess.run(
            ["git", *args], cwd=root, check=True, capture_output=True, text=True
        ).stdout.strip()

    git("init", "-q", "-b", "main")
    git("add", ".")
    git("-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q", "-m", "start")
    head = git("rev-parse", "HEAD")
    theorems = database.get_sorry_theorems(REPO)
    with pytest.raises(LeanloopError, match="checked out"):
        prove_sorries(theorems, scripted_prover(), root, servers=factory, branch="main")
    report = prove_sorries(
        theorems, scripted_prover(), root, servers=factory, database=database, branch="proofs"
    )
    assert report.branch == "proofs"
    (written,) = report.written
    assert git("rev-parse", "proofs") == written.git_commit
    assert git("rev-parse", "HEAD") == head and git("symbolic-ref", "--short", "HEAD") == "main"
    assert git("show", "proofs:Simple.lean") + "\n" == ACCEPTED
    assert git("show", "proofs:Incomplete.lean") == FILES["Incomplete.lean"]


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
    assert report.mode == "replay" and not report.written
    assert {row.outcome for row in report.rows} == {"replayed"}
    assert all(row.status is AttemptStatus.REPLAYED for row in report.rows)
    for row, theorem in zip(report.rows, theorems, strict=True):  # the search may find shortcuts
        assert 1 <= row.proof_length <= len(theorem.traced_tactics) and row.proof
    assert "not proving" in report.summary()
    assert "replay of recorded steps without Lean" in report.to_markdown()
    # whole-proof mode: each recorded proof offered whole, replayed tactic by tactic
    whole = Canned(whole=["\n".join(s.tactic for s in theorems[0].traced_tactics)])
    (row,) = prove_sorries(
        theorems[:1], whole, None, servers=lambda: ReplayServer(theorems), whole_proof=True
    ).rows
    assert row.outcome == "replayed" and row.proof_length == len(theorems[0].traced_tactics)
    with pytest.raises(LeanloopError, match="no project to commit in"):
        prove_sorries(theorems, whole, None, servers=lambda: ReplayServer(theorems), branch="b")
    with pytest.raises(LeanloopError, match="needs servers"):
        prove_sorries(theorems, whole, None)


def test_the_lean_servers_it_starts_are_closed(demo, monkeypatch):
    from leanloop.agent import proving
    from leanloop.lean.pool import ServerPool

    root, database, factory, servers = demo
    started = []

    def lean_servers(project_root, config):
        started.append(project_root)
        return ServerPool(lambda _key: factory(), max_servers=1)

    monkeypatch.setattr(proving, "lean_servers", lean_servers)
    theorems = database.get_sorry_theorems(REPO)[:2]
    report = prove_sorries(theorems, scripted_prover(), root, database=database)
    assert started == [root.resolve()] and report.mode == "lean"
    assert len(servers) == 1 and servers[0].closed  # no Lean process left behind
