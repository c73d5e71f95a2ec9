"""Tracing a project into records and the database, with the Lean side replayed from the REPL's
recorded answers (the tracer's requests must equal the recorded ones)."""

from __future__ import annotations

import pytest

from leanloop.data.leandojo import LeanDojoDataset
from leanloop.data.records import TheoremStatus
from leanloop.database import DynamicDatabase
from leanloop.lean.elaboration import SorrySite
from leanloop.lean.errors import ServerCrashed
from leanloop.lean.project import open_project
from leanloop.lean.repl import ReplServer
from leanloop.lean.transcript import TranscriptTransport
from leanloop.lean.transport import Transport
from leanloop.tracing.premises import PremiseLocation, annotate
from leanloop.tracing.project import trace_project
from leanloop.tracing.records import records_from_trace, steps_of
from leanloop.tracing.states import states_after
from leanloop.tracing.tracer import Tracer


def traced_sources(transcripts):
    """File name -> (source, the recorded exchange elaborating it with allTactics)."""
    wanted = {
        "Calc.lean": ("calc", 0),
        "Def.lean": ("all_tactics", 0),
        "Ex.lean": ("self_proof_check", 5),
    }
    files = {}
    for name, (transcript, index) in wanted.items():
        request = transcripts[transcript]["requests"][index]
        assert request.get("allTactics") and set(request) == {"cmd", "allTactics"}
        files[name] = (request["cmd"], (request, transcripts[transcript]["responses"][index]))
    return files


def demo_project(directory, transcripts):
    """A Lake project in ``directory/Demo`` holding the recorded files, and the REPL exchanges
    that traced them."""
    root = directory / "Demo"
    root.mkdir()
    (root / "lakefile.lean").write_text("import Lake\nopen Lake DSL\npackage demo\n")
    (root / "lean-toolchain").write_text("leanprover/lean4:v4.33.0-rc2\n")
    files = traced_sources(transcripts)
    for name, (source, _) in files.items():
        (root / name).write_text(source)
    return open_project(root), [exchange for _, exchange in files.values()]


@pytest.fixture
def project(tmp_path, transcripts):
    return demo_project(tmp_path, transcripts)


def replaying(exchanges):
    def factory(_key):
        return ReplServer(TranscriptTransport(exchanges, ordered=False, name="trace"))

    return factory


def test_tracer_sends_the_recorded_requests_and_keeps_the_answers(project, tmp_path):
    lean_project, exchanges = project
    trace = Tracer(
        lean_project, server_factory=replaying(exchanges), workers=2, cache_dir=tmp_path / "cache"
    ).trace()
    assert [f.path for f in trace.files] == ["Calc.lean", "Def.lean", "Ex.lean"]
    assert not trace.failures
    calc = trace.files[0]
    assert calc.tactics[0].tactic.startswith("calc")
    assert calc.tactics[0].used_constants[:2] == ("Trans.trans", "sorryAx")
    assert len(calc.sorries) == 2


def test_trace_is_cached(project, tmp_path):
    lean_project, exchanges = project
    Tracer(lean_project, server_factory=replaying(exchanges), cache_dir=tmp_path / "c").trace()

    def no_lean(_key):
        raise AssertionError("a cached file must not be traced again")

    again = Tracer(lean_project, server_factory=no_lean, cache_dir=tmp_path / "c").trace()
    assert again.cached == 3 and len(again.files) == 3
    fresh = Tracer(lean_project, server_factory=replaying(exchanges)).trace()
    assert again.files[0].tactics == fresh.files[0].tactics
    assert again.files[0].sorries == fresh.files[0].sorries
    assert again.files[0].sorries[0] == SorrySite(proof_state=0, goal="⊢ 3 = 4", line=2, column=14)


def test_a_failing_file_does_not_stop_the_trace(project, tmp_path):
    lean_project, exchanges = project

    class Crashing(Transport):
        generation = 1

        def exchange(self, request):
            if "calc" in request["cmd"]:
                raise ServerCrashed("the Lean REPL exited with status 137")
            return TranscriptTransport(exchanges, ordered=False).exchange(request)

    trace = Tracer(lean_project, server_factory=lambda _k: ReplServer(Crashing())).trace()
    assert list(trace.failures) == ["Calc.lean"] and "137" in trace.failures["Calc.lean"]
    assert [f.path for f in trace.files] == ["Def.lean", "Ex.lean"]
    records = records_from_trace(trace)  # the file is a failure, not a skipped theorem
    assert list(records.failures) == ["Calc.lean"] and "Calc.lean" not in records.skipped


