"""Lean's account of the commands it elaborated: read from the REPL's real recorded infotree, and
the rules that decide whether a check counts (``lean.account``, used by ``lean.audit.judge``).

The rules are tested on leanloop's own account objects (``ElaboratedCommand``), as a test of
what leanloop does with Lean's answer; the reading of the raw infotree is tested on Lean's real
recorded output only."""

from __future__ import annotations

import dataclasses

import pytest

from leanloop.lean.account import (
    DECLARATION,
    END,
    END_OF_INPUT,
    PRINT_AXIOMS,
    SET_OPTION,
    ElaboratedCommand,
    commands_from_infotree,
)
from leanloop.lean.audit import AuditedCode, Outcome, judge
from leanloop.lean.axioms import AxiomPolicy
from leanloop.lean.errors import ProtocolError
from leanloop.lean.repl import ReplServer
from leanloop.lean.server import CheckResult, LeanMessage
from leanloop.lean.transcript import TranscriptTransport
from tests.audit_standin import audited_answer, infotree_json, standin_account

POLICY = AxiomPolicy()


def test_the_real_infotree_gives_each_command_its_kind_elaborator_and_range(transcripts):
    recorded = transcripts["infotree_theorem"]
    (tree,) = recorded["responses"]
    declaration, end = commands_from_infotree(tree["infotree"])
    assert (declaration.kind, declaration.elaborator) == DECLARATION
    assert (declaration.line, declaration.column, declaration.end_line) == (1, 0, 1)
    assert declaration.end_column == len(recorded["requests"][0]["cmd"])
    assert (end.kind, end.elaborator) == END_OF_INPUT
    assert declaration.nested == ()  # no command below it (terms and tactics are not commands)
    # the header lines the REPL was not sent move every line
    assert commands_from_infotree(tree["infotree"], 2)[0].line == 3


def test_a_check_on_the_repl_asks_for_the_infotree_and_reads_it(transcripts):
    """``check`` sends exactly the recorded request (the code, ``"infotree": "full"``)."""
    recorded = transcripts["infotree_theorem"]
    request, answer = recorded["requests"][0], recorded["responses"][0]
    server = ReplServer(TranscriptTransport([(request, answer)]))
    result = server.check(request["cmd"])
    assert result.accepted and [c.kind for c in result.commands] == [
        DECLARATION[0],
        END_OF_INPUT[0],
    ]
    # Lean's account confirms the one declaration: recorded (unaudited) code is accepted so
    code = request["cmd"]
    judged = judge(result, AuditedCode.unaudited(code, 0, len(code), "show_p"), POLICY)
    assert judged.outcome is Outcome.ACCEPTED and not judged.audited


@pytest.mark.parametrize(
    "infotree",
    [
        {"not": "a list"},
        [{"kind": "TermInfo", "node": None, "children": []}],
        [{"kind": "CommandInfo"}],
    ],
)
def test_an_infotree_leanloop_cannot_place_is_a_protocol_error(transcripts, infotree):
    recorded = transcripts["infotree_theorem"]
    request = recorded["requests"][0]
    server = ReplServer(TranscriptTransport([(request, {"env": 0, "infotree": infotree})]))
    with pytest.raises(ProtocolError, match="infotree"):
        server.check(request["cmd"])


def test_the_stand_in_infotree_has_the_real_shape(transcripts):
    (tree,) = transcripts["infotree_theorem"]["responses"]
    real = tree["infotree"][0]
    (made,) = infotree_json(commands_from_infotree(tree["infotree"])[:1])
    assert set(made) == set(real) and set(made["node"]) == set(real["node"])
    assert set(made["node"]["stx"]) == set(real["node"]["stx"])
    assert commands_from_infotree([made]) == commands_from_infotree(tree["infotree"])[:1]


# -- the rules ------------------------------------------------------------------------------------

SOURCE = "import Mathlib\n\ntheorem t : 2 + 2 = 4 := by\n  decide\n"


def code() -> AuditedCode:
    start = SOURCE.index("theorem")
    return AuditedCode.around(SOURCE, start, len(SOURCE.rstrip()), "t")


def honest(audited: AuditedCode) -> CheckResult:
    return audited_answer(audited.code)


def with_commands(result: CheckResult, commands) -> CheckResult:
    return dataclasses.replace(result, commands=tuple(commands))


