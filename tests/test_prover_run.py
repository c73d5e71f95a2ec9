"""The proving engine (``run_proofs``): theorem records are read under the run's project root, a
proof is ``proved`` only after Lean's audited check, the hook sees every proof in the driver and
its answer is what is stored, a theorem's attempts stop at the first proof when asked, a rerun
skips what the database says is finished, and every mode goes through it.

The Lean server here is a toy (``Toy``): its proof steps are leanloop's own objects following a
script, and its answers to whole checks are leanloop's own verdict objects
(``tests/audit_standin.py``): these tests are about what the engine does with them."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest

from leanloop.data.records import AttemptStatus, Pos, Theorem
from leanloop.database import DynamicDatabase
from leanloop.errors import LeanloopError
from leanloop.lean.pool import ServerPool
from leanloop.lean.server import LeanMessage, LeanServer, ProofFinished, ProofState, TacticFailed
from leanloop.prover.config import ProofMode
from leanloop.prover.run import run_proofs
from tests.audit_standin import audit_request, audit_requests, audited_answer
from tests.test_search_repl import Canned

URL = "https://example.org/toy"


class Toy(LeanServer):
    """A toy Lean: theorem ``t`` is proved by the tactic ``ok`` when ``t`` is in ``provable``;
    a whole check is accepted, the audit reporting ``axioms[name]`` (default ``propext``)."""

    backend = "toy"

    def __init__(self, provable=(), axioms=None) -> None:
        super().__init__()
        self.provable, self.axioms = set(provable), axioms or {}
        self.checked: list[str] = []
        self.pid = os.getpid()
        self._ids = itertools.count()
        self._names: dict[int, str] = {}

    @property
    def generation(self) -> int:
        return 1

    def start_theorem(self, theorem):
        state = ProofState(next(self._ids), (f"⊢ {theorem.full_name}",), 1, id(self))
        self._names[state.id] = theorem.full_name
        return state

    def run_tactic(self, state, tactic, *, goal=None):
        if tactic == "ok" and self._names[state.id] in self.provable:
            return ProofFinished(next(self._ids))
        return TacticFailed("not this one")

    def check(self, code):
        self.checked.append(code)
        return audited_answer(code, axioms=self.axioms)

    def close(self) -> None:
        pass

    start_proof = open_sorries = None


def toy_project(tmp_path: Path, names: list[str]) -> tuple[Path, list[Theorem]]:
    root = tmp_path / "toy"
    root.mkdir()
    theorems = []
    for name in names:
        (root / f"{name}.lean").write_text(f"theorem {name} : True := sorry\n")
        theorems.append(
            Theorem(
                url=URL,
                commit="a" * 40,
                file_path=f"{name}.lean",
                full_name=name,
                start=Pos(1, 1),
                end=Pos(1, 30),
            )
        )
    return root, theorems


def prover(**config) -> Canned:
    return Canned({f"⊢ {n}": ["ok"] for n in ("a", "b", "c", "native")}, **config)


def test_proofs_are_audited_hooked_in_the_driver_and_stored(tmp_path):
    root, theorems = toy_project(tmp_path, ["a", "b", "c", "native"])
    database = DynamicDatabase(tmp_path / "run.db")
    toy = Toy(provable={"a", "b", "native"}, axioms={"native": ["Lean.ofReduceBool"]})
    hooked = []

    def hook(theorem, attempt, lease):
        hooked.append((theorem.full_name, os.getpid()))
        with lease() as server:  # the run's own server, lent to the hook
            assert server is toy
        if theorem.full_name == "b":  # e.g. the file could not be written
            return attempt.model_copy(update={"status": AttemptStatus.ERROR, "error": "nope"})
        return attempt

    outcome = run_proofs(
        theorems, prover(), lambda: toy, project_root=root, database=database, run="r", hook=hook
    )
    assert hooked == [("a", os.getpid()), ("b", os.getpid())]  # proved ones only, here
    statuses = {a.full_name: a.status for a in outcome.attempts}
    assert statuses == {
        "a": AttemptStatus.PROVED,
        "b": AttemptStatus.ERROR,  # what the hook said is what is stored
        "c": AttemptStatus.FAILED,
        "native": AttemptStatus.REFUSED,  # Lean accepted it; the audit refused it
    }
    stored = {a.full_name: a for a in database.get_attempts("r")}
    assert stored["a"].axioms == ("propext",) and stored["a"].environment == "lean"
    assert stored["b"].error == "nope"
    assert "Lean.ofReduceBool" in stored["native"].error
    # the theorem records were read from their files under the run's project root
    assert [audit_request(code)[0] for code in toy.checked] == ["a", "b", "native"]
    report = outcome.report()
    assert report.environment == "lean" and report.pass_at_1 == 0.25
    assert report.axioms_used == {"propext": 1} and report.status_counts["refused"] == 1

    # a rerun skips what is finished (b ended in an error: tried again, and hooked again)
    hooked.clear()
    again = run_proofs(
        theorems, prover(), lambda: toy, project_root=root, database=database, run="r", hook=hook
    )
    assert [a.full_name for a in again.new] == ["b"] and hooked == [("b", os.getpid())]
    assert {a.full_name for a in again.skipped} == {"a", "c", "native"}
    assert len(again.attempts) == 4


def test_attempts_stop_at_the_first_proof_when_asked(tmp_path):
    root, theorems = toy_project(tmp_path, ["a", "c"])
    database = DynamicDatabase(tmp_path / "stop.db")
    toy = Toy(provable={"a"})

    def stopping():
        return run_proofs(
            theorems,
            prover(num_attempts=3),
            lambda: toy,
            project_root=root,
            database=database,
            run="s",
            stop_at_first=True,
        )

    outcome = stopping()
    made = sorted((a.full_name, a.attempt) for a in outcome.new)
    assert made == [("a", 0), ("c", 0), ("c", 1), ("c", 2)]
    every = run_proofs(theorems, prover(num_attempts=3), lambda: toy, project_root=root)
    assert sorted((a.full_name, a.attempt) for a in every.new) == [
        ("a", 0),
        ("a", 1),
        ("a", 2),
        ("c", 0),
        ("c", 1),
        ("c", 2),
    ]
    # a rerun of the stopping run finds the solved theorem finished as a whole
    rerun = stopping()
    assert rerun.new == [] and len(rerun.skipped) == 4


def test_whole_proofs_go_through_the_same_engine(tmp_path):
    root, theorems = toy_project(tmp_path, ["a"])
    toy = Toy()
    whole = Canned(whole=["trivial", "axiom cheat : False\nexact cheat.elim"])
    outcome = run_proofs(theorems, whole, lambda: toy, project_root=root, mode=ProofMode.WHOLE)
    (attempt,) = outcome.new
    assert attempt.status is AttemptStatus.PROVED and attempt.proof == ("trivial",)
    cheating = Canned(whole=["axiom cheat : False\nexact cheat.elim"])
    (refused,) = run_proofs(theorems, cheating, lambda: toy, project_root=root, mode="whole").new
    assert refused.status is AttemptStatus.REFUSED and "axiom" in refused.error
    assert len(toy.checked) == 1  # the screened candidate never reached Lean


def test_bad_runs_are_one_line_errors(tmp_path):
    _root, theorems = toy_project(tmp_path, ["a"])
    pool = ServerPool.single(lambda: Toy())
    with pytest.raises(LeanloopError, match="needs a maker of Lean servers, not a pool"):
        run_proofs(theorems, prover(), pool, num_workers=2)
    with pytest.raises(LeanloopError, match="attempts=0"):
        run_proofs(theorems, prover(), pool, attempts=0)
    # without a project root, a theorem record cannot be started on Lean: an error attempt
    (attempt,) = run_proofs(theorems, prover(), pool).new
    assert attempt.status is AttemptStatus.ERROR and "needs its source file" in attempt.error
    pool.close()


def test_a_search_never_sends_lean_a_tactic_the_screen_refuses(tmp_path):
    class MetaToy(Toy):
        """Any tactic 'run_tac ...' would close the goal (as code run by Lean could)."""

        def run_tactic(self, state, tactic, *, goal=None):
            self.sent.append(tactic)
            if tactic.startswith("run_tac"):
                return ProofFinished(next(self._ids))
            return TacticFailed("not this one")

    root, theorems = toy_project(tmp_path, ["a"])
    toy = MetaToy()
    toy.sent = []
    meta = "run_tac do\n  let g ← Lean.Elab.Tactic.getMainGoal\n  g.admit"
    (attempt,) = run_proofs(
        theorems, Canned({"⊢ a": [meta, "simp"]}), lambda: toy, project_root=root
    ).new
    assert attempt.status is AttemptStatus.FAILED and attempt.proof is None
    assert toy.sent == ["simp"] and toy.checked == []  # run_tac never reached Lean


def test_a_candidate_that_breaks_the_code_after_it_is_rejected_and_the_next_tried(tmp_path):
    class Breaking(Toy):
        """leanloop's own verdict objects: an unfinished candidate makes Lean report its parse
        error at the next token, leanloop's own audit line (as Lean would)."""

        def check(self, code):
            self.checked.append(code)
            if "exact (trivial\n" in code:
                (_, line), _ = audit_requests(code)
                error = LeanMessage("error", "unexpected token '#print'; expected ')'", line, 0)
                return audited_answer(code, [error])
            return audited_answer(code)

    root, theorems = toy_project(tmp_path, ["a"])
    # a file with a byte order mark: Lean is shown it without one
    (root / "a.lean").write_text("\ufefftheorem a : True := sorry\n")
    server = Breaking()
    whole = Canned(whole=["exact (trivial", "trivial\nend Demo", "trivial"])
    (attempt,) = run_proofs(theorems, whole, lambda: server, project_root=root, mode="whole").new
    assert attempt.status is AttemptStatus.PROVED and attempt.proof == ("trivial",)
    # the unfinished one was rejected by Lean, the one leaving its block never reached Lean
    assert len(server.checked) == 2 and not server.checked[0].startswith("\ufeff")


