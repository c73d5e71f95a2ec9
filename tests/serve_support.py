"""Test material for the model server: a real uvicorn server on loopback in a thread, a local HTTP
server that speaks a model provider's wire format (OpenAI chat completions, Anthropic messages,
Gemini generateContent) and can be slow, fail or answer garbage, a tiny progress model, and a
stand-in for a local model whose batches take a fixed time (or wait until released), served by
the real local backend and batch worker — in a test's thread or a uvicorn process."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def live_server(app: Any, **config: Any) -> Iterator[str]:
    """Run ``app`` under uvicorn on 127.0.0.1 (a free port); yields its base URL."""
    import uvicorn

    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", **config)
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class FakeUpstream:
    """A provider's HTTP API on loopback. ``mode``: ``ok`` answers with ``replies`` (cycled),
    ``slow`` waits ``delay`` seconds first, ``fail`` answers HTTP 500 with the provider's error
    body, ``malformed`` answers 200 with JSON of the wrong shape, ``garbage`` with non-JSON."""

    wire: str  # "openai" | "anthropic" | "gemini"
    replies: list[str] = field(default_factory=lambda: ["simp", "omega", "simp", "rfl"])
    mode: str = "ok"
    delay: float = 0.0
    requests: list[Recorded] = field(default_factory=list)
    url: str = ""

    def __post_init__(self) -> None:
        upstream = self
        self.turn = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode(errors="replace")
                headers = {k.lower(): v for k, v in self.headers.items()}
                # concurrent calls (one per Anthropic sample) each get the reply of their turn
                with upstream.turn:
                    upstream.requests.append(Recorded("POST", self.path, headers, body))
                    status, payload = upstream.answer(self.path, body)
                if upstream.mode == "slow":
                    time.sleep(upstream.delay)
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    self.send_header("x-should-retry", "true" if status >= 500 else "false")
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    # -- answers in each wire format -------------------------------------------------------------

    def answer(self, path: str, body: Any) -> tuple[int, Any]:
        if self.mode == "fail":
            return 500, self._error("the upstream model crashed")
        if self.mode == "garbage":
            return 200, b"<html>not json</html>"
        if self.mode == "malformed":
            return 200, {"unexpected": True}
        return 200, getattr(self, f"_{self.wire}")(path, body)

    def _texts(self, count: int) -> list[str]:
        start = len(self.requests) - 1
        return [self.replies[(start + i) % len(self.replies)] for i in range(count)]

    def _openai(self, path: str, body: Any) -> dict[str, Any]:
        n = int(body.get("n") or 1)
        choices = []
        for i, text in enumerate(self._texts(n)):
            tokens = [
                {"token": t, "logprob": -0.1 * (i + 1), "bytes": None, "top_logprobs": []}
                for t in text.split()
            ]
            choices.append(
                {
                    "index": i,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                    "logprobs": {"content": tokens} if body.get("logprobs") else None,
                }
            )
        return {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "created": 1,
            "model": body.get("model"),
            "choices": choices,
        }

    def _anthropic(self, path: str, body: Any) -> dict[str, Any]:
        (text,) = self._texts(1)
        return {
            "id": "msg_test",
            "type": "message",
            "role": "assistant",
            "model": body.get("model"),
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 2},
        }

    def _gemini(self, path: str, body: Any) -> dict[str, Any]:
        count = int((body.get("generationConfig") or {}).get("candidateCount") or 1)
        return {
            "candidates": [
                {
                    "content": {"role": "model", "parts": [{"text": text}]},
                    "finishReason": "STOP",
                    "index": i,
                }
                for i, text in enumerate(self._texts(count))
            ],
            "usageMetadata": {
                "promptTokenCount": 10,
                "candidatesTokenCount": 2,
                "totalTokenCount": 12,
            },
        }

    def _error(self, message: str) -> dict[str, Any]:
        if self.wire == "anthropic":
            return {"type": "error", "error": {"type": "api_error", "message": message}}
        if self.wire == "gemini":
            return {"error": {"code": 500, "message": message, "status": "INTERNAL"}}
        return {"error": {"message": message, "type": "server_error", "param": None, "code": None}}


def build_progress_model(directory: Path, encoder_dir: Path, *, mean: float = 3.0) -> Path:
    """A progress regressor in ProgressTrainer's format (randomly initialised head on the tiny
    encoder): what ``ProgressScorer`` loads."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from leanloop.ml.progress import MEAN_KEY, STD_KEY

    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(
        encoder_dir, num_labels=1, problem_type="regression"
    )
    setattr(model.config, MEAN_KEY, mean)
    setattr(model.config, STD_KEY, 2.0)
    model.save_pretrained(directory)
    AutoTokenizer.from_pretrained(encoder_dir).save_pretrained(directory)
    return directory


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.01)