def test_steps_and_states_of_a_declaration(project):
    lean_project, exchanges = project
    trace = Tracer(lean_project, server_factory=replaying(exchanges)).trace(files=["Calc.lean"])
    file = trace.files[0]
    (example,) = file.scan.declarations
    steps = steps_of(example, file.tactics)
    # the nested step whose state before is 'no goals' is dropped
    assert [s.goals_before for s in steps] == ["⊢ 3 = 5", "⊢ 3 = 4", "⊢ 4 = 5"]
    # each `sorry` ends the `by` block of its calc step: it closes that block's goal and leaves
    # 'no goals' (as LeanDojo records it), not the goal of the next calc step
    assert states_after(steps, file.source) == ["no goals", "no goals", "no goals"]


def test_records(project, tmp_path):
    lean_project, exchanges = project
    traced = trace_project(
        lean_project, server_factory=replaying(exchanges), cache_dir=tmp_path / "cache"
    )
    assert traced.traced_files == ["Calc.lean", "Def.lean", "Ex.lean"]
    assert traced.cached == 0 and not traced.failures
    assert [t.full_name for t in traced.theorems] == ["ex"]
    assert {"f", "ex"} <= {p.full_name for f in traced.source_files for p in f.premises}
    again = trace_project(lean_project, server_factory=replaying([]), cache_dir=tmp_path / "cache")
    assert again.cached == 3 and again.theorems == traced.theorems


def test_trace_into_the_database(project, tmp_path):
    lean_project, exchanges = project
    db = DynamicDatabase(tmp_path / "t.db")
    report = db.trace_repository(
        path=lean_project.root, server_factory=replaying(exchanges), cache_dir=tmp_path / "cache"
    )
    assert report.files == 3 and report.counts.theorems_added == 1
    (theorem,) = db.get_theorems()
    assert theorem.full_name == "ex" and theorem.status is TheoremStatus.SORRY
    assert theorem.statement == "theorem ex : False"
    assert [(t.tactic, t.state_before, t.state_after) for t in theorem.traced_tactics] == [
        ("sorry", "⊢ False", "no goals")
    ]
    assert theorem.start.column == 1  # LeanDojo's columns are 1-based
    assert [t.full_name for t in db.get_sorry_theorems()] == ["ex"]
    premises = {p.full_name for p in db.get_premises()}
    assert {"f", "ex"} <= premises
    assert report.repository.commit.startswith("content-")  # not a git checkout
    before = db.stats()
    again = db.trace_repository(
        path=lean_project.root, server_factory=replaying([]), cache_dir=tmp_path / "cache"
    )
    assert again.cached_files == 3 and again.counts.theorems_added == 0
    assert db.stats() == before  # tracing twice changes nothing


def test_premise_marks_reproduce_leandojo_annotations(sample_dir):
    """Given the premises Lean reports as used, the tactic text is marked exactly as in the real
    LeanDojo Benchmark 4 data, for every traced step of the sample."""
    steps = 0
    for theorem in LeanDojoDataset(sample_dir).iter_theorems():
        parts = theorem.full_name.split(".")[:-1]
        context = [".".join(parts[:i]) for i in range(len(parts), 0, -1)]
        for step in theorem.traced_tactics:
            index = {
                r.full_name: PremiseLocation(r.def_path, r.def_pos, r.def_end_pos)
                for r in step.premises
            }
            used = [r.full_name for r in step.premises] + ["Eq", "OfNat.ofNat", "instHAdd"]
            marked = annotate(step.annotated_tactic.plain_text, used, index, context)
            assert marked == step.annotated_tactic, theorem.full_name
            steps += 1
    assert steps == 435


def test_trace_options_are_checked_and_a_backend_that_cannot_trace_is_refused(project, tmp_path):
    from leanloop.errors import LeanloopError
    from leanloop.lean.errors import Unsupported

    lean_project, _ = project
    with pytest.raises(LeanloopError, match="option 'worker'"):
        trace_project(lean_project, server_factory=replaying([]), worker=2)
    with pytest.raises(LeanloopError, match="option 'workers'"):
        trace_project(lean_project, server_factory=replaying([]), workers=0)
    with pytest.raises(Unsupported, match="pantograph backend cannot give every tactic"):
        trace_project(lean_project, lean="pantograph", cache_dir=tmp_path)
