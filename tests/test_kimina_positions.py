"""Kimina Lean Server answers read in the position convention of the server that gave them.

The recorded verdicts (``kimina_verdicts``) come from a Kimina server that counted lines after the
header it cut off (its ``import`` lines and the blank line after them); the current server adds
those lines back. Gap codes (``sorry``...) come from the REPL transcripts that run exactly what a
Kimina server runs: the imports as one command, then the rest of the file on that environment
(``"env": 0``) — the REPL's answer there is what a Kimina server before October 2025 answered."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI

from leanloop.lean.audit import AuditedCode, Outcome, judge
from leanloop.lean.axioms import AxiomPolicy
from leanloop.lean.kimina import KiminaVerifier
from leanloop.lean.kimina_positions import (
    Convention,
    ServerConvention,
    read_positions,
    uncounted_lines,
)
from leanloop.lean.lexer import Kind, tokenize
from leanloop.lean.scanner import scan
from leanloop.lean.verification import RecordedVerifier, Verification, check_result_of
from tests.serve_support import live_server

#: tactics that leave a goal open and let Lean accept the declaration with a warning
GAPS = {"sorry", "admit", "stop", "apply?"}
POLICY = AxiomPolicy()
#: a transcript whose recorded command keeps the raw line breaks of the REPL test's input file
#: besides its escaped ones: Lean saw only the escaped ones, so its answer's lines (the sorry
#: warning at line 3, the declaration's name there) count a text without the blank lines
MISRECORDED = {"Mathlib/test/line_breaks"}


def kimina_cut(code: str) -> int:
    """The lines a Kimina server of July–October 2025 sent to Lean apart: every leading line that
    is blank or an ``import`` (server/split.py, ``split_snippet``)."""
    lines = code.splitlines()
    cut = 0
    while cut < len(lines) and (not lines[cut].strip() or lines[cut].strip().startswith("import ")):
        cut += 1
    return cut


def shifted(response: dict[str, Any], lines: int) -> dict[str, Any]:
    """``response`` as the current Kimina server gives it: ``lines`` added to each message's and
    sorry's ``pos``/``endPos`` line (a transformation of Lean's real answer, nothing invented)."""
    moved = json.loads(json.dumps(response))
    for key in ("messages", "sorries"):
        for item in moved.get(key) or ():
            for where in ("pos", "endPos"):
                if item.get(where):
                    item[where]["line"] += lines
    return moved


def declaration(code: str) -> AuditedCode:
    """The code judged as one declaration from its first declaration to its end, as a recorded
    verdict's code is judged in a benchmark (``prover.sampling.prepare``)."""
    first = scan(code).declarations[0]
    return AuditedCode.unaudited(code, first.start.offset, len(code), first.name or "example")


def gaps_in(code: str) -> set[str]:
    return {t.text for t in tokenize(code) if t.kind is Kind.IDENT and t.text in GAPS}


@pytest.fixture(scope="module")
def rows(fixtures) -> list[dict[str, Any]]:
    path = fixtures / "kimina_verdicts" / "verdicts.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def gap_answers(transcripts) -> dict[str, dict[str, Any]]:
    """Each file with a gap checked the way a Kimina server checks it (imports, a blank line,
    the body on the imports' environment) and the REPL's real answer on its body."""
    answers = {}
    for transcript in transcripts.values():
        if transcript["name"] in MISRECORDED:
            continue
        first, *rest = transcript["requests"]
        imports = first.get("cmd", "")
        if set(first) != {"cmd"} or not all(
            line.startswith("import ") for line in imports.split("\n")
        ):
            continue
        for request, response in zip(rest, transcript["responses"][1:], strict=False):
            if set(request) == {"cmd", "env"} and request["env"] == 0:
                code = f"{imports}\n\n{request['cmd']}\n"
                if gaps_in(code):
                    answers[code] = response
    return answers


def test_each_kimina_versions_uncounted_lines():
    """The lines each server version cuts off (facts of project-numina/kimina-lean-server)."""
    usual = (
        "import Mathlib\nimport Aesop\n\nset_option maxHeartbeats 0\n\n"
        + "theorem t : True := by simp"
    )
    assert [uncounted_lines(usual, c) for c in Convention] == [0, 3, 2]
    comment = "import Mathlib\n-- a comment is not cut\n\ntheorem t : True := trivial"
    assert [uncounted_lines(comment, c) for c in Convention] == [0, 1, 1]
    spaced = "\n\nimport A\n\nimport B\n\ntheorem t : True := trivial"
    assert [uncounted_lines(spaced, c) for c in Convention] == [0, 6, 3]
    no_imports = "\n\ntheorem t : True := trivial"  # 1.0.x checked such code whole
    assert [uncounted_lines(no_imports, c) for c in Convention] == [0, 2, 0]


