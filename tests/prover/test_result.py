"""One type per idea: an attempt's outcome is declared once (``AttemptOutcome``, shared by a
search's ``SearchResult`` and the stored ``ProofAttempt``), Lean's judgement is read as an
attempt's status in one place (``AttemptStatus.judged``), and the OpenAI client is set up in
one place for the prover, the sampler and the server."""

from __future__ import annotations

import asyncio

import pytest

from leanloop.data.records import AttemptOutcome, AttemptStatus, Pos, ProofAttempt, Theorem
from leanloop.lean.audit import Judgement, Outcome
from leanloop.prover.benchmark_config import ProofPrompt
from leanloop.prover.external import NO_KEY, openai_client
from leanloop.prover.result import SearchResult
from leanloop.prover.samplers import EndpointSampler


def test_a_search_result_and_a_stored_attempt_share_one_outcome():
    assert issubclass(SearchResult, AttemptOutcome) and issubclass(ProofAttempt, AttemptOutcome)
    result = SearchResult(
        target="t",
        status=AttemptStatus.PROVED,
        proof=("simp",),
        expansions=3,
        tree_size=4,
        seconds=2.5,
        lean_seconds=1.0,
        model_seconds=1.5,
        error="found at depth 1",
        axioms=("propext",),
    )
    theorem = Theorem(
        url="https://x/y",
        commit="c",
        file_path="A.lean",
        full_name="t",
        start=Pos(1, 1),
        end=Pos(1, 9),
    )
    stored = result.to_attempt(theorem, run="r", attempt=2, prover="p", environment="lean")
    for name in AttemptOutcome.model_fields:  # every outcome field travels, none is left out
        assert getattr(stored, name) == getattr(result, name), name
    assert (stored.run, stored.attempt, stored.prover, stored.key) == ("r", 2, "p", theorem.key)


@pytest.mark.parametrize(
    ("judgement", "status"),
    [
        (Judgement(Outcome.ACCEPTED, "", ("propext",)), AttemptStatus.PROVED),
        (Judgement(Outcome.ACCEPTED, "", (), audited=False), AttemptStatus.RECORDED),
        (Judgement(Outcome.REFUSED, "sorryAx"), AttemptStatus.REFUSED),
        (Judgement(Outcome.BROKEN, "the file does not elaborate"), AttemptStatus.ERROR),
        (Judgement(Outcome.REJECTED, "type mismatch"), AttemptStatus.FAILED),
        (Judgement(Outcome.SORRY, "a sorry"), AttemptStatus.FAILED),
    ],
)
def test_lean_s_judgement_is_read_as_a_status_in_one_place(judgement, status):
    assert AttemptStatus.judged(judgement) is status
    assert AttemptStatus.judged(judgement).found_proof == judgement.accepted


def test_one_openai_client_set_up_for_the_prover_the_sampler_and_the_server():
    client = openai_client(None, "http://127.0.0.1:9/v1", timeout=5, max_retries=1)
    assert client.api_key == NO_KEY and str(client.base_url).startswith("http://127.0.0.1:9/v1")
    assert client.timeout == 5 and client.max_retries == 1
    sampler = EndpointSampler("m", ProofPrompt(), base_url="http://127.0.0.1:9/v1", timeout=7)
    assert type(sampler.client) is type(client) and sampler.client.timeout == 7
    served = openai_client("k", None, timeout=3, max_retries=0, asynchronous=True)
    assert served.api_key == "k" and type(served).__name__ == "AsyncOpenAI"
    asyncio.run(served.close())
