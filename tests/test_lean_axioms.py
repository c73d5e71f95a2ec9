"""Reading Lean's ``#print axioms`` answers and the axiom audit: on the messages Lean really
printed (``fixtures/axioms``), on the info messages of recorded REPL sessions, and property tests
of the parser."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from leanloop.lean.axioms import (
    STANDARD_AXIOMS,
    AxiomAudit,
    AxiomPolicy,
    AxiomReport,
    find_axiom_report,
    is_native_axiom,
    name_parts,
    parse_axioms,
)
from leanloop.lean.protocol.repl import CommandResponse, parse_answer, parse_request
from leanloop.lean.server import LeanMessage

STD = {"propext", "Classical.choice", "Quot.sound"}

# Every report row of fixtures/axioms/axioms.jsonl, keyed by (path, commit prefix, command), as
# read off the row's message by hand: the declaration's name, its axioms, and whether the
# default policy / a policy with allow_native=True should let it pass.
EXPECTED: dict[tuple[str, str, str], tuple[str, set[str], bool, bool]] = {
    ("GraphitiTest/Core/RewriterLemmas.lean", "747407e8", "#print axioms run'_refines"): (
        "Graphiti.run'_refines", STD, True, True,
    ),
    ("Lean4CheckerTests/ReplaceAxiom.lean", "91a7f0e8", "#print axioms efsq"): (
        "efsq", {"propext"}, True, True,
    ),
    # printed under `open Classical`: `choice` is not `Classical.choice`, so it is refused
    (
        "equational_theories/Spectrum/PBD/WilsonInstances.lean",
        "164be7b3",
        "#print axioms wilson_5_11_16",
    ): ("Spectrum.PBD.wilson_5_11_16", {"propext", "choice", "Quot.sound"}, False, False),
    ("tests/lean/run/bv_axiom_check.lean", "131ae61f", "#print axioms bv_axiomCheck"): (
        "bv_axiomCheck", STD | {"sorryAx"}, False, False,
    ),
    ("Test/Sat.lean", "4b472b78", "#print axioms axiomCheck"): (
        "axiomCheck", STD | {"sorryAx", "Lean.ofReduceBool"}, False, False,
    ),
    ("tests/lean/run/decideNative.lean", "a61311cd", "#print axioms ex1"): (
        "ex1", {"Lean.ofReduceBool"}, False, True,
    ),
    ("tests/lean/run/collectAxioms.lean", "c42b387f", "#print axioms one_add_one"): (
        "one_add_one", {"Lean.ofReduceBool", "Lean.trustCompiler"}, False, True,
    ),
    ("tests/lean/run/bv_axiom_check.lean", "9e1fab54", "#print axioms bv_axiomCheck"): (
        "bv_axiomCheck", STD | {"Lean.ofReduceBool"}, False, True,
    ),
    ("tests/elab/collectAxioms.lean", "8088d1ce", "#print axioms one_add_one"): (
        "one_add_one", {"one_add_one._native.native_decide.ax_1_1"}, False, True,
    ),
    ("tests/elab/bv_axiom_check.lean", "f9e0c705", "#print axioms bv_axiomCheck"): (
        "bv_axiomCheck", STD | {"bv_axiomCheck._native.bv_decide.ax_1_5"}, False, True,
    ),
    ("tests/elab/bv_axiom_check.lean", "35300681", "#print axioms bv_axiomCheck"): (
        "bv_axiomCheck", STD | {"bv_axiomCheck._native.bv_decide.ax_1_5"}, False, True,
    ),
    ("Manual/Axioms.lean", "3558cf29", "#print axioms largeNumber"): (
        "largeNumber", {"Lean.trustCompiler"}, False, True,
    ),
    ("Manual/Interaction.lean", "3558cf29", "#print axioms swap_eq_swap'"): (
        "swap_eq_swap'", STD | {"swap_eq_swap'._native.bv_decide.ax_3"}, False, True,
    ),
    ("tests/lean/run/collectAxioms.lean", "c42b387f", "#print axioms A2"): (
        "A2", {"A0", "A1", "A2"}, False, False,
    ),
    ("Manual/Axioms.lean", "3558cf29", "#print axioms addThree"): (
        "addThree", set(), True, True,
    ),
    ("Manual/BasicTypes/Float.lean", "3558cf29", "#print axioms Float.sin_zero_eq_zero"): (
        "Float.sin_zero_eq_zero",
        STD | {"Float.sin_zero_eq_zero._native.native_decide.ax_1"},
        False,
        True,
    ),
    ("Test/Bv/AxiomCheck.lean", "778ea9c6", "#print axioms bv_axiomCheck"): (
        "bv_axiomCheck",
        STD | {"Lean.ofReduceBool", "AIG.RelabelNat.State.Inv2.property"},
        False,
        False,
    ),
    ("Test/Bv.lean", "5bd5a1fc", "#print axioms axiomCheck"): (
        "axiomCheck",
        STD
        | {
            "Lean.ofReduceBool",
            "AIG.RelabelNat.State.Inv1.property",
            "AIG.RelabelNat.State.Inv2.property",
        },
        False,
        False,
    ),
}  # fmt: skip

REPORT_KINDS = {"standard", "sorry", "native", "custom_axiom", "none", "wrapped"}


def _key(row: dict) -> tuple[str, str, str]:
    return row["path"], row["commit"][:8], row["command"]


@pytest.fixture(scope="module")
def rows(fixtures: Path) -> list[dict]:
    path = fixtures / "axioms" / "axioms.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


@pytest.fixture(scope="module")
def by_key(rows: list[dict]) -> dict[tuple[str, str, str], dict]:
    return {_key(row): row for row in rows if row["kind"] in REPORT_KINDS}


def test_the_table_covers_every_report_row(rows, by_key):
    kinds = [row["kind"] for row in rows]
    assert len(rows) == 19 and kinds.count("repl_info_framing") == 1
    assert len(by_key) == len(rows) - 1  # keys are unique
    assert set(by_key) == set(EXPECTED)


@pytest.mark.parametrize("key", list(EXPECTED), ids=lambda key: f"{key[2]}@{key[1]}")
def test_lean_output_is_read(by_key, key):
    name, axioms, _, _ = EXPECTED[key]
    report = parse_axioms(by_key[key]["message"])
    assert report == AxiomReport(name, frozenset(axioms))


@pytest.mark.parametrize("key", list(EXPECTED), ids=lambda key: f"{key[2]}@{key[1]}")
def test_policies_decide_each_row(by_key, key):
    _, axioms, default_passes, native_passes = EXPECTED[key]
    report = parse_axioms(by_key[key]["message"])
    assert report is not None
    default = AxiomPolicy().judge(report)
    native = AxiomPolicy(allow_native=True).judge(report)
    assert (default.passed, native.passed) == (default_passes, native_passes)
    for audit in (default, native):
        assert audit.axioms == tuple(sorted(axioms))
        assert set(audit.refused) <= axioms
        assert (audit.reason == "") == audit.passed
        assert "\n" not in audit.reason


def test_each_kind_is_judged_as_documented(rows):
    default, native = AxiomPolicy(), AxiomPolicy(allow_native=True)
    seen = set()
    for row in rows:
        kind = row["kind"]
        if kind not in REPORT_KINDS:
            continue
        seen.add(kind)
        report = parse_axioms(row["message"])
        assert report is not None, row["message"]
        by_default, with_native = default.judge(report), native.judge(report)
        if kind == "standard" and "choice" not in report.axioms:
            assert by_default.passed and with_native.passed
        elif kind == "sorry":
            assert not by_default.passed and not with_native.passed
            assert (
                "sorryAx" in with_native.refused and "uses sorryAx (a sorry)" in with_native.reason
            )
        elif kind == "native":
            assert not by_default.passed
            assert "allow_native is off" in by_default.reason
            assert with_native.passed
        elif kind == "custom_axiom":
            assert not by_default.passed and not with_native.passed
            assert with_native.reason == "uses A0, A1, A2 (not on the allow-list)"
        elif kind == "none":
            assert report.axioms == frozenset() and by_default.passed
        elif kind == "wrapped":
            assert "\n" in row["message"]  # the list really is broken over lines
            foreign = {a for a in report.axioms if a not in STANDARD_AXIOMS}
            assert with_native.passed == all(is_native_axiom(a) for a in foreign)
    assert seen == REPORT_KINDS


def test_choice_printed_under_open_classical_is_refused(by_key):
    # `#print axioms` inside `open Classical` printed `choice`; the audit compares full names,
    # which is why leanloop asks for the axioms at top level, outside any namespace or open.
    key = (
        "equational_theories/Spectrum/PBD/WilsonInstances.lean",
        "164be7b3",
        "#print axioms wilson_5_11_16",
    )
    report = parse_axioms(by_key[key]["message"])
    assert report is not None and "choice" in report.axioms
    audit = AxiomPolicy().judge(report)
    assert not audit.passed and audit.refused == ("choice",)
    assert audit.reason.startswith("uses choice (not on the allow-list")
    assert "top level" in audit.reason


def test_sorry_is_refused_even_on_the_allow_list(by_key):
    report = parse_axioms(
        by_key[("Test/Sat.lean", "4b472b78", "#print axioms axiomCheck")]["message"]
    )
    assert report is not None
    policy = AxiomPolicy(allowed=STANDARD_AXIOMS | {"sorryAx"}, allow_native=True)
    audit = policy.judge(report)
    assert not audit.passed and audit.refused == ("sorryAx",)
    assert audit.reason == "uses sorryAx (a sorry)"


def test_reasons_name_the_axioms_and_why():
    report = AxiomReport("t", frozenset({"propext", "sorryAx", "Lean.ofReduceBool", "A1", "A0"}))
    audit = AxiomPolicy().judge(report)
    assert audit.refused == ("A0", "A1", "Lean.ofReduceBool", "sorryAx")
    assert audit.reason == (
        "uses sorryAx (a sorry); uses Lean.ofReduceBool (native code, trusted compiler; "
        "allow_native is off); uses A0, A1 (not on the allow-list)"
    )
    assert AxiomPolicy(allow_native=True).judge(report).refused == ("A0", "A1", "sorryAx")


def test_the_allow_list_is_the_policy():
    report = AxiomReport("t", frozenset({"propext", "Classical.choice"}))
    assert not AxiomPolicy(allowed=frozenset({"propext"})).judge(report).passed
    assert AxiomPolicy(allowed=frozenset({"propext", "Classical.choice"})).judge(report).passed
    # a native axiom named on the allow-list passes without allow_native
    trusted = AxiomReport("t", frozenset({"Lean.trustCompiler"}))
    assert AxiomPolicy(allowed=STANDARD_AXIOMS | {"Lean.trustCompiler"}).judge(trusted).passed


def test_policy_is_a_frozen_value_loadable_from_lists():
    policy = AxiomPolicy.model_validate({"allowed": ["propext"], "allow_native": True})
    assert policy.allowed == frozenset({"propext"}) and policy.allow_native
    with pytest.raises(ValidationError):
        policy.allow_native = False  # type: ignore[misc]
    with pytest.raises(ValidationError):
        AxiomPolicy.model_validate({"allowed": ["propext"], "native": True})


def test_a_missing_report_does_not_pass():
    audit = AxiomAudit.missing("Foo.bar")
    assert not audit.passed and audit.axioms == () and audit.refused == ()
    assert audit.reason == "Lean printed no axiom report for Foo.bar"


@pytest.mark.parametrize(
    "name",
    [
        "Lean.ofReduceBool",
        "Lean.trustCompiler",
        "Lean.ofReduceNat",
        "one_add_one._native.native_decide.ax_1_1",
        "Float.sin_zero_eq_zero._native.native_decide.ax_1",
        "bv_axiomCheck._native.bv_decide.ax_1_5",
        "swap_eq_swap'._native.bv_decide.ax_3",
        "foo._native.decide.ax_1_1",  # decide +native passes `decide` to nativeEqTrue
        "_private.Mod.0.foo._native.native_decide.ax_2_10",
        "A.«b c»._native.native_decide.ax_1",
    ],
)
def test_native_axioms(name):
    assert is_native_axiom(name)


@pytest.mark.parametrize(
    "name",
    [
        "propext",
        "sorryAx",
        "ofReduceBool",  # shortened under `open Lean`: only full names count
        "Lean.ofReduceBoolean",
        "Lean.trustCompiler.x",
        "_native.native_decide.ax_1",  # no declaration before it
        "foo._native.native_decide.ax",  # no index
        "foo._native.native_decide.ax_0",  # indices start at 1
        "foo._native.native_decide.ax_1_",
        "foo._native.native_decide.decl_1",  # the auxiliary definition, not the axiom
        "foo._native.omega.ax_1",  # not a native tactic
        "foo._native.native_decide.ax_1.bar",
        "foo._native.ax_1",
        "foo_native.native_decide.ax_1",
        "native_decide.ax_1_1",
        "AIG.RelabelNat.State.Inv2.property",
    ],
)
def test_not_native_axioms(name):
    assert not is_native_axiom(name)


def test_name_parts():
    assert name_parts("Foo.«bar baz».qux") == ("Foo", "bar baz", "qux")
    assert name_parts("_root_.Foo.bar") == name_parts("Foo.«bar»") == ("Foo", "bar")
    assert name_parts("A.«b.c»") == ("A", "b.c") != name_parts("A.b.c")


# -- finding the report among Lean's messages ------------------------------------------------


def _messages(by_key) -> list[LeanMessage]:
    texts = [row["message"] for row in by_key.values()]
    return [LeanMessage("info", text, line=i + 1, column=0) for i, text in enumerate(texts)]


def test_the_report_is_found_by_full_name_and_line(by_key):
    messages = _messages(by_key)
    key = ("GraphitiTest/Core/RewriterLemmas.lean", "747407e8", "#print axioms run'_refines")
    line = next(m.line for m in messages if m.text == by_key[key]["message"])
    report = find_axiom_report(messages, name="Graphiti.run'_refines")
    assert report is not None and report.name == "Graphiti.run'_refines"
    assert find_axiom_report(messages, name="_root_.Graphiti.«run'_refines»") == report
    assert find_axiom_report(messages, line=line) == report
    assert find_axiom_report(messages, name="Graphiti.run'_refines", line=line) == report
    # the name as written in the command is not the full name Lean printed
    assert find_axiom_report(messages, name="run'_refines") is None
    assert find_axiom_report(messages, name="Graphiti.run'_refines", line=line + 1) is None
    # several reports and nothing to choose by: none
    assert find_axiom_report(messages) is None
    assert find_axiom_report(messages[:1]) == parse_axioms(messages[0].text)


def test_only_info_messages_count(by_key):
    text = next(iter(by_key.values()))["message"]
    report = parse_axioms(text)
    assert report is not None
    for severity in ("error", "warning"):
        assert find_axiom_report([LeanMessage(severity, text, line=3)], report.name) is None
    assert find_axiom_report([LeanMessage("information", text, line=3)], report.name) == report


def test_repl_info_framing(rows):
    (row,) = [row for row in rows if row["kind"] == "repl_info_framing"]
    request = parse_request(json.loads(row["command"]))
    answer = parse_answer(request, json.loads(row["message"]))
    assert isinstance(answer, CommandResponse)
    (message,) = answer.messages
    assert message.severity == "info" and message.pos.line == 1
    # a `#check` output, not an axiom report
    assert message.data == "rfl : f = f"
    assert parse_axioms(message.data) is None
    lean_message = LeanMessage(message.severity, message.data, line=message.pos.line)
    assert find_axiom_report([lean_message]) is None
    assert find_axiom_report([lean_message], line=1) is None


def test_no_recorded_info_message_is_taken_for_a_report(fixtures, transcripts):
    """Every info message in the recorded REPL sessions and Lean verdicts (``#check`` output,
    'Try this' suggestions, ...) is not an axiom report."""
    found: list[str] = []

    def walk(value):
        if isinstance(value, dict):
            if value.get("severity") in ("info", "information") and "data" in value:
                found.append(value["data"])
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(list(transcripts.values()))
    verdicts = fixtures / "kimina_verdicts" / "verdicts.jsonl"
    walk([json.loads(line) for line in verdicts.read_text(encoding="utf-8").splitlines()])
    assert len(found) >= 10
    assert [text for text in found if parse_axioms(text) is not None] == []


@pytest.mark.parametrize(
    "text",
    [
        "",
        "'foo' depends on axioms: []",
        "'foo' depends on axioms: [propext",
        "'foo' depends on axioms: propext",
        "foo depends on axioms: [propext]",
        "'foo bar' depends on axioms: [propext]",
        "'foo' depends on axioms: [propext] and more",
        "'foo' depends on axioms: [propext]\n'bar' does not depend on any axioms",
        "'foo' does not depend on any axioms, but",
        "\"'foo' does not depend on any axioms\" : String",
        "The axioms propext and Quot.sound: see 'foo' depends on axioms: [propext]",
        "'foo' depends on axioms: [propext,, Quot.sound]",
    ],
)
def test_texts_that_are_not_reports(text):
    # inputs made up for the test, none of them claimed to be Lean's
    assert parse_axioms(text) is None


# -- property tests of the parser ------------------------------------------------------------

_FIRST = "abcxyzABCXYZ_αβλ𝔸"
_REST = _FIRST + "0123456789'!?₀₁ᵢ"
_plain = st.builds(str.__add__, st.sampled_from(_FIRST), st.text(_REST, max_size=10))
_escaped = st.text(
    st.characters(blacklist_characters="«»\n", blacklist_categories=("Cs",)),
    min_size=1,
    max_size=8,
).map(lambda text: f"«{text}»")
_names = st.lists(st.one_of(_plain, _plain, _plain, _escaped), min_size=1, max_size=4).map(".".join)


def _lean_text(name: str, axioms: list[str]) -> str:
    """The message in the layout ``#print axioms`` uses: the list on one line when the whole
    line fits in 120 characters (the prefix counted), else broken after every comma with the
    next line starting with one space."""
    prefix = f"'{name}' depends on axioms: "
    if not axioms:
        return f"'{name}' does not depend on any axioms"
    flat = prefix + "[" + ", ".join(axioms) + "]"
    if len(flat) <= 120:
        return flat
    return prefix + "[" + ",\n ".join(axioms) + "]"


@given(st.data())
def test_parse_gives_back_the_set(data):
    """Texts built by the test in Lean's layout (a property of the parser, not a claim about
    what Lean printed): the parse gives back the name and the set, in any order."""
    name = data.draw(_names, label="name")
    axioms = data.draw(st.frozensets(_names, max_size=12), label="axioms")
    order = data.draw(st.permutations(sorted(axioms)), label="order")
    text = _lean_text(name, order)
    assert parse_axioms(text) == AxiomReport(name, frozenset(axioms))


@pytest.mark.parametrize(
    ("name", "axioms"),
    [
        ("swap_eq_swap'", ["propext", "swap_eq_swap'._native.bv_decide.ax_3"]),
        ("a'.b''", ["c'", "d.e'"]),
        ("Foo.«my, odd] name»", ["«x, y».z", "propext"]),
        ("Long." * 20 + "name", ["A" * 50, "B" * 50, "C.c"]),
    ],
)
def test_parse_examples_in_lean_layout(name, axioms):
    text = _lean_text(name, axioms)
    assert parse_axioms(text) == AxiomReport(name, frozenset(axioms))


@given(_names, st.frozensets(_names, max_size=8), st.text(min_size=1).filter(str.strip))
def test_anything_after_a_report_makes_it_no_report(name, axioms, extra):
    text = _lean_text(name, sorted(axioms)) + "\n" + extra
    assert parse_axioms(text) is None