def test_the_unused_variable_warnings_land_on_their_identifiers(fixtures, rows):
    verifier = RecordedVerifier(fixtures / "kimina_verdicts" / "verdicts.jsonl")
    landed = raw_landed = 0
    for row in rows:
        verification = verifier.check(row["code"])
        if verification.result is None:
            continue
        lines = row["code"].split("\n")
        raw = check_result_of(row["result"]["results"][0]["response"])
        for ours, theirs in zip(verification.result.messages, raw.messages, strict=True):
            match = re.match(r"unused variable `(.+)`", ours.text)
            if match is None:
                continue
            assert ours.line == ours.end_line and ours.line is not None
            assert lines[ours.line - 1][ours.column : ours.end_column] == match.group(1)
            landed += 1
            assert theirs.line is not None and ours.line == theirs.line + 3
            raw_landed += lines[theirs.line - 1][theirs.column : theirs.end_column] == match[1]
    assert landed == 26 and raw_landed == 0  # read as recorded, none of them would


def test_every_recorded_answer_is_read_in_one_convention(fixtures, rows):
    verifier = RecordedVerifier(fixtures / "kimina_verdicts" / "verdicts.jsonl")
    assert verifier.convention.learned is Convention.AFTER_HEADER
    bases = Counter()
    for row in rows:
        verification = verifier.check(row["code"])
        if verification.result is None:
            assert verification.positions is None
            continue
        reading = verification.positions
        assert reading is not None and reading.convention is Convention.AFTER_HEADER
        assert reading.lines == kimina_cut(row["code"]) in (2, 3)
        bases[reading.basis] += 1
        last = len(row["code"].split("\n"))
        assert all(1 <= m.line <= last for m in verification.result.messages if m.line)
    # 33 answers show it themselves (named messages at their names); 41 (no message, or none
    # that names anything) take the convention the others showed
    assert bases == {"evidence": 33, "default": 41}


def test_the_recorded_verdicts_judged_as_declarations(fixtures, rows):
    verifier = RecordedVerifier(fixtures / "kimina_verdicts" / "verdicts.jsonl")
    # none of the 78 recorded codes has a gap; the gap codes are the REPL transcripts' (below)
    assert [row["name"] for row in rows if gaps_in(row["code"])] == []
    outcomes = Counter()
    for row in rows:
        verification = verifier.check(row["code"])
        if verification.result is None:
            outcomes["no verdict"] += 1
            continue
        outcomes[judge(verification.result, declaration(row["code"]), POLICY).outcome] += 1
    # counted by this reading: no recorded answer has an error or a sorry warning, and 4 checks
    # timed out ("Lean process timed out"); the same counts as before the positions were moved
    assert outcomes == {Outcome.ACCEPTED: 74, "no verdict": 4}


@pytest.mark.parametrize("convention", [Convention.AFTER_HEADER, Convention.WHOLE])
def test_gap_codes_are_never_accepted(gap_answers, tmp_path, convention):
    """Recorded in either convention, every code with a gap is judged to use sorry; read as it
    was before (lines as given), the older convention let most of them through."""
    assert len(gap_answers) == 7  # distinct codes (two transcripts check the same)
    path = tmp_path / "verdicts.jsonl"
    with path.open("w") as out:
        for code, response in gap_answers.items():
            cut = kimina_cut(code) if convention is Convention.WHOLE else 0
            result = {
                "results": [{"custom_id": "x", "error": None, "response": shifted(response, cut)}]
            }
            out.write(json.dumps({"code": code, "result": result}) + "\n")
    verifier = RecordedVerifier(path)
    read_as_given = Counter()
    for code, response in gap_answers.items():
        verification = verifier.check(code)
        assert verification.result is not None and verification.positions is not None
        assert verification.positions.convention is convention
        assert verification.positions.basis == "evidence"
        audited = declaration(code)
        assert judge(verification.result, audited, POLICY).outcome is Outcome.SORRY, code
        cut = kimina_cut(code) if convention is Convention.WHOLE else 0
        as_given = check_result_of(shifted(response, cut))
        read_as_given[judge(as_given, audited, POLICY).outcome] += 1
    expected = (
        {Outcome.SORRY: 7}
        if convention is Convention.WHOLE
        else {Outcome.ACCEPTED: 6, Outcome.SORRY: 1}
    )
    assert read_as_given == expected


class CurrentKimina:
    """``POST /verify`` answering in a chosen convention with Lean's real answers: the recorded
    verdicts and the gap codes' REPL answers, moved by the lines the server cut off when the
    convention is ``WHOLE`` (what the current server does to Lean's answer), as given otherwise."""

    def __init__(self, answers: dict[str, dict[str, Any]], convention: Convention) -> None:
        self.answers = answers
        self.convention = convention

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/verify")
        def verify(body: dict) -> dict:
            results = []
            for item in body["codes"]:
                code, answer = item["proof"], dict(self.answers[item["proof"]])
                if answer.get("response") and self.convention is Convention.WHOLE:
                    answer["response"] = shifted(answer["response"], kimina_cut(code))
                results.append({**answer, "custom_id": item["custom_id"]})
            return {"results": results}

        return app


