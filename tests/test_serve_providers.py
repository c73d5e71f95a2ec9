"""Each remote provider through its official client against a local HTTP server speaking that
provider's wire format (OpenAI chat completions, Anthropic messages, Gemini generateContent):
what is sent (path, key, sampling), how answers are ranked, and slow (504), failing (502, after
the configured retries), malformed and non-JSON (502) answers; keys never reach logs or error
bodies."""

from __future__ import annotations

import itertools
import logging

import httpx
import pytest

from leanloop.data.prompt import PromptFormat
from leanloop.serve import ServeConfig, create_app
from leanloop.serve.keys import MASK, Secrets
from leanloop.serve.providers.base import rank_samples
from tests.serve_support import FakeUpstream, live_server

# google-genai subclasses an aiohttp class, which aiohttp warns about
pytestmark = pytest.mark.filterwarnings("ignore:Inheritance class Aiohttp:DeprecationWarning")

KEY = "sk-live-SECRET-0123456789abcdef"
KEY_ENV = "LEANLOOP_TEST_PROVIDER_KEY"
GOAL = "a b : ℕ\n⊢ a + b = b + a"
MODES = ("ok", "slow", "fail", "malformed", "garbage")


@pytest.fixture(scope="module", params=["openai", "anthropic", "gemini"])
def provider(request, tmp_path_factory):
    wire = request.param
    upstreams = {mode: FakeUpstream(wire, mode=mode, delay=3.0) for mode in MODES}
    # a failing upstream repeats the key it was sent, as some providers do in their messages
    upstreams["fail"].answer = _echoing_key(upstreams["fail"])
    suffix = "/v1" if wire == "openai" else ""
    models = [
        {
            "name": f"{wire}-{mode}",
            "provider": wire,
            "model": "model-x",
            "base_url": upstream.url + suffix,
            "api_key_env": KEY_ENV,
            "timeout": 0.5 if mode == "slow" else 10,
            "retries": 1 if mode == "fail" else 0,
            "num_samples": 4,
        }
        for mode, upstream in upstreams.items()
    ]
    models.append(
        {"name": f"{wire}-nokey", "provider": wire, "model": "m", "api_key_env": "UNSET_KEY_VAR"}
    )
    config = ServeConfig.from_dict({"models": models})
    patch = pytest.MonkeyPatch()
    patch.setenv(KEY_ENV, KEY)
    patch.delenv("UNSET_KEY_VAR", raising=False)
    try:
        with live_server(create_app(config)) as url:
            yield wire, url, upstreams
    finally:
        patch.undo()
        for upstream in upstreams.values():
            upstream.close()


def _echoing_key(upstream: FakeUpstream):
    def answer(path, body):
        sent = upstream.requests[-1].headers
        key = sent.get("authorization") or sent.get("x-api-key") or sent.get("x-goog-api-key")
        status, payload = FakeUpstream.answer(upstream, path, body)
        text = f"invalid credentials: {key}"
        if "error" in payload and isinstance(payload["error"], dict):
            payload["error"]["message"] = text
        return status, payload

    return answer


def generate(url: str, name: str, **extra) -> httpx.Response:
    return httpx.post(f"{url}/generate", json={"name": name, "input": GOAL, **extra}, timeout=60)


def _sent_key(recorded) -> str | None:
    headers = recorded.headers
    for name in ("authorization", "x-api-key", "x-goog-api-key"):
        if name in headers:
            return headers[name].removeprefix("Bearer ")
    return None


def test_sampled_replies_rank_the_same_whatever_order_the_calls_returned_in():
    # Anthropic answers one reply per call and the calls run concurrently: their order varies
    replies = ["simp", "omega", "simp", "rfl"]
    rankings = {
        tuple(
            (g.tactic, round(g.score, 9))
            for g in rank_samples([(r, None) for r in order], PromptFormat(), "", 4)
        )
        for order in itertools.permutations(replies)
    }
    assert len(rankings) == 1
    (ranking,) = rankings
    assert [tactic for tactic, _ in ranking] == ["simp", "omega", "rfl"]


