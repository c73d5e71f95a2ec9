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
    body, ``malformed`` answers 200 with JSON of the wrong shape, ``garbage`` with non-JSON.
    A request for a stream (``stream: true``; Gemini's ``streamGenerateContent``) is answered
    with server-sent events in the provider's format: each reply in two pieces, and between
    the first pieces and the second a wait for ``after_first`` (set by default)."""

    wire: str  # "openai" | "anthropic" | "gemini"
    replies: list[str] = field(default_factory=lambda: ["simp", "omega", "simp", "rfl"])
    mode: str = "ok"
    delay: float = 0.0
    requests: list[Recorded] = field(default_factory=list)
    url: str = ""
    after_first: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        upstream = self
        self.turn = threading.Lock()
        self.after_first.set()

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
                if status == 200 and isinstance(payload, Streamed):
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("connection", "close")
                    self.end_headers()
                    self.close_connection = True
                    try:
                        for number, part in enumerate(payload.parts):
                            if number == payload.wait_after:
                                upstream.after_first.wait()
                            self.wfile.write(part)
                            self.wfile.flush()
                    except (BrokenPipeError, ConnectionResetError):
                        pass
                    return
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
        if (isinstance(body, dict) and body.get("stream")) or "streamGenerateContent" in path:
            return 200, getattr(self, f"_{self.wire}_stream")(path, body)
        return 200, getattr(self, f"_{self.wire}")(path, body)

    # -- streamed answers ------------------------------------------------------------------------

    def _openai_stream(self, path: str, body: Any) -> Streamed:
        texts = self._texts(int(body.get("n") or 1))
        chat = path.endswith("/chat/completions")
        head = {"id": "cmpl-test", "created": 1, "model": body.get("model")}
        head["object"] = "chat.completion.chunk" if chat else "text_completion"

        def event(index: int, text: str | None, finish: str | None = None) -> bytes:
            choice: dict[str, Any] = {"index": index, "finish_reason": finish, "logprobs": None}
            if chat:
                choice["delta"] = {} if text is None else {"content": text}
            else:
                choice["text"] = text or ""
            return sse({**head, "choices": [choice]})

        first = [event(i, halves(t)[0]) for i, t in enumerate(texts)]
        rest = [event(i, halves(t)[1]) for i, t in enumerate(texts)]
        rest += [event(i, None, "stop") for i in range(len(texts))]
        if (body.get("stream_options") or {}).get("include_usage"):
            usage = {"prompt_tokens": 10, "completion_tokens": 2 * len(texts)}
            usage["total_tokens"] = 10 + 2 * len(texts)
            rest.append(sse({**head, "choices": [], "usage": usage}))
        return Streamed([*first, *rest, b"data: [DONE]\n\n"], wait_after=len(first))

    def _anthropic_stream(self, path: str, body: Any) -> Streamed:
        (text,) = self._texts(1)
        message = {**self._anthropic(path, body), "content": [], "stop_reason": None}
        message["usage"] = {"input_tokens": 10, "output_tokens": 0}

        def event(kind: str, **fields: Any) -> bytes:
            data = json.dumps({"type": kind, **fields})
            return f"event: {kind}\ndata: {data}\n\n".encode()

        def delta(piece: str) -> bytes:
            return event(
                "content_block_delta", index=0, delta={"type": "text_delta", "text": piece}
            )

        first, second = halves(text)
        return Streamed(
            [
                event("message_start", message=message),
                event("content_block_start", index=0, content_block={"type": "text", "text": ""}),
                delta(first),
                delta(second),
                event("content_block_stop", index=0),
                event(
                    "message_delta",
                    delta={"stop_reason": "end_turn", "stop_sequence": None},
                    usage={"output_tokens": 2},
                ),
                event("message_stop"),
            ],
            wait_after=3,
        )

    def _gemini_stream(self, path: str, body: Any) -> Streamed:
        (text,) = self._texts(1)
        first, second = halves(text)

        def candidate(piece: str) -> dict[str, Any]:
            return {"content": {"role": "model", "parts": [{"text": piece}]}, "index": 0}

        usage = {"promptTokenCount": 10, "candidatesTokenCount": 2, "totalTokenCount": 12}
        tail = {"candidates": [{**candidate(second), "finishReason": "STOP"}]}
        return Streamed(
            [sse({"candidates": [candidate(first)]}), sse({**tail, "usageMetadata": usage})],
            wait_after=1,
        )

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
        if not path.endswith("/chat/completions"):  # a text completion
            for choice in choices:
                choice["text"] = choice.pop("message")["content"]
                choice["logprobs"] = None
        return {
            "id": "chatcmpl-test",
            "object": "chat.completion"
            if path.endswith("/chat/completions")
            else "text_completion",
            "created": 1,
            "model": body.get("model"),
            "choices": choices,
            "usage": {"prompt_tokens": 10, "completion_tokens": n, "total_tokens": 10 + n},
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


@dataclass
class Streamed:
    """A streamed answer: its events, sent in order, with a wait for ``after_first`` before
    event number ``wait_after``."""

    parts: list[bytes]
    wait_after: int


def sse(payload: Any) -> bytes:
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def halves(text: str) -> tuple[str, str]:
    middle = max(1, len(text) // 2)
    return text[:middle], text[middle:]


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
    tokens (words, each with its id in ``vocabulary``)."""

    def __init__(self) -> None:
        self.vocabulary: list[str] = ["<end>"]

    def apply_chat_template(self, messages: list[dict[str, str]], **_: Any) -> str:
        return messages[-1]["content"]

    def __call__(self, text: str, **_: Any) -> dict[str, list[int]]:
        return {"input_ids": [self.id(word) for word in text.split()]}

    def id(self, word: str) -> int:
        if word not in self.vocabulary:
            self.vocabulary.append(word)
        return self.vocabulary.index(word)

    def decode(self, ids: list[int], **_: Any) -> str:
        return " ".join(self.vocabulary[i] for i in ids if i)


class Tokens:
    """Token ids as transformers hands them to a streamer (what ``put`` reads of a tensor)."""

    def __init__(self, rows: list[list[int]]) -> None:
        self.rows = rows
        self.shape = (len(rows), len(rows[0]) if rows else 0)
        self.ndim = 2

    def reshape(self, *_: Any) -> Tokens:
        return Tokens([[value] for row in self.rows for value in row])

    def tolist(self) -> list[int]:
        return [value for row in self.rows for value in row]


class StandinModel:
    """A stand-in for ``TacticGenerator`` with a fixed latency: each batch takes ``latency``
    seconds on the model's thread, after waiting while ``hold`` is clear; prompt ``P`` gets the
    replies ``exact P_0``, ``exact P_1``, ... Records the prompts of every batch it started and
    counts the batches it finished."""

    def __init__(self, latency: float = 0.0) -> None:
        from leanloop.data.prompt import PromptFormat
        from leanloop.ml.generation import DecodingOptions

        self.latency = latency
        self.hold = threading.Event()
        self.hold.set()
        #: while clear, a streamed generation waits after its first token (set it to go on)
        self.after_first_token = threading.Event()
        self.after_first_token.set()
        #: set when a streamed generation ends; ``stream_failure`` is what stopped it, if any
        self.stream_ended = threading.Event()
        self.stream_failure: Exception | None = None
        self.batches: list[list[str]] = []
        self.finished = 0
        self.prompt_format = PromptFormat()
        self.tokenizer = StandinTokenizer()
        self.end_ids = [0]
        self.options = DecodingOptions()

    def prompt_text(self, state: str) -> str:
        return state

    def generate_replies(
        self, prompts: list[str], k: int = 8, **options: Any
    ) -> list[list[tuple[str, float]]]:
        counted = self.generate_counted(prompts, k, **options)
        return [[(text, score) for text, score, _ in found] for found in counted]

    def generate_counted(
        self, prompts: list[str], k: int = 8, *, streamer: Any = None, **_: Any
    ) -> list[list[tuple[str, float, int]]]:
        """Replies ``exact P_i`` (two words); a ``streamer`` gets each prompt's words, then the
        first word of every reply, waits for ``after_first_token``, then the second and the
        end."""
        self.batches.append(list(prompts))
        self.hold.wait()
        time.sleep(self.latency)
        replies = [[f"exact {prompt}_{i}" for i in range(k)] for prompt in prompts]
        if streamer is not None:
            try:
                flat = [text.split() for found in replies for text in found]
                streamer.put(Tokens([[1] for _ in flat]))
                for step in range(2):
                    streamer.put(Tokens([[self.tokenizer.id(words[step])] for words in flat]))
                    if step == 0:
                        self.after_first_token.wait()
                streamer.put(Tokens([[0] for _ in flat]))
                streamer.end()
            except Exception as exc:
                self.stream_failure = exc
                raise
            finally:
                self.stream_ended.set()
        self.finished += 1
        return [[(text, -0.1 * (i + 1), 3) for i, text in enumerate(found)] for found in replies]


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
