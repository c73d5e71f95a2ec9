"""Streaming through the OpenAI API with the official ``openai`` client against the live server:
each reply's text reaches the client while the model is still generating it — shown by events,
not by timing: the client holds the first chunk while the model (a stand-in local model, or a
provider's server on loopback) waits for the test to let it finish — a client that leaves a
stream stops the generation, and the remote providers (OpenAI-compatible, Anthropic, Gemini)
answer /v1 whole (with ``usage``) and streamed through their clients' own streaming."""

from __future__ import annotations

import httpx
import openai
import pytest

from leanloop.serve import ServeConfig, create_app
from leanloop.serve.streaming import Abandoned, SentText, settled
from tests.serve_support import (
    FakeUpstream,
    StandinModel,
    live_server,
    standin_backend,
    wait_until,
)

# google-genai subclasses an aiohttp class, which aiohttp warns about
pytestmark = pytest.mark.filterwarnings("ignore:Inheritance class Aiohttp:DeprecationWarning")

MESSAGES = [{"role": "user", "content": "goal"}]
#: How long a client waits for an answer before the test fails (a guard, not a measurement).
GUARD = 30


def queued(url: str) -> int:
    """The requests waiting for the model or running on it, as /models says."""
    (model,) = httpx.get(f"{url}/models", timeout=GUARD).json()["models"]
    return model["queued"]


def local_server(model: StandinModel):
    config = ServeConfig.from_dict({"models": [{"name": "local", "provider": "hf", "model": "x"}]})
    app = create_app(config, backends={"local": standin_backend(config, "local", model)})
    return live_server(app)


def test_a_local_reply_is_streamed_while_it_is_generated():
    model = StandinModel()
    model.after_first_token.clear()  # the model waits after its first token until told
    with local_server(model) as url:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0, timeout=GUARD)
        stream = client.chat.completions.create(
            model="local",
            messages=MESSAGES,
            temperature=1.0,
            n=2,
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = iter(stream)
        seen: dict[int, str] = {}
        while len([text for text in seen.values() if text]) < 2:
            for choice in next(chunks).choices:
                seen[choice.index] = seen.get(choice.index, "") + (choice.delta.content or "")
        # both replies' first words arrived while the model still holds their second
        assert seen == {0: "exact", 1: "exact"}
        assert not model.stream_ended.is_set() and model.finished == 0
        model.after_first_token.set()
        finish = {}
        usage = None
        for chunk in chunks:
            usage = chunk.usage or usage
            for choice in chunk.choices:
                seen[choice.index] += choice.delta.content or ""
                if choice.finish_reason:
                    finish[choice.index] = choice.finish_reason
    assert seen == {0: "exact goal_0", 1: "exact goal_1"}
    assert finish == {0: "stop", 1: "stop"}
    assert usage is not None and usage.prompt_tokens == 1 and usage.completion_tokens == 6


def test_a_client_that_leaves_a_stream_stops_the_generation():
    model = StandinModel()
    model.after_first_token.clear()
    with local_server(model) as url:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0, timeout=GUARD)
        stream = client.chat.completions.create(
            model="local", messages=MESSAGES, temperature=1.0, stream=True
        )
        text = ""
        chunks = iter(stream)
        while not text:
            text += next(chunks).choices[0].delta.content or ""
        assert queued(url) == 1
        stream.close()  # the client leaves with the reply half generated
        # the server hears of it and cancels the request (it leaves the model's queue) ...
        wait_until(lambda: queued(url) == 0, timeout=GUARD)
        # ... and the next token the model hands over stops it
        model.after_first_token.set()
        assert model.stream_ended.wait(GUARD)
    assert isinstance(model.stream_failure, Abandoned)
    assert model.finished == 0


def test_text_that_may_become_a_stop_sequence_is_held_back():
    assert settled("rw [h]\nex", ["\nexact"]) == ("rw [h]", False)
    assert settled("rw [h]\nexact h", ["\nexact"]) == ("rw [h]", True)
    assert settled("simp \ufffd", []) == ("simp", False)
    sent = SentText(["<stop>"])
    # "p " waits: the space may still be joined to what follows; once the stop sequence
    # comes, the text before it is the reply's
    assert [sent.grow(piece) for piece in ["sim", "p <st", "op> omega"]] == ["sim", "p", " "]
    assert sent.stopped and sent.grow(" more") == "" and sent.finish("simp ") == ""


