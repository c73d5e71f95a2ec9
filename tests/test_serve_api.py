"""The model server on a real uvicorn server on loopback, exercised with httpx: /generate (the same
tactics as the generator itself, best first, prefix, batching), LeanProgress rewards from a real
progress model, /encode (the retriever's embedding), /health, /models, /openapi.json, and every
error status: 400, 401, 404, 413, 422, 429, 503 and a 500 without a traceback; API keys, CORS,
request ids, and a graceful shutdown of ``leanloop serve`` with a request in flight."""

from __future__ import annotations

import asyncio
import logging
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from leanloop.ml.protocols import GeneratedTactic
from leanloop.serve import ServeConfig, create_app
from leanloop.serve.admission import Gate
from leanloop.serve.providers.base import GeneratorBackend
from tests.serve_support import FakeUpstream, build_progress_model, live_server, wait_until
from tests.tiny_causal import shared_tiny_model

REPO = Path(__file__).resolve().parents[1]
GOAL = "n : ℕ\n⊢ n + 0 = n"


class HeldGenerator(GeneratorBackend):
    """A generator that holds each request at the gate until released (to fill the queue)."""

    def __init__(self, config, gate: Gate) -> None:
        super().__init__(config, gate)
        self.release = threading.Event()

    async def generate(self, state, prefix, k):
        async with self.gate.slot():
            while not self.release.is_set():
                await asyncio.sleep(0.01)
        return [GeneratedTactic("simp", math.log(0.5))]


class BrokenGenerator(GeneratorBackend):
    async def generate(self, state, prefix, k):
        raise RuntimeError("secret internal detail")


@pytest.fixture(scope="module")
def tiny_dir(sample_dir):
    return shared_tiny_model(sample_dir)


@pytest.fixture(scope="module")
def progress_dir(tiny_encoder, tmp_path_factory):
    return build_progress_model(tmp_path_factory.mktemp("progress") / "model", tiny_encoder)


@pytest.fixture(scope="module")
def config(tiny_dir, tiny_encoder, progress_dir):
    return ServeConfig.from_dict(
        {
            "models": [
                {
                    "name": "tiny",
                    "provider": "hf",
                    "model": str(tiny_dir),
                    "num_samples": 4,
                    "decoding": {"max_new_tokens": 12},
                },
                {"name": "retriever", "provider": "encoder", "model": str(tiny_encoder)},
                {"name": "held", "provider": "openai", "model": "held"},
                {"name": "broken", "provider": "openai", "model": "broken"},
            ],
            "progress_model": str(progress_dir),
            "max_body_bytes": 4096,
        }
    )


@pytest.fixture(scope="module")
def held(config):
    gate = Gate("held", concurrency=1, max_queue=2, max_wait=0.5)
    return HeldGenerator(config.model("held"), gate)


@pytest.fixture(scope="module")
def server(config, held):
    gate = Gate("broken", concurrency=1, max_queue=1, max_wait=1)
    broken = BrokenGenerator(config.model("broken"), gate)
    app = create_app(config, backends={"held": held, "broken": broken})
    with live_server(app) as url:
        yield app, url


@pytest.fixture
def client(server):
    with httpx.Client(base_url=server[1], timeout=120) as http:
        yield http


def test_health_models_and_schema(client):
    assert client.get("/health").json() == {"status": "ok"}
    models = client.get("/models").json()
    assert [(m["name"], m["kind"], m["provider"]) for m in models["models"]] == [
        ("tiny", "generator", "hf"),
        ("retriever", "encoder", "encoder"),
        ("held", "generator", "openai"),
        ("broken", "generator", "openai"),
    ]
    assert models["progress_model"]["configured"] is True and models["lean"] is False
    schema = client.get("/openapi.json").json()
    for path in ("/generate", "/encode", "/verify", "/api/checks", "/v1/chat/completions"):
        assert path in schema["paths"], path
    assert client.get("/health").headers["x-request-id"]


