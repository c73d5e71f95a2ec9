"""What the model server adds to a model's latency, under load.

A model with a fixed 20 ms latency (it awaits ``asyncio.sleep(0.02)``, as a remote provider's call
does) is served by the real server — ``create_app`` under uvicorn in its own process, the same
routes, validation, admission gate, middleware and JSON as in production — and 1, 10 and 50
clients (asyncio, in this process, each on its own keep-alive connection, writing the
HTTP/1.1 request and reading the answer's status and body itself, so that the clients' own CPU
stays small beside the server's) send ``POST /generate`` back to back for a few seconds each.
The baseline, measured in the same run, is the model alone: the same clients calling the model
directly, without HTTP. The overhead is the server's latency minus the model's, at p50 and
p99.

The CPU time the server process and the clients spend per request is printed beside the
latencies: on a machine where clients and server share the cores, the clients' CPU adds to the
latency the clients see.

Target: p99 overhead under 5 ms with 50 clients. Measured on the 2-core development machine,
quiet, with uvloop and httptools: 50 clients 1,829 requests/s, overhead p50 6.9 ms, p99 13.3 ms
(target missed); the bare app: p50 1.2 ms, p99 2.7 ms. The clients fall into step (one fixed
model latency), so a round's last request waits for the server's CPU time of the whole round:
0.16 ms per request for the server, 0.036 ms for the bare app. Last line:
``RESULT: p99_overhead_ms=... rps_50=... p50_overhead_ms=... rps_1=... rps_10=...
server_cpu_ms_per_request=... floor_p99_overhead_ms=... floor_p50_overhead_ms=...
floor_cpu_ms_per_request=...``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LATENCY = 0.020
CLIENTS = (1, 10, 50)
BODY = {"name": "fixed", "input": "n : ℕ\n⊢ n + 0 = n", "prefix": "", "num_samples": 8}


def fixed_latency_model():
    """The model: 20 ms per call, k tactics with fixed scores; admission as for any model."""
    from leanloop.ml.protocols import GeneratedTactic
    from leanloop.serve.admission import Gate
    from leanloop.serve.config import ModelConfig
    from leanloop.serve.providers.base import GeneratorBackend

    class FixedLatency(GeneratorBackend):
        async def generate(self, state, prefix, k):
            async with self.gate.slot():
                await asyncio.sleep(LATENCY)
            return [GeneratedTactic(f"simp [h{i}]", -0.1 * (i + 1)) for i in range(k)]

    config = ModelConfig(name="fixed", provider="openai", model="fixed")
    return FixedLatency(config, Gate("fixed", concurrency=1000, max_queue=1000, max_wait=30))


async def bare_app(scope, receive, send) -> None:
    """The floor: an ASGI app with no framework that awaits the same 20 ms and answers the same
    JSON, under the same uvicorn (what Python, uvicorn and the clients cost by themselves)."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    await asyncio.sleep(LATENCY)
    outputs = [{"output": f"simp [h{i}]", "score": 0.9} for i in range(BODY["num_samples"])]
    body = json.dumps({"outputs": outputs}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def serve(port: int, bare: bool = False) -> None:
    """The server process (the real server, or the bare floor app)."""
    import uvicorn

    from leanloop.serve import ServeConfig, create_app

    if bare:
        app = bare_app
    else:
        model = fixed_latency_model()
        config = ServeConfig.model_validate({"models": [model.config.model_dump()]})
        app = create_app(config, backends={"fixed": model})
    # connections stay open while the baseline is measured between client counts
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
        timeout_keep_alive=600,
    )


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def closed_loop(callers: list, seconds: float) -> tuple[list[float], float]:
    """Each caller calling back to back for ``seconds``: the latencies and requests/s."""
    latencies: list[float] = []
    stop = time.perf_counter() + seconds

    async def run(call, start: float):
        await asyncio.sleep(start)
        while time.perf_counter() < stop:
            started = time.perf_counter()
            await call()
            latencies.append(time.perf_counter() - started)

    # callers start at random phases of one model call, not in lockstep
    phases = random.Random(0)
    began = time.perf_counter()
    await asyncio.gather(*(run(call, phases.uniform(0, LATENCY)) for call in callers))
    return latencies, len(latencies) / (time.perf_counter() - began)


def cpu_seconds(process) -> float:
    times = process.cpu_times()
    return times.user + times.system


