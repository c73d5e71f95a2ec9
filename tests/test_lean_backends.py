"""Lean backends by name (``leanloop.lean.backends``): ``open_servers`` checks what a backend
needs and gives a picklable launcher of its servers; Pantograph is selected end to end (the
command line, the prover's, the model server's and the tracer's configurations) and runs with
stand-in processes (tests/standins: process handling only, their answers are not Lean's); what a
backend lacks is refused in one line before anything starts; and Pantograph's account of the
commands (boundaries without kinds) still refuses a command hidden in a declaration.

Results of what leanloop does with Lean's answers are built from leanloop's own objects
(``tests/lean_reading.py``)."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from leanloop.errors import LeanloopError
from leanloop.lean.account import END_OF_INPUT
from leanloop.lean.backends import (
    BACKENDS,
    FEATURES,
    Launcher,
    LeanOptions,
    backend,
    lean_backend,
    open_servers,
)
from leanloop.lean.errors import LeanRequestError, Unsupported
from leanloop.lean.pantograph import PantographServer
from leanloop.lean.repl import ReplServer
from leanloop.lean.sandbox import SandboxConfig
from leanloop.lean.server import CheckResult
from leanloop.lean.verification import PoolVerifier
from tests.helpers import assert_one_line_error, lean_standins, run_cli
from tests.lean_reading import ReadingLean

UNSANDBOXED = LeanOptions(timeout=30, sandbox=SandboxConfig(enabled=False))


@pytest.fixture
def standins(tmp_path, monkeypatch):
    return lean_standins(tmp_path, monkeypatch)


def test_the_registry_names_each_backend_and_what_it_can_do():
    assert set(BACKENDS) == {"repl", "pantograph", "replay"}
    assert BACKENDS["repl"].features == frozenset(FEATURES)
    assert BACKENDS["pantograph"].features == {"account"}
    assert backend("pantograph").executable.variable == "LEANLOOP_PANTOGRAPH"
    with pytest.raises(LeanloopError) as unknown:
        backend("lsp")
    assert "unknown Lean backend 'lsp'" in unknown.value.message
    assert "repl, pantograph, replay" in unknown.value.hint
    with pytest.raises(Unsupported) as lacking:
        backend("pantograph", needs=("tactics",))
    assert "every tactic" in lacking.value.message and "no position" in lacking.value.message
    assert lacking.value.hint == "use the repl backend (--lean repl)"
    assert lean_backend("pantograph") == "pantograph"
    with pytest.raises(ValueError, match="one of repl, pantograph; got 'replay'"):
        lean_backend("replay")  # a configuration's checker must start Lean


def test_pantograph_is_opened_by_name_and_started_where_the_launcher_goes(standins):
    launcher = open_servers("pantograph", standins["project"], UNSANDBOXED)
    assert isinstance(launcher, Launcher) and launcher.backend == "pantograph"
    assert launcher.executable == standins["pantograph"] and launcher.root == standins["project"]
    assert launcher.lake == str(standins["lake"])
    travelled = pickle.loads(pickle.dumps(launcher))  # as it goes to a Ray worker
    assert travelled == launcher
    server = travelled("import Mathlib\nimport Foo.Bar")  # a pool keyed by the code's imports
    try:
        assert isinstance(server, PantographServer) and server.modules == ("Mathlib", "Foo.Bar")
        answer = server.inspect("Nat.add_comm").model_extra
        assert answer["echo"] == "env.inspect" and answer["args"] == ["Mathlib", "Foo.Bar"]
        assert answer["payload"] == {"name": "Nat.add_comm", "source": True}
    finally:
        server.close()
    options = LeanOptions(
        timeout=30,
        sandbox=SandboxConfig(enabled=False),
        modules=("Init",),
        pantograph_options={"timeout": 5000},
    )
    fixed = open_servers("pantograph", standins["project"], options)
    assert hash(fixed) == hash(pickle.loads(pickle.dumps(fixed)))  # a launcher is a value
    with fixed("import Mathlib") as server:
        assert isinstance(server, PantographServer) and server.options == {"timeout": 5000}
        answer = server.inspect("x").model_extra
        assert answer["args"] == ["Init"] and answer["count"] == 2  # options.set came first


def test_the_repl_is_opened_by_name(standins):
    launcher = open_servers("repl", standins["project"], UNSANDBOXED)
    with launcher() as server:
        assert isinstance(server, ReplServer) and server.features == frozenset(FEATURES)
        assert server.client.transport.exchange({"cmd": "x"})["echo"] == {"cmd": "x"}
    moved = launcher.with_root(standins["project"].parent)
    assert moved.root == standins["project"].parent and moved.backend == "repl"


def test_what_a_backend_lacks_is_refused_before_anything_is_looked_for(tmp_path):
    with pytest.raises(Unsupported, match="pantograph backend cannot give every tactic"):
        open_servers("pantograph", tmp_path / "no-project", needs=("tactics",))


def test_replay_is_a_backend_without_lean(sample_dir):
    from leanloop.prover.replay import ReplayServer

    launcher = open_servers("replay", sample_dir)
    server = launcher()
    assert isinstance(server, ReplayServer) and not server.checks_with_lean
    with pytest.raises(Unsupported, match="replay follows recorded transitions"):
        open_servers("replay", sample_dir, needs=("account",))


def test_the_prover_s_config_and_the_command_line_select_pantograph(standins, capsys):
    from leanloop.prover.assemble import lean_launcher
    from leanloop.prover.config import ProverConfig

    config = ProverConfig(lean_backend="pantograph", sandbox=SandboxConfig(enabled=False))
    launcher = lean_launcher(standins["project"], config)
    assert launcher.backend == "pantograph" and launcher.executable == standins["pantograph"]
    assert launcher.timeout == config.tactic_timeout
    with pytest.raises(LeanloopError, match="lean_backend: expected a Lean backend"):
        ProverConfig(lean_backend="lsp")
    capsys.readouterr()  # what the launcher said (a log of the process, once) is not the CLI's
    code, _, err = run_cli(capsys, "prove", "--project", standins["project"], "--lean", "lsp")
    assert_one_line_error(code, err, "lean:", "repl, pantograph")


def test_tracing_with_pantograph_is_refused_in_one_line(standins, capsys, tmp_path):
    code, _, err = run_cli(
        capsys, "trace", standins["project"], "--lean", "pantograph", "--db", tmp_path / "t.db"
    )
    assert_one_line_error(code, err, "pantograph backend cannot give every tactic", "--lean repl")
    assert not (tmp_path / "t.db").exists()  # refused before anything was opened


def test_the_model_server_config_selects_a_backend():
    from leanloop.serve.config import LeanConfig

    config = LeanConfig(project="/p", backend="pantograph", pantograph="/bin/pg")
    assert config.executable is not None and config.executable.name == "pg"
    assert LeanConfig(project="/p", repl="/bin/r").executable.name == "r"
    with pytest.raises(ValueError, match="expected a Lean backend"):
        LeanConfig(project="/p", backend="replay")


def test_an_infotree_from_a_pantograph_pool_is_an_error_per_code():
    from tests.test_lean_pantograph import Capture

    servers = []

    def make(key):
        servers.append(PantographServer(Capture()))
        return servers[-1]

    verifier = PoolVerifier(make, max_servers=1)
    (checked,) = verifier.check_batch(["theorem t : True := trivial"], 5)
    assert checked.error == "captured (no Lean here)"  # the check itself was sent
    answer = verifier.check("theorem t : True := trivial", 5, infotree="full")
    assert answer.result is None and "cannot give Lean's infotree" in answer.error
    assert len(servers[-1].transport.requests) == 0  # the refusal sent nothing
    verifier.close()


# -- Pantograph's account: boundaries without kinds ----------------------------------------------


class BoundariesOnly(ReadingLean):
    """``ReadingLean`` answering as Pantograph's units would: where each command is, no kind,
    no elaborator, no end-of-input command."""

    def check(self, code: str) -> CheckResult:
        answer = super().check(code)
        assert answer.commands is not None
        commands = tuple(
            dataclasses.replace(c, kind=None, elaborator=None, nested=())
            for c in answer.commands
            if c.kind != END_OF_INPUT[0]
        )
        return dataclasses.replace(answer, commands=commands)


@pytest.mark.parametrize(
    "body",
    [
        '  decide\n#eval IO.Process.run { cmd := "touch", args := #["/tmp/x"] }',
        "  native_decide\nmacro_rules | `(#print axioms $x) => `(#check $x)",
    ],
)
def test_a_command_hidden_in_the_declaration_is_refused_without_kinds(monkeypatch, body):
    import leanloop.prover.whole as whole
    from leanloop.data.records import AttemptStatus
    from leanloop.lean.screen import Screened
    from leanloop.prover.target import Target
    from leanloop.prover.whole import check_whole_proofs

    # the screen is made blind, as for text a Python reading of Lean misses
    monkeypatch.setattr(whole, "screen_candidate", lambda c, statement=None: Screened(c))
    monkeypatch.setattr(whole, "forbidden_in_proof", lambda *a, **k: None)
    lean = BoundariesOnly()
    target = Target.of(goal="2 + 2 = 4")
    refused = check_whole_proofs(lean, target, [body], timeout=60)
    assert refused.status is AttemptStatus.REFUSED
    assert "Lean elaborated a command inside the declaration's text" in refused.error
    honest = check_whole_proofs(lean, target, ["  decide"], timeout=60)
    assert honest.status is AttemptStatus.PROVED


def test_a_missing_audit_command_is_refused_without_kinds():
    from leanloop.lean.audit import judge
    from leanloop.lean.axioms import AxiomPolicy
    from leanloop.prover.target import Target

    audited = Target.of(goal="2 + 2 = 4").audited("  decide")
    answer = BoundariesOnly().check(audited.code)
    assert answer.commands is not None
    dropped = dataclasses.replace(answer, commands=answer.commands[:-1])  # one audit unseen
    judged = judge(dropped, audited, AxiomPolicy())
    assert not judged.accepted and "expected at this place" in judged.reason
    assert judge(answer, audited, AxiomPolicy()).accepted


def test_a_server_without_a_feature_refuses_it():
    lean = ReadingLean()
    with pytest.raises(Unsupported) as refused:
        lean.elaborate("example : True := trivial", all_tactics=True)
    assert isinstance(refused.value, LeanRequestError)  # callers treat it as a refused request
    assert lean.checked == []
    assert lean.elaborate("example : True := trivial").accepted  # what it can: its check


def test_the_old_repl_launcher_still_works_and_warns(standins):
    from leanloop.lean.launch import ReplLauncher

    with pytest.warns(DeprecationWarning, match="open_servers"):
        launcher = ReplLauncher.for_project(standins["project"], timeout=5)
    assert launcher.backend == "repl" and launcher.timeout == 5
    with pytest.warns(DeprecationWarning):
        made = ReplLauncher(standins["project"], standins["repl"], timeout=7)
    assert made.executable == standins["repl"] and made.options.timeout == 7