def test_answers_are_ranked_and_the_request_is_the_providers(provider):
    wire, url, upstreams = provider
    upstream = upstreams["ok"]
    upstream.requests.clear()
    answer = generate(url, f"{wire}-ok")
    assert answer.status_code == 200, answer.text
    outputs = answer.json()["outputs"]
    # replies cycle simp, omega, simp, rfl: simp is the most likely / most frequent
    assert [o["output"] for o in outputs] == ["simp", "omega", "rfl"]
    scores = [o["score"] for o in outputs]
    assert scores == sorted(scores, reverse=True) and all(0 < s <= 1 for s in scores)
    sent = upstream.requests
    assert all(_sent_key(r) == KEY for r in sent)
    if wire == "openai":
        (request,) = sent
        assert request.path == "/v1/chat/completions"
        assert request.body["n"] == 4 and request.body["logprobs"] is True
        assert request.body["model"] == "model-x"
        assert [m["role"] for m in request.body["messages"]] == ["system", "user"]
        assert request.body["messages"][1]["content"] == GOAL
    elif wire == "anthropic":
        assert len(sent) == 4  # one reply per call
        assert all(r.path == "/v1/messages" for r in sent)
        assert sent[0].body["messages"] == [{"role": "user", "content": GOAL}]
        assert "Lean 4" in sent[0].body["system"] and sent[0].body["max_tokens"] == 128
        # frequency: simp came back twice out of four
        assert scores[0] == pytest.approx(0.5)
    else:
        (request,) = sent
        assert request.path in (
            "/v1/models/model-x:generateContent",
            "/v1beta/models/model-x:generateContent",
        )
        assert request.body["generationConfig"]["candidateCount"] == 4
        assert request.body["contents"][0]["parts"][0]["text"] == GOAL
        assert "Lean 4" in request.body["systemInstruction"]["parts"][0]["text"]
        assert scores[0] == pytest.approx(0.5)


def test_prefix_is_asked_for_and_enforced(provider):
    wire, url, upstreams = provider
    upstreams["ok"].requests.clear()
    answer = generate(url, f"{wire}-ok", prefix="om", num_samples=8)
    assert answer.status_code == 200
    assert [o["output"] for o in answer.json()["outputs"]] == ["omega"]
    body = upstreams["ok"].requests[0].body
    text = str(body)
    assert "The tactic must begin with: om" in text


def test_more_samples_than_one_call_gives(provider):
    wire, url, upstreams = provider
    upstreams["ok"].requests.clear()
    assert generate(url, f"{wire}-ok", num_samples=10).status_code == 200
    calls = len(upstreams["ok"].requests)
    assert calls == {"openai": 1, "anthropic": 10, "gemini": 2}[wire]
    if wire == "gemini":
        counts = [r.body["generationConfig"]["candidateCount"] for r in upstreams["ok"].requests]
        assert sorted(counts) == [2, 8]


def test_a_slow_provider_is_a_504(provider):
    wire, url, _ = provider
    answer = generate(url, f"{wire}-slow")
    assert answer.status_code == 504
    assert answer.json()["detail"] == f"model '{wire}-slow' ({wire}) did not answer within 0.5 s"


def test_a_failing_provider_is_a_502_after_the_retries(provider):
    wire, url, upstreams = provider
    upstreams["fail"].requests.clear()
    answer = generate(url, f"{wire}-fail", num_samples=1)
    assert answer.status_code == 502
    detail = answer.json()["detail"]
    assert detail.startswith(f"model '{wire}-fail' ({wire}) failed:")
    assert "500" in detail and "invalid credentials" in detail
    assert KEY not in answer.text and MASK in detail
    assert len(upstreams["fail"].requests) == 2  # one retry


@pytest.mark.parametrize("mode", ["malformed", "garbage"])
def test_a_malformed_answer_is_a_502(provider, mode):
    wire, url, _ = provider
    answer = generate(url, f"{wire}-{mode}")
    assert answer.status_code == 502, answer.text
    assert answer.json()["detail"].startswith(f"model '{wire}-{mode}' ({wire}) failed")
    assert "Traceback" not in answer.text


def test_a_missing_key_is_a_503_naming_the_variable(provider):
    wire, url, _ = provider
    answer = generate(url, f"{wire}-nokey")
    assert answer.status_code == 503
    assert "UNSET_KEY_VAR" in answer.json()["detail"]


def test_keys_never_reach_the_logs(provider, caplog):
    wire, url, _ = provider
    with caplog.at_level(logging.DEBUG):
        for mode in MODES:
            generate(url, f"{wire}-{mode}", num_samples=1)
    assert caplog.records  # the clients and the server did log
    assert KEY not in caplog.text


def test_the_log_filter_masks_keys(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    secrets = Secrets()
    assert secrets.key(KEY_ENV, "a test key") == KEY
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "sent %s to %s", (KEY, "h"), None)
    assert secrets.log_filter().filter(record)
    assert record.getMessage() == f"sent {MASK} to h"
    assert secrets.redact(f"Bearer {KEY}") == f"Bearer {MASK}"