@pytest.fixture(scope="module", params=["openai", "anthropic", "gemini"])
def remote(request):
    wire = request.param
    upstream = FakeUpstream(wire, replies=["simp", "omega", "rfl", "decide"])
    suffix = "/v1" if wire == "openai" else ""
    config = ServeConfig.from_dict(
        {
            "models": [
                {
                    "name": "remote",
                    "provider": wire,
                    "model": "m",
                    "base_url": upstream.url + suffix,
                }
            ]
        }
    )
    try:
        with live_server(create_app(config)) as url:
            client = openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0, timeout=GUARD)
            yield wire, client, upstream
    finally:
        upstream.close()


def test_a_remote_chat_is_answered_whole_with_usage(remote):
    wire, client, upstream = remote
    answer = client.chat.completions.create(
        model="remote", messages=MESSAGES, n=2, max_tokens=32, stop=["\n\n"], temperature=0.5
    )
    assert len(answer.choices) == 2
    assert {c.message.content for c in answer.choices} <= {"simp", "omega", "rfl", "decide"}
    assert all(c.finish_reason == "stop" for c in answer.choices)
    assert answer.usage is not None and answer.usage.prompt_tokens == 10
    sent = upstream.requests[-1].body
    if wire == "openai":
        assert (sent["n"], sent["max_tokens"], sent["stop"]) == (2, 32, ["\n\n"])
    elif wire == "anthropic":
        assert (sent["max_tokens"], sent["stop_sequences"]) == (32, ["\n\n"])
    else:
        config = sent["generationConfig"]
        assert (config["candidateCount"], config["maxOutputTokens"]) == (2, 32)
        assert config["stopSequences"] == ["\n\n"]


def test_a_remote_chat_is_streamed_as_the_provider_streams_it(remote):
    wire, client, upstream = remote
    upstream.after_first.clear()  # the provider sends its first pieces, then waits
    try:
        stream = client.chat.completions.create(
            model="remote",
            messages=MESSAGES,
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = iter(stream)
        first = ""
        while not first:
            first = next(chunks).choices[0].delta.content or ""
        # the first half of the reply came while the provider holds the second
        assert not upstream.after_first.is_set()
    finally:
        upstream.after_first.set()
    rest, finish, usage = "", None, None
    for chunk in chunks:
        usage = chunk.usage or usage
        for choice in chunk.choices:
            rest += choice.delta.content or ""
            finish = choice.finish_reason or finish
    assert first + rest in {"simp", "omega", "rfl", "decide"} and len(first) < len(first + rest)
    assert finish == "stop"
    assert usage is not None and usage.prompt_tokens == 10 and usage.completion_tokens == 2
    if wire != "gemini":
        assert upstream.requests[-1].body["stream"] is True
    else:
        assert "streamGenerateContent" in upstream.requests[-1].path


def test_remote_text_completions(remote):
    wire, client, upstream = remote
    if wire != "openai":
        with pytest.raises(openai.BadRequestError, match="has no text completions"):
            client.completions.create(model="remote", prompt="theorem t :")
        return
    answer = client.completions.create(model="remote", prompt="theorem t :", n=2, max_tokens=8)
    assert [c.index for c in answer.choices] == [0, 1]
    assert upstream.requests[-1].path == "/v1/completions"
    assert upstream.requests[-1].body["prompt"] == "theorem t :"
    assert answer.usage.completion_tokens == 2
    pieces = [
        choice.text
        for chunk in client.completions.create(
            model="remote", prompt="theorem t :", max_tokens=8, stream=True
        )
        for choice in chunk.choices
    ]
    assert "".join(pieces) in {"simp", "omega", "rfl", "decide"}


def test_a_failing_provider_is_an_http_error_before_the_stream_starts():
    upstream = FakeUpstream("openai", mode="fail")
    config = ServeConfig.from_dict(
        {
            "models": [
                {
                    "name": "remote",
                    "provider": "openai",
                    "model": "m",
                    "retries": 0,
                    "base_url": upstream.url + "/v1",
                }
            ]
        }
    )
    try:
        with live_server(create_app(config)) as url:
            client = openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0)
            with pytest.raises(openai.APIStatusError) as failed:
                client.chat.completions.create(model="remote", messages=MESSAGES, stream=True)
    finally:
        upstream.close()
    assert failed.value.status_code == 502
    assert "model 'remote' (openai) failed" in failed.value.message
