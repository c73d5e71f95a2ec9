"""Lean's messages -> accepted / rejected / contains sorry, on real recorded verdicts."""

from __future__ import annotations

import json

import pytest

from leanloop.lean.protocol.repl import Message
from leanloop.lean.server import CheckResult, LeanMessage, ProofState
from leanloop.lean.verdict import Outcome, verdict_of


def rows(fixtures):
    path = fixtures / "kimina_verdicts" / "verdicts.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def expected_by_the_dataset_rule(messages) -> Outcome:
    """The rule the recordings were judged by: accepted iff no error and no sorry warning."""
    if any(m["severity"] == "error" for m in messages):
        return Outcome.REJECTED
    if any(m["severity"] == "warning" and "sorry" in m["data"] for m in messages):
        return Outcome.SORRY
    return Outcome.ACCEPTED


def test_every_recorded_verdict(fixtures):
    recorded = rows(fixtures)
    judged = failed_checks = 0
    for row in recorded:
        result = row["result"]["results"][0]
        if result["error"]:  # the check itself failed (timeout): there is no verdict to agree on
            assert not result["response"]
            failed_checks += 1
            continue
        raw = result["response"].get("messages", [])
        messages = [Message.model_validate(m) for m in raw]
        assert [m.model_dump(by_alias=True, exclude_unset=True) for m in messages] == raw
        assert verdict_of(messages) is expected_by_the_dataset_rule(raw), row["name"]
        judged += 1
    assert judged == 74 and failed_checks == 4


def test_linter_warnings_do_not_reject(fixtures):
    noisy = max(
        (r for r in rows(fixtures) if not r["result"]["results"][0]["error"]),
        key=lambda r: len(r["result"]["results"][0]["response"].get("messages", [])),
    )
    messages = [
        Message.model_validate(m) for m in noisy["result"]["results"][0]["response"]["messages"]
    ]
    assert len(messages) > 20 and all(m.severity != "error" for m in messages)
    assert verdict_of(messages) is Outcome.ACCEPTED


@pytest.mark.parametrize(
    ("messages", "sorries", "verdict"),
    [
        ([LeanMessage("warning", "declaration uses 'sorry'")], 0, Outcome.SORRY),
        ([LeanMessage("warning", "declaration uses `sorry`")], 0, Outcome.SORRY),
        ([LeanMessage("warning", "unused variable `h_sorry`")], 0, Outcome.ACCEPTED),
        ([], 1, Outcome.SORRY),
        (
            [LeanMessage("warning", "declaration uses 'sorry'"), LeanMessage("error", "x")],
            1,
            Outcome.REJECTED,
        ),
    ],
)
def test_verdict_rules(messages, sorries, verdict):
    assert CheckResult.from_messages(messages, ["⊢ g"] * sorries).verdict is verdict


def test_pretty_state():
    assert ProofState(0, ()).pretty == "no goals"
    assert ProofState(0, ("⊢ a", "⊢ b")).pretty == "⊢ a\n\n⊢ b"