def test_generate_gives_the_generators_tactics_best_first(client, tiny_dir):
    from leanloop.ml.generation import DecodingOptions, TacticGenerator

    answer = client.post("/generate", json={"name": "tiny", "input": GOAL, "prefix": ""})
    assert answer.status_code == 200
    outputs = answer.json()["outputs"]
    assert 1 <= len(outputs) <= 4  # the model's num_samples
    direct = TacticGenerator(tiny_dir, options=DecodingOptions(max_new_tokens=12)).generate(GOAL, 4)
    assert [o["output"] for o in outputs] == [t.tactic for t in direct]
    for output, tactic in zip(outputs, direct, strict=True):
        assert output["score"] == pytest.approx(math.exp(tactic.score), rel=1e-4)
        assert 0 < output["score"] <= 1
        assert set(output) == {"output", "score"}
    scores = [o["score"] for o in outputs]
    assert scores == sorted(scores, reverse=True)
    models = {m["name"]: m for m in client.get("/models").json()["models"]}
    assert models["tiny"]["loaded"] is True


def test_generate_respects_prefix_and_num_samples(client):
    answer = client.post(
        "/generate", json={"name": "tiny", "input": GOAL, "prefix": "rw", "num_samples": 2}
    )
    outputs = answer.json()["outputs"]
    assert 1 <= len(outputs) <= 2
    assert all(o["output"].startswith("rw") for o in outputs)
    # one candidate: beam search with one beam is greedy decoding
    one = client.post("/generate", json={"name": "tiny", "input": GOAL, "num_samples": 1})
    assert one.status_code == 200 and len(one.json()["outputs"]) <= 1
    # Lean Copilot's Python server sends null for a missing prefix
    assert client.post("/generate", json={"name": "tiny", "input": GOAL, "prefix": None}).is_success


def test_concurrent_requests_share_batches(server, client):
    app, url = server
    assert client.post("/generate", json={"name": "tiny", "input": GOAL}).is_success  # loaded
    backend = app.state.models.backend("tiny")
    generator = backend.generator
    original = generator.generate_replies
    sizes = []

    def spy(prompts, k, **options):
        sizes.append(len(prompts))
        if len(sizes) == 1:  # the first batch runs until the other requests wait in the queue
            deadline = time.monotonic() + 120
            while sizes[0] + len(backend.worker._pending) < 5 and time.monotonic() < deadline:
                time.sleep(0.01)
        return original(prompts, k, **options)

    generator.generate_replies = spy
    try:

        async def burst():
            async with httpx.AsyncClient(base_url=url, timeout=120) as http:
                states = [f"x{i} : ℕ\n⊢ x{i} = x{i}" for i in range(5)]
                return await asyncio.gather(
                    *(http.post("/generate", json={"name": "tiny", "input": s}) for s in states)
                )

        answers = asyncio.run(burst())
    finally:
        generator.generate_replies = original
    assert all(a.status_code == 200 and a.json()["outputs"] for a in answers)
    assert sum(sizes) == 5 and len(sizes) < 5 and max(sizes) > 1


def test_use_reward_ranks_by_the_progress_model(client, progress_dir):
    from leanloop.ml.progress import ProgressScorer

    answer = client.post("/generate", json={"name": "tiny", "input": GOAL, "use_reward": True})
    assert answer.status_code == 200
    outputs = answer.json()["outputs"]
    expected = ProgressScorer(progress_dir).predict_batch(
        [(GOAL, None, o["output"]) for o in outputs]
    )
    for output, steps in zip(outputs, expected, strict=True):
        assert output["steps_remaining"] == pytest.approx(steps, abs=1e-4)
        assert output["reward"] == pytest.approx(-steps, abs=1e-4)
        assert output["score"] == output["reward"]
        assert 0 < output["model_score"] <= 1
    assert [o["score"] for o in outputs] == sorted((o["score"] for o in outputs), reverse=True)
    assert client.get("/models").json()["progress_model"]["loaded"] is True


def test_encode_gives_the_retrievers_embedding(client, tiny_encoder):
    from leanloop.retrieval.model import PremiseRetriever

    answer = client.post("/encode", json={"name": "retriever", "input": GOAL})
    assert answer.status_code == 200
    vector = answer.json()["outputs"]
    expected = PremiseRetriever.load(tiny_encoder, freeze=True).encode_states([GOAL])[0].tolist()
    assert vector == pytest.approx(expected, abs=1e-5)
    assert math.fsum(v * v for v in vector) == pytest.approx(1.0, abs=1e-4)