class Connection:
    """One client: a keep-alive HTTP/1.1 connection sending the same POST /generate."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        body = json.dumps(BODY).encode()
        self.request = (
            "POST /generate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode() + body

    @classmethod
    async def open(cls, port: int) -> Connection:
        return cls(*await asyncio.open_connection("127.0.0.1", port))

    async def __call__(self) -> None:
        self.writer.write(self.request)
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        length = int(head.lower().split(b"content-length:", 1)[1].split(b"\r\n", 1)[0])
        answer = await self.reader.readexactly(length)
        if status != 200:
            raise RuntimeError(f"the server answered {status}: {answer[:200]!r}")
        json.loads(answer)

    def close(self) -> None:
        self.writer.close()


async def measure(port: int, seconds: float, server_pid: int) -> dict[int, dict[str, float]]:
    import psutil

    server, me = psutil.Process(server_pid), psutil.Process()

    model = fixed_latency_model()
    clients = [await Connection.open(port) for _ in range(max(CLIENTS))]

    async def alone():
        await model.generate(BODY["input"], "", BODY["num_samples"])

    results: dict[int, dict[str, float]] = {}
    try:
        await closed_loop(clients, 1.0)  # warm up
        for count in CLIENTS:
            base, _ = await closed_loop([alone] * count, seconds)
            server_cpu, client_cpu = cpu_seconds(server), cpu_seconds(me)
            served, rps = await closed_loop(clients[:count], seconds)
            results[count] = {
                "server_cpu": (cpu_seconds(server) - server_cpu) / len(served) * 1000,
                "client_cpu": (cpu_seconds(me) - client_cpu) / len(served) * 1000,
                "rps": rps,
                "p50": percentile(served, 0.50) * 1000,
                "p99": percentile(served, 0.99) * 1000,
                "base_p50": percentile(base, 0.50) * 1000,
                "base_p99": percentile(base, 0.99) * 1000,
                "requests": len(served),
            }
    finally:
        for connection in clients:
            connection.close()
    return results


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_server(bare: bool, seconds: float) -> dict[int, dict[str, float]]:
    """Start the real server (or the bare floor app) in its own process and measure it."""
    port = free_port()
    paths = [str(REPO / "src"), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    argv = [sys.executable, __file__, "--serve", str(port), *(["--bare"] if bare else [])]
    server = subprocess.Popen(argv, env=env)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                raise SystemExit("the server did not start")
            time.sleep(0.1)
        return asyncio.run(measure(port, seconds, server.pid))
    finally:
        server.terminate()
        server.wait(timeout=30)


def print_table(title: str, results: dict[int, dict[str, float]]) -> None:
    print(title)
    print(
        "clients  requests  req/s  p50 ms  p99 ms  model p50  model p99  overhead p50    p99"
        "  CPU ms/request: server  client"
    )
    for clients, r in results.items():
        print(
            f"{clients:7d} {r['requests']:9d} {r['rps']:6.0f} {r['p50']:7.2f} {r['p99']:7.2f}"
            f" {r['base_p50']:10.2f} {r['base_p99']:10.2f} {r['p50'] - r['base_p50']:13.2f}"
            f" {r['p99'] - r['base_p99']:6.2f} {r['server_cpu']:23.3f} {r['client_cpu']:7.3f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="Seconds per client count.")
    parser.add_argument("--serve", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--bare", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.bare)
        return
    results = run_server(False, args.seconds)
    floor = run_server(True, args.seconds)
    print(f"model latency {LATENCY * 1000:.0f} ms; {args.seconds:g} s per client count")
    print_table("leanloop's server", results)
    print_table("the floor: a bare ASGI app under the same uvicorn", floor)
    top, bare = results[max(CLIENTS)], floor[max(CLIENTS)]
    overhead = top["p99"] - top["base_p99"]
    print(
        f"p99 overhead with {max(CLIENTS)} clients: {overhead:.2f} ms (target < 5 ms: "
        f"{'met' if overhead < 5 else 'NOT met'}); the bare app's: "
        f"{bare['p99'] - bare['base_p99']:.2f} ms"
    )
    print(
        f"RESULT: p99_overhead_ms={overhead:.2f} rps_50={top['rps']:.0f} "
        f"p50_overhead_ms={top['p50'] - top['base_p50']:.2f} "
        f"rps_1={results[1]['rps']:.0f} rps_10={results[10]['rps']:.0f} "
        f"server_cpu_ms_per_request={top['server_cpu']:.3f} "
        f"floor_p99_overhead_ms={bare['p99'] - bare['base_p99']:.2f} "
        f"floor_p50_overhead_ms={bare['p50'] - bare['base_p50']:.2f} "
        f"floor_cpu_ms_per_request={bare['server_cpu']:.3f}"
    )


if __name__ == "__main__":
    main()