def test_a_benchmark_statement_is_searched_from_its_own_source(tmp_path):
    """A benchmark's statements have no file: the engine starts each from the source its
    problem gives, and the proof Lean judges is the benchmark's code with it."""
    from leanloop.data.benchmark import BenchmarkFile

    path = tmp_path / "toy.jsonl"
    path.write_text(
        '{"name": "a", "split": "test", "header": "import Mathlib\\n\\nopen Nat\\n\\n", '
        '"formal_statement": "theorem a (n : ℕ) : n + 0 = n := by\\n"}\n'
    )
    bench = BenchmarkFile(path)
    (problem,) = bench.problems()
    theorem = bench.theorem(problem)
    started = []

    class Recording(Toy):
        def start_theorem(self, theorem):
            started.append(theorem)
            return super().start_theorem(theorem)

    toy = Recording(provable={"a"})
    outcome = run_proofs(
        [theorem],
        prover(),
        lambda: toy,
        sources={(theorem.key, theorem.commit): problem.theorem_source()},
    )
    source = started[0]  # (started again to re-check the proof found)
    assert all(s == source for s in started)
    assert source.signature == "(n : ℕ) : n + 0 = n" and "open Nat" in source.prefix
    (attempt,) = outcome.attempts
    assert attempt.status is AttemptStatus.PROVED and attempt.url == "benchmark:toy"
    (code,) = toy.checked
    assert code.startswith("import Mathlib\n\nopen Nat") and "theorem a (n : ℕ) : n + 0 = n" in code
    # without the source, the record (no file anywhere) cannot be started on Lean
    failed = run_proofs([theorem], prover(), lambda: Recording(provable={"a"}))
    assert failed.attempts[0].status is AttemptStatus.ERROR


@pytest.mark.postgres
def test_workers_reach_a_postgresql_database_with_its_password(tmp_path, pg_cluster, monkeypatch):
    """Ray workers store their attempts in a PostgreSQL database themselves: the URL they are
    given keeps its password (a SQLAlchemy URL prints it as '***'). The test cluster trusts
    every login, so the password is checked as the workers would use it, not by logging in."""
    import uuid

    from leanloop.prover.ray_executor import RayExecutor

    url = pg_cluster.create_database(f"test_{uuid.uuid4().hex[:12]}")
    root, theorems = toy_project(tmp_path, ["a"])
    handed = []
    monkeypatch.setattr(RayExecutor, "run", lambda self, pending: handed.append(self.database_url))
    with DynamicDatabase(url.replace("@", ":s3cret@", 1)) as database:
        run_proofs(theorems, prover(), Toy, project_root=root, database=database, num_workers=2)
    (given,) = handed
    with DynamicDatabase(given) as worker_database:  # what each worker opens
        assert worker_database.url.password == "s3cret"