@pytest.mark.parametrize(
    ("path", "body", "status", "detail"),
    [
        ("/generate", {"name": "nope", "input": GOAL}, 404, "unknown model 'nope'"),
        ("/encode", {"name": "nope", "input": GOAL}, 404, "known models: broken, held"),
        ("/generate", {"name": "tiny"}, 422, "field 'input': Field required"),
        ("/generate", {"name": "tiny", "input": 3}, 422, "field 'input'"),
        ("/generate", {"name": "tiny", "input": "x", "num_samples": 0}, 422, "num_samples"),
        ("/generate", {"name": "tiny", "input": "x", "num_samples": 65}, 422, "num_samples"),
        ("/encode", {"name": "tiny", "input": GOAL}, 400, "model 'tiny' is not an encoder"),
        ("/generate", {"name": "retriever", "input": GOAL}, 400, "is not a generator"),
        ("/generate", {"name": "tiny", "input": "x" * 5000}, 413, "larger than 4096 bytes"),
    ],
)
def test_bad_requests(client, path, body, status, detail):
    answer = client.post(path, json=body)
    assert answer.status_code == status
    text = answer.text
    assert detail in text
    assert "Traceback" not in text


def test_a_body_larger_than_declared_is_a_413(server):
    """A chunked body declares no length: it is stopped when it passes the limit."""

    def chunks():
        yield b'{"name": "tiny", "input": "'
        for _ in range(10):
            yield b"x" * 1000
        yield b'"}'

    answer = httpx.post(
        f"{server[1]}/generate", content=chunks(), headers={"content-type": "application/json"}
    )
    assert answer.status_code == 413
    assert answer.json() == {"detail": "Content Too Large"}


def test_malformed_json_is_a_422(client):
    answer = client.post(
        "/generate", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert answer.status_code == 422
    assert answer.json()["detail"] == "the body is not valid JSON"


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/generate", b'{"name": "tiny", "input": "\\ud800"}', "input"),
        ("/generate", b'{"name": "tiny", "input": "x", "prefix": "\\udfff"}', "prefix"),
        (
            "/v1/chat/completions",
            b'{"model": "tiny", "messages": [{"role": "user", "content": "\\ud83d"}]}',
            "messages.0.content",
        ),
    ],
)
def test_text_that_is_not_unicode_is_a_422(client, path, body, field):
    """JSON can carry an unpaired surrogate; the models cannot read it."""
    answer = client.post(path, content=body, headers={"content-type": "application/json"})
    assert answer.status_code == 422
    assert f"field '{field}': the text holds an unpaired surrogate" in answer.text


def test_use_reward_without_a_progress_model_is_a_400(tiny_dir, monkeypatch):
    monkeypatch.delenv("LEANPROGRESS_MODEL", raising=False)
    config = ServeConfig.from_dict(
        {"models": [{"name": "t", "provider": "hf", "model": str(tiny_dir)}]}
    )
    with live_server(create_app(config)) as url:
        answer = httpx.post(
            f"{url}/generate", json={"name": "t", "input": GOAL, "use_reward": True}
        )
    assert answer.status_code == 400
    assert "use_reward needs a progress model" in answer.json()["detail"]
    assert "LEANPROGRESS_MODEL" in answer.json()["detail"]


def test_a_model_that_does_not_load_is_a_503(tmp_path):
    """A directory that is there but holds no model passes the start's check and fails its
    load (a path that is not there stops the start: tests/test_serve_startup.py)."""
    empty = tmp_path / "empty"
    empty.mkdir()
    config = ServeConfig.from_dict(
        {"models": [{"name": "t", "provider": "hf", "model": str(empty)}]}
    )
    with live_server(create_app(config)) as url:
        answer = httpx.post(f"{url}/generate", json={"name": "t", "input": GOAL})
        status = httpx.get(f"{url}/models").json()["models"][0]
    assert answer.status_code == 503
    assert (
        f"model 't' could not be loaded: model path {empty} holds no model"
        in (answer.json()["detail"])
    )
    assert status["loaded"] is False and "holds no model" in status["error"]


def test_overload_is_429_then_503_never_a_long_wait(server, held):
    url = server[1]

    async def crowd():
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            body = {"name": "held", "input": GOAL}
            first = asyncio.create_task(http.post("/generate", json=body))
            await asyncio.sleep(0.1)
            second = asyncio.create_task(http.post("/generate", json=body))
            await asyncio.sleep(0.1)
            started = time.monotonic()
            third = await http.post("/generate", json=body)  # the queue (2) is full
            refused_in = time.monotonic() - started
            waited = await second  # no turn within max_wait (0.5 s)
            held.release.set()
            return await first, waited, third, refused_in

    held.release.clear()
    try:
        first, waited, third, refused_in = asyncio.run(crowd())
    finally:
        held.release.set()
    assert third.status_code == 429 and refused_in < 0.5
    assert third.headers["retry-after"] == "1"
    assert "model 'held' is busy" in third.json()["detail"]
    assert waited.status_code == 503 and "no turn within 0.5 s" in waited.json()["detail"]
    assert waited.headers["retry-after"] == "1"
    assert first.status_code == 200 and first.json()["outputs"][0]["score"] == 0.5


