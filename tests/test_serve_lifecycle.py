"""The model server when clients leave, when its queue's wait limit runs out and when it stops, on
a real uvicorn server on loopback with stand-in models (the real local backend and batch worker
around a model whose batches wait until released; a remote-style model held at its gate): an
abandoned request leaves the queue and is never run, a waiting request gets its 503 when its
limit expires (not when the batch running ends), and on shutdown — in this process and as
SIGTERM to a uvicorn process — the queued requests get a JSON 503, the running ones finish within
the grace period or get a JSON 503, never a 500 or a traceback."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from leanloop.ml.protocols import GeneratedTactic
from leanloop.serve import ServeConfig, create_app
from leanloop.serve.admission import Gate
from leanloop.serve.providers.base import GeneratorBackend
from tests.serve_support import (
    StandinModel,
    live_server,
    open_request,
    standin_backend,
    wait_until,
)

REPO = Path(__file__).resolve().parents[1]
STOPPING = "the server is shutting down; retry later"


class HeldRemote(GeneratorBackend):
    """A remote-style model (one turn at its gate per call) whose calls wait until released."""

    def __init__(self, config, gate: Gate) -> None:
        super().__init__(config, gate)
        self.release = threading.Event()
        self.entered = 0

    async def generate(self, state, prefix, k):
        async with self.gate.slot():
            self.entered += 1
            while not self.release.is_set():
                await asyncio.sleep(0.01)
        return [GeneratedTactic(f"exact {state}", math.log(0.5))]


@contextlib.contextmanager
def served(
    model: StandinModel, *, batch_size: int = 1, **settings
) -> Iterator[tuple[Any, str, HeldRemote]]:
    """The server with ``local`` (the stand-in, ``batch_size`` per batch) and ``remote`` (held
    at a gate of one turn) on loopback; yields the app, its URL and the remote model, and
    releases both models before the server stops."""
    config = ServeConfig.from_dict(
        {
            "models": [
                {
                    "name": "local",
                    "provider": "hf",
                    "model": "stand-in",
                    "decoding": {"batch_size": batch_size},
                },
                {"name": "remote", "provider": "openai", "model": "m", "max_concurrency": 1},
            ],
            **settings,
        }
    )
    gate = Gate("remote", concurrency=1, max_queue=config.max_queue, max_wait=config.max_queue_wait)
    remote = HeldRemote(config.model("remote"), gate)
    backends = {"local": standin_backend(config, "local", model), "remote": remote}
    app = create_app(config, backends=backends)
    with live_server(app) as url:
        try:
            yield app, url, remote
        finally:
            model.hold.set()
            remote.release.set()


def ask(goal: str, name: str = "local") -> dict:
    return {"name": name, "input": goal, "num_samples": 2}


def queued(app, name: str = "local") -> int:
    return app.state.models.backend(name).gate.pending


async def until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.01)


def assert_refused(answer: httpx.Response, detail: str) -> None:
    assert answer.status_code == 503, answer.text
    assert answer.headers["content-type"] == "application/json"
    assert answer.json() == {"detail": detail}
    assert answer.headers["retry-after"] == "1"


@pytest.mark.parametrize("batch_size", [1, 4])
def test_abandoned_requests_leave_the_queue_and_are_never_run(batch_size, caplog):
    """Three /generate requests and a streaming chat whose clients leave while the model is
    busy are dropped at once: the queue is back to the one request running, and the next
    request is the next batch (with four per batch, the abandoned ones made a batch that is
    never started)."""
    model = StandinModel()
    model.hold.clear()
    chat = {"model": "local", "messages": [{"role": "user", "content": "e"}], "stream": True}

    async def scenario(app, url, remote):
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            first = asyncio.create_task(http.post("/generate", json=ask("a")))
            await until(lambda: model.batches == [["a"]])
            leaving = [open_request(url, "/generate", ask(goal)) for goal in "bcd"]
            leaving.append(open_request(url, "/v1/chat/completions", chat))
            await until(lambda: queued(app) == 5)
            for client in leaving:
                client.close()
            await until(lambda: queued(app) == 1)
            last = asyncio.create_task(http.post("/generate", json=ask("f")))
            await until(lambda: queued(app) == 2)
            model.hold.set()
            return await first, await last

    with (
        caplog.at_level(logging.INFO, logger="leanloop.serve"),
        served(model, batch_size=batch_size, max_queue_wait=60) as (app, url, _),
    ):
        first, last = asyncio.run(scenario(app, url, None))
        assert queued(app) == 0
    assert first.status_code == 200 and last.status_code == 200
    assert [o["output"] for o in last.json()["outputs"]] == ["exact f_0", "exact f_1"]
    assert model.batches == [["a"], ["f"]]
    gone = [r for r in caplog.records if "the client went away" in r.getMessage()]
    assert len(gone) == 4
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_a_client_that_leaves_a_remote_models_queue_is_never_run():

    async def scenario(app, url, remote):
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            first = asyncio.create_task(http.post("/generate", json=ask("a", "remote")))
            await until(lambda: remote.entered == 1)
            leaving = open_request(url, "/generate", ask("b", "remote"))
            await until(lambda: queued(app, "remote") == 2)
            leaving.close()
            await until(lambda: queued(app, "remote") == 1)
            last = asyncio.create_task(http.post("/generate", json=ask("c", "remote")))
            await until(lambda: queued(app, "remote") == 2)
            remote.release.set()
            return await first, await last

    with served(StandinModel(), max_queue_wait=60) as (app, url, remote):
        first, last = asyncio.run(scenario(app, url, remote))
    assert first.status_code == 200 and last.json()["outputs"][0]["output"] == "exact c"
    assert remote.entered == 2  # a and c: b never got its turn


@pytest.mark.parametrize("name", ["local", "remote"])
def test_the_wait_limit_runs_out_while_the_model_is_still_busy(name):
    """Thirty requests behind one the model holds each get 503 with Retry-After when their
    0.3 s run out — while the model still holds the first (not when its batch ends)."""
    model = StandinModel()
    model.hold.clear()

    async def scenario(app, url, remote):
        busy = (lambda: model.batches == [["a"]]) if name == "local" else (lambda: remote.entered)
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            first = asyncio.create_task(http.post("/generate", json=ask("a", name)))
            await until(busy)
            started = time.monotonic()

            async def waiting(i):
                answer = await http.post("/generate", json=ask(f"w{i}", name))
                return answer, time.monotonic() - started

            refused = await asyncio.gather(*(waiting(i) for i in range(30)))
            still_busy = model.finished == 0 and not remote.release.is_set()
            model.hold.set()
            remote.release.set()
            return await first, refused, still_busy

    with served(model, max_queue_wait=0.3) as (app, url, remote):
        first, refused, still_busy = asyncio.run(scenario(app, url, remote))
        assert queued(app, name) == 0
    assert still_busy
    assert first.status_code == 200
    for answer, waited in refused:
        assert_refused(answer, f"model '{name}' is busy: no turn within 0.3 s; retry later")
        assert waited >= 0.3
    assert model.batches in ([["a"]], [])


def test_stopping_refuses_the_queue_and_lets_the_running_finish(caplog):
    model = StandinModel()
    model.hold.clear()

    async def scenario(app, url, remote):
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            running = [asyncio.create_task(http.post("/generate", json=ask("a")))]
            running.append(asyncio.create_task(http.post("/generate", json=ask("r", "remote"))))
            await until(lambda: model.batches == [["a"]] and remote.entered == 1)
            waiting = [asyncio.create_task(http.post("/generate", json=ask(g))) for g in "bcd"]
            waiting.append(asyncio.create_task(http.post("/generate", json=ask("s", "remote"))))
            await until(lambda: queued(app) == 4 and queued(app, "remote") == 2)
            app.shutdown_soon()
            refused = await asyncio.gather(*waiting)
            async with httpx.AsyncClient(base_url=url, timeout=30) as fresh:
                late = await fresh.post("/generate", json=ask("e"))
                health = await fresh.get("/health")
            still_running = model.finished == 0 and not any(t.done() for t in running)
            model.hold.set()
            remote.release.set()
            return await asyncio.gather(*running), refused, late, health, still_running

    with (
        caplog.at_level(logging.INFO, logger="leanloop.serve"),
        served(model, shutdown_timeout=60) as (app, url, remote),
    ):
        finished, refused, late, health, still_running = asyncio.run(scenario(app, url, remote))
    assert still_running
    assert [a.status_code for a in finished] == [200, 200]
    assert finished[0].json()["outputs"][0]["output"] == "exact a_0"
    for answer in [*refused, late]:
        assert_refused(answer, STOPPING)
    assert late.headers["connection"] == "close"
    assert health.status_code == 503
    assert model.batches == [["a"]] and remote.entered == 1
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_requests_running_past_the_grace_period_get_a_503(caplog):
    model = StandinModel()
    model.hold.clear()

    async def scenario(app, url, remote):
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            running = [
                asyncio.create_task(http.post("/generate", json=ask("a"))),
                asyncio.create_task(http.post("/generate", json=ask("r", "remote"))),
            ]
            await until(lambda: model.batches == [["a"]] and remote.entered == 1)
            app.shutdown_soon()
            answers = await asyncio.gather(*running)
            held = model.finished == 0
            model.hold.set()
            return answers, held

    with (
        caplog.at_level(logging.INFO, logger="leanloop.serve"),
        served(model, shutdown_timeout=0.3) as (app, url, remote),
    ):
        answers, held = asyncio.run(scenario(app, url, remote))
    assert held  # the answers came at the end of the grace period, not the batch's
    for answer in answers:
        assert_refused(answer, STOPPING)
    stopped = [r for r in caplog.records if "before it finished; answered 503" in r.getMessage()]
    assert len(stopped) == 2
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_sigterm_answers_every_queued_request_and_exits_in_time(tmp_path):
    """``uvicorn`` serving the app (a stand-in local model whose batches of two take 1 s) gets
    SIGTERM with 20 requests queued: each client gets a 200 (the batch running) or a JSON 503,
    the process ends within the grace period, and its log has no traceback and no 500."""
    grace = 10.0
    path = tmp_path / "serve.yaml"
    path.write_text(
        "models:\n"
        "  - {name: local, provider: hf, model: stand-in, decoding: {batch_size: 2}}\n"
        f"shutdown_timeout: {grace}\n"
    )
    port = _free_port()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)]),
        "LEANLOOP_SERVE_CONFIG": str(path),
        "LEANLOOP_TEST_LATENCY": "1.0",
    }
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "uvicorn", "--factory", "tests.serve_support:standin_app"),
            *("--host", "127.0.0.1", "--port", str(port)),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
    )
    url = f"http://127.0.0.1:{port}"

    def status():
        try:
            return httpx.get(f"{url}/models").json()["models"][0]
        except httpx.TransportError:
            return None

    async def crowd():
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            asking = [
                asyncio.create_task(http.post("/generate", json=ask(f"g{i}"))) for i in range(20)
            ]
            await until(lambda: (status() or {}).get("queued") == 20, timeout=30)
            process.send_signal(signal.SIGTERM)
            signalled = time.monotonic()
            answers = await asyncio.gather(*asking)
            return answers, signalled

    try:
        wait_until(lambda: status() is not None, timeout=60)
        answers, signalled = asyncio.run(crowd())
        process.wait(timeout=grace + 30)
        exited = time.monotonic() - signalled
        _, stderr = process.communicate()
    finally:
        if process.poll() is None:
            process.kill()
    codes = [a.status_code for a in answers]
    assert set(codes) <= {200, 503}, codes
    assert 1 <= codes.count(200) <= 4 and codes.count(503) >= 16  # 200: the batch running
    for answer in answers:
        if answer.status_code == 503:
            assert_refused(answer, STOPPING)
    assert process.returncode in (0, -signal.SIGTERM)
    assert exited < grace
    assert "Traceback" not in stderr
    assert '" 500' not in stderr and "Exception" not in stderr