@pytest.mark.parametrize("convention", [Convention.WHOLE, Convention.AFTER_HEADER])
def test_kimina_verifier_reads_a_live_servers_convention(rows, gap_answers, convention):
    answers = {row["code"]: row["result"]["results"][0] for row in rows}
    answers |= {code: {"error": None, "response": r} for code, r in gap_answers.items()}
    with live_server(CurrentKimina(answers, convention).app()) as url:
        verifier = KiminaVerifier(url, batch_size=8, retries=0)
        verifications = verifier.check_batch(list(answers), timeout=60)
        verifier.close()
    assert verifier.convention.learned is convention
    outcomes: Counter = Counter()
    for code, verification in zip(answers, verifications, strict=True):
        if verification.result is None:
            assert verification.error == "Lean process timed out"
            outcomes["timed out"] += 1
            continue
        assert verification.positions is not None
        assert verification.positions.convention is convention
        judgement = judge(verification.result, declaration(code), POLICY)
        outcomes[judgement.outcome, bool(gaps_in(code))] += 1
    # every clean proof verified (73 distinct codes: two recorded rows check the same), every gap
    # code refused as using sorry
    assert outcomes == {(Outcome.ACCEPTED, False): 73, (Outcome.SORRY, True): 7, "timed out": 4}


def test_an_answer_that_shows_nothing_takes_the_servers_convention(transcripts, gap_answers):
    """An error that names nothing fits every convention: it is read in the one the server's
    earlier answers showed (before any, the current server's)."""
    transcript = transcripts["Mathlib/test/placeholder_synthesis"]
    code = f"{transcript['requests'][0]['cmd']}\n\n{transcript['requests'][1]['cmd']}\n"
    answer = transcript["responses"][1]  # Lean's error at the `_` of `simpa [] using h _`
    lines = code.split("\n")
    memo = ServerConvention()
    read = check_result_of(answer)  # Kimina's answer read once, its lines as given
    (first,) = memo.read([(code, read)])
    assert first is not None and first.basis == "default" and first.convention is Convention.WHOLE
    sorry_code = next(iter(gap_answers))
    shown, again = memo.read([(sorry_code, check_result_of(gap_answers[sorry_code])), (code, read)])
    assert shown is not None and shown.basis == "evidence" and shown.learnable
    assert memo.learned is Convention.AFTER_HEADER
    assert again is not None and again.basis == "default"
    assert again.convention is Convention.AFTER_HEADER
    (error,) = check_result_of(answer, again.lines).messages
    assert error.line is not None and lines[error.line - 1][error.column : error.end_column] == "_"
    assert read_positions(code, read).convention is Convention.WHOLE  # alone, the default


def test_positions_past_the_code_rule_a_convention_out(transcripts):
    """Lean's unsolved-goals error names nothing, but only one convention keeps it in the code."""
    transcript = transcripts["Mathlib/test/H20231115_3"]
    code = f"{transcript['requests'][0]['cmd']}\n\n{transcript['requests'][1]['cmd']}\n"
    reading = read_positions(code, check_result_of(transcript["responses"][1]))
    assert (reading.convention, reading.basis, reading.lines) == (
        Convention.AFTER_HEADER,
        "bounds",
        2,
    )
    moved = shifted(transcript["responses"][1], 2)
    assert read_positions(code, check_result_of(moved)).convention is Convention.WHOLE


def test_leanlooops_own_server_answers_in_the_whole_code(transcripts):
    """``leanloop serve``'s ``/verify`` (Lean's recorded answers through its REPL pool) is read
    as counting from the code's first line, and its sorry lands in the declaration."""
    from leanloop.lean.repl import ReplServer
    from leanloop.lean.transcript import TranscriptTransport
    from leanloop.serve import ServeConfig, create_app

    recording = transcripts["Mathlib/test/exact"]
    exchanges = list(zip(recording["requests"][:2], recording["responses"][:2], strict=True))
    config = ServeConfig.from_dict({"lean": {"project": "/nonexistent", "max_repls": 1}})
    recorded = TranscriptTransport(exchanges, ignore=("infotree",))  # recorded without one
    app = create_app(config, verifier_factory=lambda key: ReplServer(recorded))
    code = "import Mathlib\n\ntheorem test : 0 < 1 := by sorry"
    with live_server(app) as url:
        verifier = KiminaVerifier(url, retries=0)
        (verification,) = verifier.check_batch([code], timeout=60)
        verifier.close()
    assert isinstance(verification, Verification) and verification.result is not None
    assert verification.positions is not None
    assert verification.positions.convention is Convention.WHOLE
    assert (
        verification.positions.basis == "evidence"
        and verifier.convention.learned is Convention.WHOLE
    )
    (warning,) = verification.result.messages
    assert warning.line == 3 and verification.result.sorry_lines == (3,)
    assert judge(verification.result, declaration(code), POLICY).outcome is Outcome.SORRY


def test_a_malformed_recorded_answer_names_its_line(tmp_path: Path):
    path = tmp_path / "verdicts.jsonl"
    good = {"code": "def f := 1", "result": {"results": [{"error": None, "response": {}}]}}
    bad = {"code": "def g := 1", "result": {"results": [{"error": None, "response": []}]}}
    path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(Exception, match=r"verdicts.jsonl.*line 2") as caught:
        RecordedVerifier(path)
    assert "\n" not in str(caught.value)