def test_an_unexpected_failure_is_a_500_without_traceback(client, caplog):
    with caplog.at_level(logging.ERROR, logger="leanloop.serve"):
        answer = client.post("/generate", json={"name": "broken", "input": GOAL})
    assert answer.status_code == 500
    rid = answer.headers["x-request-id"]
    assert answer.json() == {
        "detail": f"internal error (request {rid}); the server log has the details"
    }
    assert "secret internal detail" not in answer.text
    assert any(rid in r.getMessage() and r.exc_info for r in caplog.records)


def test_request_id_is_kept_when_given(client):
    answer = client.get("/health", headers={"x-request-id": "client-42"})
    assert answer.headers["x-request-id"] == "client-42"
    answer = client.get("/health", headers={"x-request-id": "bad id\twith spaces"})
    assert answer.headers["x-request-id"] != "bad id\twith spaces"


def test_api_key_and_cors(monkeypatch, tiny_dir):
    key = "sk-test-0123456789"
    monkeypatch.setenv("LEANLOOP_TEST_SERVER_KEY", key)
    config = ServeConfig.from_dict(
        {
            "models": [{"name": "tiny", "provider": "hf", "model": str(tiny_dir)}],
            "api_key_env": "LEANLOOP_TEST_SERVER_KEY",
            "cors_origins": ["http://allowed.example"],
        }
    )
    with live_server(create_app(config)) as url, httpx.Client(base_url=url) as http:
        assert http.get("/health").status_code == 200  # open
        assert http.get("/").status_code == 200  # the page asks for the key itself
        missing = http.get("/models")
        assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
        wrong = http.get("/models", headers={"Authorization": "Bearer sk-test-0123456780"})
        assert wrong.status_code == 401 and key not in wrong.text
        assert http.get("/models", headers={"Authorization": f"Bearer {key}"}).is_success
        assert http.get("/models", headers={"Authorization": key}).is_success
        assert http.get("/models", headers={"X-API-Key": key}).is_success
        v1 = http.get("/v1/models")
        assert v1.status_code == 401 and v1.json()["error"]["code"] == 401
        preflight = http.options(
            "/generate",
            headers={
                "Origin": "http://allowed.example",
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization,content-type",
            },
        )
        assert preflight.status_code == 200
        assert preflight.headers["access-control-allow-origin"] == "http://allowed.example"
        other = http.get(
            "/health", headers={"Origin": "http://other.example", "Authorization": key}
        )
        assert "access-control-allow-origin" not in other.headers


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_shutdown_finishes_the_request_in_flight(tmp_path):
    """``leanloop serve`` gets SIGTERM while a request waits for a slow upstream model: the
    request still gets its answer, then the process ends and the port is closed."""
    upstream = FakeUpstream("openai", mode="slow", delay=1.5)
    port = _free_port()
    path = tmp_path / "models.yaml"
    path.write_text(
        f"models:\n  - {{name: gpt, provider: openai, model: m, base_url: '{upstream.url}/v1'}}\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    process = subprocess.Popen(
        [sys.executable, "-m", "leanloop", "serve", "--config", str(path), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"
    try:

        def up() -> bool:
            try:
                return httpx.get(f"{url}/health").is_success
            except httpx.TransportError:
                return False

        wait_until(up, timeout=60)
        result = {}

        def ask():
            result["answer"] = httpx.post(
                f"{url}/generate", json={"name": "gpt", "input": GOAL}, timeout=30
            )

        asker = threading.Thread(target=ask)
        asker.start()
        wait_until(lambda: len(upstream.requests) == 1)
        process.send_signal(signal.SIGTERM)
        asker.join(timeout=30)
        code = process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
        upstream.close()
    answer = result["answer"]
    assert answer.status_code == 200
    assert [o["output"] for o in answer.json()["outputs"]] == ["simp", "omega", "rfl"]
    assert code in (0, -signal.SIGTERM)
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{url}/health")