def test_the_honest_account_is_accepted():
    audited = code()
    kinds = [c.kind for c in honest(audited).commands]
    assert kinds == [
        DECLARATION[0],
        PRINT_AXIOMS[0],
        SET_OPTION[0],
        PRINT_AXIOMS[0],
        END_OF_INPUT[0],
    ]
    assert judge(honest(audited), audited, POLICY).accepted


def test_a_command_inside_the_declaration_s_text_is_refused():
    audited = code()
    result = honest(audited)
    declaration = result.commands[0]
    hidden = ElaboratedCommand(
        "Lean.Parser.Command.eval", "Lean.Elab.Command.elabEval", 4, 2, 4, 20
    )
    judged = judge(
        with_commands(result, [declaration, hidden, *result.commands[1:]]), audited, POLICY
    )
    assert judged.outcome is Outcome.REFUSED
    assert "inside the declaration's text: 'eval' at line 4" in judged.reason


def test_an_audit_command_a_macro_rewrote_is_refused():
    audited = code()
    result = honest(audited)
    *before, last, end = result.commands
    rewritten = dataclasses.replace(last, elaborator="_aux_Evil___macroRules_printAxioms_1")
    judged = judge(with_commands(result, [*before, rewritten, end]), audited, POLICY)
    assert judged.outcome is Outcome.REFUSED
    assert "_aux_Evil___macroRules_printAxioms_1, not by elabPrintAxioms" in judged.reason


def test_an_audit_command_lean_did_not_elaborate_is_refused():
    """E.g. a block comment left open by the proof swallows leanloop's audit."""
    audited = code()
    result = honest(audited)
    declaration, *_ = result.commands
    swallowed = dataclasses.replace(declaration, end_line=10, end_column=0)
    judged = judge(with_commands(result, [swallowed]), audited, POLICY)
    assert judged.outcome is Outcome.REFUSED


def test_an_extra_command_after_the_audit_is_refused():
    audited = code()
    result = honest(audited)
    *commands, end = result.commands
    extra = ElaboratedCommand(
        "Lean.Parser.Command.check", "Lean.Elab.Command.elabCheck", 11, 0, 11, 8
    )
    judged = judge(with_commands(result, [*commands, extra, end]), audited, POLICY)
    assert judged.outcome is Outcome.REFUSED and "'check' at line 11" in judged.reason


def test_an_answer_without_an_account_proves_nothing():
    audited = code()
    result = dataclasses.replace(honest(audited), commands=None)
    judged = judge(result, audited, POLICY)
    assert judged.outcome is Outcome.REFUSED and "no account" in judged.reason


def test_a_declaration_wrapped_by_in_is_one_command():
    text = (
        "import Mathlib\n\nset_option maxHeartbeats 400000 in\n"
        "theorem t : 2 + 2 = 4 := by\n  decide\n"
    )
    start = text.index("set_option")
    audited = AuditedCode.around(text, start, len(text.rstrip()), "t")
    result = honest(audited)
    wrapper = result.commands[0]
    assert wrapper.kind == "Lean.Parser.Command.in" and wrapper.nested[1].kind == DECLARATION[0]
    assert judge(result, audited, POLICY).accepted
    # a wrapper holding no declaration (or two) is not the declaration judged
    empty = dataclasses.replace(wrapper, nested=wrapper.nested[:1])
    judged = judge(with_commands(result, [empty, *result.commands[1:]]), audited, POLICY)
    assert judged.outcome is Outcome.REFUSED and "elaborated as 'in'" in judged.reason


def test_lean_s_range_of_the_declaration_locates_its_messages():
    """A sorry warning Lean places inside the declaration counts even where leanloop's own reading
    ended the declaration earlier."""
    text = "import Mathlib\n\ntheorem t : 2 + 2 = 4 := by\n  decide\n"
    audited = AuditedCode.around(text, text.index("theorem"), text.index("\n  decide"), "t")
    result = honest(audited)
    declaration = dataclasses.replace(result.commands[0], end_line=4, end_column=8)
    warning = LeanMessage("warning", "declaration uses 'sorry'", 4, 2)
    answer = CheckResult.from_messages(
        [*result.messages, warning], commands=[declaration, *result.commands[1:]]
    )
    assert judge(answer, audited, POLICY).outcome is not Outcome.ACCEPTED


def test_the_stand_in_reads_the_audit_commands_leanloop_writes():
    audited = code()
    commands = standin_account(audited.code)
    assert [c.kind for c in commands].count(PRINT_AXIOMS[0]) == 2
    assert [c.kind for c in commands].count(END[0]) == 0
