"""``KiminaVerifier`` against a real HTTP server on loopback that speaks the Kimina Lean Server's
wire format and answers each code with the verdict a real Lean server gave on it (the recorded
``kimina_verdicts``); the server can also be slow, fail, ask for a key or answer garbage."""

from __future__ import annotations

import asyncio
import json
import math
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse

from leanloop.errors import LeanloopError
from leanloop.lean.kimina import KiminaVerifier
from leanloop.lean.kimina_positions import Convention
from leanloop.lean.verdict import Outcome, verdict_of
from leanloop.lean.verification import Verification, Verifier
from tests.serve_support import live_server

KEY_VARIABLE = "LEANLOOP_TEST_KIMINA_KEY"


@dataclass
class KiminaStandIn:
    """``POST /verify`` answering each code with Lean's recorded result on it (under the
    request's ``custom_id``). ``script`` says what to answer each request instead, in turn: an
    HTTP status, a raw ``bytes`` body, or a function of the request's body giving the JSON
    answer; ``delay`` makes every answer late; ``api_key`` makes a bearer token necessary."""

    verdicts: dict[str, dict[str, Any]]
    script: list[Any] = field(default_factory=list)
    delay: float = 0.0
    reverse: bool = False
    api_key: str | None = None
    requests: list[tuple[dict[str, str], Any]] = field(default_factory=list)

    def reset(self) -> None:
        self.script, self.delay, self.reverse, self.api_key = [], 0.0, False, None
        self.requests.clear()

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/verify")
        async def verify(request: Request) -> Response:
            body = await request.json()
            self.requests.append((dict(request.headers), body))
            step = self.script.pop(0) if self.script else None
            if self.delay:
                await asyncio.sleep(self.delay)
            if self.api_key and request.headers.get("authorization") != f"Bearer {self.api_key}":
                return JSONResponse({"detail": "a valid API key is needed"}, status_code=401)
            if isinstance(step, int):
                return JSONResponse({"detail": "the server is busy"}, status_code=step)
            if isinstance(step, bytes):
                return Response(step, media_type="text/html")
            if callable(step):
                return JSONResponse(step(body))
            results = [
                {**self.verdicts[code["proof"]], "custom_id": code["custom_id"]}
                for code in body["codes"]
            ]
            return JSONResponse({"results": results[::-1] if self.reverse else results})

        return app


@pytest.fixture(scope="module")
def recorded(fixtures) -> dict[str, dict[str, Any]]:
    """Each recorded code and the result a real Lean server gave on it."""
    verdicts = {}
    path = fixtures / "kimina_verdicts" / "verdicts.jsonl"
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        (verdicts[row["code"]],) = row["result"]["results"]
    return verdicts


@pytest.fixture(scope="module")
def served(recorded) -> Iterator[tuple[KiminaStandIn, str]]:
    standin = KiminaStandIn(recorded)
    with live_server(standin.app(), timeout_graceful_shutdown=2) as url:
        yield standin, url


@pytest.fixture
def kimina(served) -> Iterator[tuple[KiminaStandIn, str]]:
    standin, url = served
    standin.reset()
    yield standin, url
    standin.reset()


def verifier(url: str, **options: Any) -> KiminaVerifier:
    return KiminaVerifier(url, **{"retries": 2, "backoff": 0.01, **options})


def assert_failed(verifications: list[Verification], url: str, *reasons: str) -> None:
    for verification in verifications:
        assert verification.result is None and verification.source == "lean"
        assert verification.error is not None and "\n" not in verification.error
        assert verification.error.startswith(f"the Kimina Lean Server at {url}: ")
        for reason in reasons:
            assert reason in verification.error


def test_recorded_verdicts_come_back_batched_and_in_order(kimina, recorded):
    standin, url = kimina
    standin.reverse = True  # results in another order than the codes: matched by custom_id
    codes = list(recorded)
    client = verifier(url, batch_size=8)
    assert isinstance(client, Verifier) and client.live and client.source == "lean"

    verifications = client.check_batch(codes, timeout=60)
    client.close()
    # the recorded answers count lines after the header the server cut off, and show it
    assert client.convention.learned is Convention.AFTER_HEADER

    assert len(standin.requests) == math.ceil(len(codes) / 8) > 1
    sent = [code for _, body in standin.requests for code in body["codes"]]
    assert [c["proof"] for c in sent] == codes
    assert [c["custom_id"] for c in sent] == [str(i) for i in range(len(codes))]
    assert all(body["timeout"] == 60 and len(body["codes"]) <= 8 for _, body in standin.requests)
    errors = 0
    for code, verification in zip(codes, verifications, strict=True):
        item = recorded[code]
        assert verification.source == "lean"
        if item["error"]:
            errors += 1
            assert verification.result is None and verification.error == item["error"]
            assert verification.seconds > 0  # the request's time, shared by its codes
            continue
        response = item["response"]
        messages = [SimpleNamespace(**m) for m in response.get("messages") or ()]
        assert verification.error is None
        assert verification.result.verdict == verdict_of(
            messages, sorries=len(response.get("sorries") or ())
        )
        assert [m.text for m in verification.result.messages] == [m.data for m in messages]
        assert verification.seconds == pytest.approx(response["time"])
    assert errors  # the recorded "Lean process timed out" results