class StandinTokenizer:
    """What the local backend asks of a tokenizer: the chat as text (its last message), and
    tokens (words)."""

    def apply_chat_template(self, messages: list[dict[str, str]], **_: Any) -> str:
        return messages[-1]["content"]

    def __call__(self, text: str, **_: Any) -> dict[str, list[str]]:
        return {"input_ids": text.split()}


class StandinModel:
    """A stand-in for ``TacticGenerator`` with a fixed latency: each batch takes ``latency``
    seconds on the model's thread, after waiting while ``hold`` is clear; prompt ``P`` gets the
    replies ``exact P_0``, ``exact P_1``, ... Records the prompts of every batch it started and
    counts the batches it finished."""

    def __init__(self, latency: float = 0.0) -> None:
        from leanloop.data.prompt import PromptFormat

        self.latency = latency
        self.hold = threading.Event()
        self.hold.set()
        self.batches: list[list[str]] = []
        self.finished = 0
        self.prompt_format = PromptFormat()
        self.tokenizer = StandinTokenizer()

    def prompt_text(self, state: str) -> str:
        return state

    def generate_replies(
        self, prompts: list[str], k: int = 8, **_: Any
    ) -> list[list[tuple[str, float]]]:
        self.batches.append(list(prompts))
        self.hold.wait()
        time.sleep(self.latency)
        self.finished += 1
        return [[(f"exact {prompt}_{i}", -0.1 * (i + 1)) for i in range(k)] for prompt in prompts]


def standin_backend(config: Any, name: str, model: StandinModel) -> Any:
    """The server's own local backend (batch worker, gate) for model ``name`` of ``config``,
    running ``model``."""
    from leanloop.serve.admission import Gate
    from leanloop.serve.providers.local import LocalGenerator

    class StandinGenerator(LocalGenerator):
        def _load_checkpoint(self) -> Any:
            return model

    entry = config.model(name)
    gate = Gate(
        name,
        concurrency=entry.max_concurrency,
        max_queue=config.max_queue,
        max_wait=config.max_queue_wait,
    )
    return StandinGenerator(entry, gate)


def standin_app() -> Any:
    """``uvicorn --factory tests.serve_support:standin_app``: the server of
    ``$LEANLOOP_SERVE_CONFIG`` with each ``hf`` model a stand-in whose batches take
    ``$LEANLOOP_TEST_LATENCY`` seconds."""
    from leanloop.serve import ServeConfig, create_app

    config = ServeConfig.load(os.environ["LEANLOOP_SERVE_CONFIG"])
    latency = float(os.environ.get("LEANLOOP_TEST_LATENCY", "0"))
    backends = {
        m.name: standin_backend(config, m.name, StandinModel(latency))
        for m in config.models
        if m.provider == "hf"
    }
    return create_app(config, backends=backends)


def open_request(url: str, path: str, body: Any) -> socket.socket:
    """A client that sends ``POST path`` with the JSON ``body`` and does not read the answer
    (close the socket to leave)."""
    host, port = url.removeprefix("http://").split(":")
    data = json.dumps(body).encode()
    client = socket.create_connection((host, int(port)))
    client.sendall(
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\n\r\n".encode()
        + data
    )
    return client


def lifespan_startup(app: Any) -> list[dict]:
    """The messages an ASGI ``app`` sends when asked to start (the lifespan protocol), as a
    server such as uvicorn asks it."""
    import asyncio

    sent: list[dict] = []

    async def lifespan() -> None:
        messages = iter([{"type": "lifespan.startup"}])

        async def receive() -> dict:
            return next(messages)

        async def send(message: dict) -> None:
            sent.append(message)

        await app({"type": "lifespan"}, receive, send)

    asyncio.run(lifespan())
    return sent