def test_a_lean_error_rejects_its_code_only(kimina, recorded):
    standin, url = kimina
    accepted, code = [c for c, r in recorded.items() if r["response"]][:2]

    # The recorded verdicts hold no error-severity message, so this answer is built here: a
    # wire-format test of the client, not Lean's output on the code. It points at the code's
    # last line, counted from its first line (past the code in any other convention).
    last = code.rstrip("\n").count("\n") + 1

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        first, second = body["codes"]
        error = {
            "severity": "error",
            "pos": {"line": last, "column": 2},
            "endPos": {"line": last, "column": 6},
            "data": "unsolved goals\n⊢ False",
        }
        return {
            "results": [
                {
                    "custom_id": second["custom_id"],
                    "error": None,
                    "response": {"messages": [error]},
                },
                {**recorded[first["proof"]], "custom_id": first["custom_id"]},
            ]
        }

    standin.script = [answer]
    first, second = verifier(url).check_batch([accepted, code], timeout=30)

    assert first.error is None and first.result.verdict is Outcome.ACCEPTED
    assert second.error is None and second.result.verdict is Outcome.REJECTED
    (message,) = second.result.errors
    assert (message.line, message.column, message.end_line) == (last, 2, last)
    assert message.text == "unsolved goals\n⊢ False"


def test_a_server_slower_than_the_timeout_fails_the_batch_after_the_retries(kimina, recorded):
    standin, url = kimina
    standin.delay = 1.0
    codes = list(recorded)[:3]
    started = time.monotonic()

    verifications = verifier(url, timeout=0.2, retries=2).check_batch(codes, timeout=30)

    assert len(standin.requests) == 3  # one attempt and two retries
    assert time.monotonic() - started < 2
    assert len(verifications) == 3
    assert_failed(verifications, url, "no answer within 0.2 s after 3 attempts")


def test_an_unreachable_server_fails_the_batch(recorded):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"
    verifications = verifier(url).check_batch(list(recorded)[:2], timeout=30)
    assert_failed(verifications, url, "cannot reach it", "after 3 attempts")


def test_busy_answers_are_retried(kimina, recorded):
    standin, url = kimina
    standin.script = [503, 429]
    code = next(c for c, r in recorded.items() if r["response"])

    (verification,) = verifier(url).check_batch([code], timeout=30)

    assert len(standin.requests) == 3
    assert verification.error is None and verification.result.verdict is Outcome.ACCEPTED


def test_busy_answers_until_the_retries_are_spent(kimina, recorded):
    standin, url = kimina
    standin.script = [503, 503, 503]
    verifications = verifier(url, batch_size=1).check_batch(list(recorded)[:2], timeout=30)
    # the first code's batch fails after three attempts; the second's gets the real answer
    assert len(standin.requests) == 4
    assert_failed(verifications[:1], url, "HTTP 503 Service Unavailable", "after 3 attempts")
    assert verifications[1].error is None and verifications[1].result is not None


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (b"<html>Bad gateway</html>", "the answer is not JSON"),
        (lambda body: {"results": 5}, "the answer has no 'results' list"),
        (lambda body: [1, 2], "the answer has no 'results' list"),
        (
            lambda body: {"results": [{"custom_id": c["custom_id"]} for c in body["codes"]]},
            "is malformed: the result has neither 'error' nor 'response'",
        ),
        (
            lambda body: {
                "results": [
                    {"custom_id": c["custom_id"], "error": None, "response": {"messages": [7]}}
                    for c in body["codes"]
                ]
            },
            "is malformed: messages[0]",
        ),
        (
            lambda body: {"results": [{"error": None, "response": {}}, "x"]},
            "the answer has no result for code 0 (2 result(s) had no known custom_id)",
        ),
    ],
)
def test_a_malformed_answer_fails_the_batch_with_one_line(kimina, recorded, answer, reason):
    standin, url = kimina
    standin.script = [answer]
    verifications = verifier(url).check_batch(list(recorded)[:1], timeout=30)
    assert len(standin.requests) == 1  # not retried
    assert_failed(verifications, url, reason)


def test_unknown_and_missing_custom_ids_fail_only_their_codes(kimina, recorded):
    standin, url = kimina
    codes = [c for c, r in recorded.items() if r["response"]][:3]

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        first, _, third = body["codes"]
        return {
            "results": [
                {**recorded[first["proof"]], "custom_id": first["custom_id"]},
                {**recorded[third["proof"]], "custom_id": "99"},
            ]
        }

    standin.script = [answer]
    first, second, third = verifier(url).check_batch(codes, timeout=30)

    assert first.error is None and first.result is not None
    assert_failed([second, third], url, "(1 result(s) had no known custom_id)")
    assert "code 1 " in second.error and "code 2 " in third.error


def test_the_api_key_is_sent_as_a_bearer_token(kimina, recorded, monkeypatch):
    standin, url = kimina
    standin.api_key = "secret-test-key"
    code = next(c for c, r in recorded.items() if r["response"])
    monkeypatch.setenv(KEY_VARIABLE, "secret-test-key")

    (verification,) = verifier(url, api_key_env=KEY_VARIABLE).check_batch([code], timeout=30)
    assert verification.error is None and verification.result is not None
    headers, _ = standin.requests[-1]
    assert headers["authorization"] == "Bearer secret-test-key"

    # without the key: refused at once (a 4xx other than 429 is not retried)
    standin.requests.clear()
    (refused,) = verifier(url).check_batch([code], timeout=30)
    assert len(standin.requests) == 1 and "authorization" not in standin.requests[0][0]
    assert_failed([refused], url, "HTTP 401 Unauthorized", "a valid API key is needed")

    monkeypatch.delenv(KEY_VARIABLE)
    with pytest.raises(LeanloopError, match=KEY_VARIABLE):
        verifier(url, api_key_env=KEY_VARIABLE)


def test_close_closes_only_the_client_it_made(kimina, recorded):
    _, url = kimina
    own = verifier(url)
    own.close()
    assert own.client.is_closed
    given = httpx.Client()
    verifier(url, client=given).close()
    assert not given.is_closed
    given.close()
    assert verifier(url).check_batch([], timeout=30) == []
