"""Checking code at scale: leanloop's REPL pool side by side with the Kimina Lean Server.

Both check the same snippets (miniF2F statements from $LEANLOOP_FIXTURES, each with a proof, all
under one header, ``import Mathlib`` and ``import Aesop``, so both reuse REPLs per header) through
``--repls`` processes of ONE stand-in REPL program, ``bench/support/standin_repl.py``: the REPL's
JSON protocol, its own answers (``{"env": n}``, never Lean output), ``--latency-ms`` per command and
``--import-s`` for the import header (each side sends it once per process). Both start it as Lean
servers are started, ``lake env <repl>`` in the project directory, with one stand-in ``lake``
script (``lake env PROG`` runs PROG): first on Kimina's ``PATH``, ``ReplLauncher(lake=...)`` for
leanloop.

- leanloop: ``PoolVerifier`` over ``ReplLauncher``-started REPLs (``max_servers=--repls``), checks
  issued from ``--repls`` threads, each taking the next snippet when its check returns.
- Kimina: ``kimina-ast-server`` 2.1.3 in its own venv, never a leanloop dependency
  (``build/bench-kimina-venv``, made on first run from ``bench/requirements-kimina.txt`` with a
  Python >= 3.12, which its client models need; FastAPI is pinned below 0.145, which refuses the
  ``logger=`` it passes). Started as a subprocess on 127.0.0.1 with
  ``LEAN_SERVER_MAX_REPLS=--repls``, log level WARNING, its default (dev) environment and no
  database; ``--kimina-clients`` threads send batches of ``--kimina-batch`` snippets to ``POST
  /api/check`` (or ``/verify``), so that more snippets wait than there are REPLs. Its server
  imports a Prisma client at start even without a database; generating that client needs
  Prisma's CLI (from npm, cached in ~/.cache/prisma-python) and engine binaries from
  binaries.prisma.sh (not reachable here), so it is generated once with placeholder engines that
  only a database connection would run. Its prod environment logs to Google Cloud and looks for
  Google credentials, which this benchmark does not do. In the dev environment it echoes every
  command it sends to a REPL to stdout as syntax-highlighted text (rich), whatever the log level;
  a second run, "echo off", starts the same server with that echo off
  (``server.repl.console = None``), to show what is left without it. RESULT and the targets are
  Kimina as shipped; the targets are printed against both.
- The baseline, measured in the same run: the bare pipes, ``--repls`` threads each writing the
  same commands to its own stand-in process and reading the answers (what any client must pay).

Per-check overhead = wall time x REPLs / checks - the stand-in's latency - its imports' time x
REPLs / checks (each REPL must import once; what is left is the framework's). The stand-in counts
the commands it gets: Kimina sends a health check (``#eval 1``) before each check on a reused
REPL, so two commands a check, each paying the latency; its overhead includes them and is also
printed without them. CPU time per check: the benchmark process for leanloop (it is leanloop),
the server process plus its clients for Kimina.

Targets: leanloop's throughput at least 1.0x Kimina's, and its overhead per check below Kimina's.
If Kimina cannot be installed or started, one line says why and leanloop's figures are still
printed. Measured on the 2-core development machine (defaults): leanloop 167.5 checks/s,
overhead 1.9 ms a check, 0.43 ms CPU (bare pipes 169.8/s, 1.6 ms); Kimina 70.5/s, 34.8 ms, 8.9 ms
CPU (14.8 ms without its health checks), echo off 85.1/s, 25.0 ms, 2.0 ms CPU; ratio 2.38x (1.97x
against echo off): both targets met. Across runs Kimina varied from 57 to 70 checks/s, leanloop
from 162 to 168. Last line: ``RESULT: leanloop_checks_per_s=... kimina_checks_per_s=...
ratio=... leanloop_overhead_ms=... kimina_overhead_ms=...``.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import math
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STANDIN = Path(__file__).parent / "support" / "standin_repl.py"
REQUIREMENTS = Path(__file__).with_name("requirements-kimina.txt")
KIMINA_VENV = REPO / "build" / "bench-kimina-venv"
KIMINA_VERSION = "2.1.3"
SCRIPT = "kimina-ast-server"
# Kimina's server as its console script starts it, with the echo of each command it sends to a
# REPL (rich Syntax rendering to stdout in its dev environment, whatever the log level) off
QUIET_START = (
    "import server.repl; server.repl.console = None\nfrom server.__main__ import main\nmain()"
)
PROOFS = ("norm_num", "linarith", "nlinarith [sq_nonneg (x - 1)]", "simp", "omega", "decide")


def fixtures() -> Path:
    return Path(os.environ.get("LEANLOOP_FIXTURES") or REPO.parent / "shared" / "fixtures")


def make_snippets(count: int) -> tuple[list[str], str]:
    """``count`` distinct whole files under one header, and where they come from."""
    source = fixtures() / "minif2f" / "minif2f.jsonl"
    try:
        rows = [json.loads(line) for line in source.read_text().splitlines() if line.strip()]
    except OSError:
        rows = []
    codes = []
    for i in range(count):
        proof = f"  {PROOFS[i % len(PROOFS)]}  -- attempt {i}"
        if rows:
            row = rows[i % len(rows)]
            code = row["header"] + row["informal_prefix"] + row["formal_statement"] + proof
        else:
            code = "import Mathlib\nimport Aesop\n\n"
            code += f"theorem t{i} (x : ℕ) : x + {i} = {i} + x := by\n{proof}"
        codes.append(code)
    what = f"{len(rows)} miniF2F statements" if rows else "generated statements (no fixtures)"
    return codes, what


# -- the stand-in's setting: lake, the REPL program, the project ---------------------------------


class Setting:
    """A temporary directory with a stand-in ``lake`` (``bin/lake``: ``lake env PROG`` runs
    PROG), a project directory and one REPL wrapper per side, each counting into its own
    directory."""

    def __init__(self, root: Path, latency_ms: float, import_s: float) -> None:
        self.root = root
        self.bin = root / "bin"
        self.project = root / "project"
        self.bin.mkdir()
        self.project.mkdir()
        self.lake = self.bin / "lake"
        self.lake.write_text('#!/bin/sh\n[ "$1" = env ] && shift\nexec "$@"\n')
        self.lake.chmod(0o755)
        self.latency_ms, self.import_s = latency_ms, import_s

    def repl(self, side: str) -> Path:
        stats = self.root / f"stats-{side}"
        stats.mkdir()
        wrapper = self.root / f"repl-{side}"
        wrapper.write_text(
            f"#!/bin/sh\nexec {sys.executable} {STANDIN} --latency-ms {self.latency_ms} "
            f'--import-s {self.import_s} --stats {stats} "$@"\n'
        )
        wrapper.chmod(0o755)
        return wrapper

    def counters(self, side: str) -> dict[str, float]:
        """What the stand-in processes of ``side`` counted: commands, imports, waited_s, pids."""
        total: dict[str, float] = {"commands": 0, "imports": 0, "waited_s": 0.0, "processes": 0}
        pids = []
        for path in (self.root / f"stats-{side}").glob("*.json"):
            with contextlib.suppress(OSError, ValueError):
                counts = json.loads(path.read_text())
                for key in ("commands", "imports", "waited_s"):
                    total[key] += counts[key]
                total["processes"] += 1
                pids.append(int(path.stem))
        total["pids"] = pids  # type: ignore[assignment]
        return total

    def stop_leftovers(self, side: str) -> None:
        """Stop stand-in processes of ``side`` still running (by the pids they wrote)."""
        for pid in self.counters(side)["pids"]:  # type: ignore[union-attr]
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


@dataclass
class Run:
    name: str
    checks: int = 0
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)
    counters: dict = field(default_factory=dict)
    cpu_s: float = 0.0
    note: str = ""

    @property
    def per_s(self) -> float:
        return self.checks / self.seconds if self.seconds else math.nan

    def overhead_ms(self, repls: int, latency_ms: float, import_s: float) -> float:
        if not self.checks:
            return math.nan
        return 1000 * (self.seconds - import_s) * repls / self.checks - latency_ms

    def commands_per_check(self) -> float:
        if not self.checks or not self.counters:
            return math.nan
        return (self.counters["commands"] - self.counters["imports"]) / self.checks


def cpu_seconds(process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def split(codes: list[str]) -> queue.Queue:
    work: queue.Queue = queue.Queue()
    for index in range(len(codes)):
        work.put(index)
    return work


# -- the floor: bare pipes -----------------------------------------------------------------------


def run_floor(setting: Setting, codes: list[str], repls: int) -> Run:
    """``repls`` threads, each with its own stand-in process: the header once, then the next
    body with the header's environment, written and read with nothing in between."""
    from leanloop.lean.repl import split_header

    repl = setting.repl("floor")
    parts = [split_header(code) for code in codes]
    work = split(codes)
    run = Run("floor: bare pipes")
    lock = threading.Lock()

    def exchange(process, request: dict) -> dict:
        process.stdin.write((json.dumps(request, ensure_ascii=False) + "\n\n").encode())
        process.stdin.flush()
        lines = []
        while True:
            line = process.stdout.readline()
            if not line:
                raise RuntimeError("the stand-in ended its output")
            if line.strip():
                lines.append(line)
            elif lines:
                return json.loads(b"".join(lines))

    def worker() -> None:
        process = subprocess.Popen(
            [str(setting.lake), "env", str(repl)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=setting.project,
        )
        try:
            env = None
            while True:
                try:
                    index = work.get_nowait()
                except queue.Empty:
                    return
                header, body, _ = parts[index]
                if env is None:
                    env = exchange(process, {"cmd": header})["env"]
                answer = exchange(process, {"cmd": body, "env": env})
                with lock:
                    run.checks += 1
                    if "env" not in answer:
                        run.failures.append(str(answer))
        finally:
            process.stdin.close()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    started = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(repls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    run.seconds = time.perf_counter() - started
    run.counters = setting.counters("floor")
    return run


# -- leanloop ------------------------------------------------------------------------------------


def run_leanloop(setting: Setting, codes: list[str], repls: int) -> Run:
    """``PoolVerifier`` over ``ReplLauncher``, checks from ``repls`` threads."""
    import psutil

    from leanloop.lean.launch import ReplLauncher
    from leanloop.lean.verification import PoolVerifier

    launcher = ReplLauncher(root=setting.project, repl=setting.repl("leanloop"), lake=setting.lake)
    verifier = PoolVerifier(launcher, max_servers=repls)
    work = split(codes)
    run = Run("leanloop PoolVerifier")
    lock = threading.Lock()

    def worker() -> None:
        while True:
            try:
                index = work.get_nowait()
            except queue.Empty:
                return
            verification = verifier.check(codes[index], timeout=60.0)
            with lock:
                run.checks += 1
                if verification.error is not None:
                    run.failures.append(verification.error)
                elif verification.result is None or not verification.result.accepted:
                    run.failures.append(f"not accepted: {verification.result}")

    me = psutil.Process()
    cpu = cpu_seconds(me)
    started = time.perf_counter()
    try:
        threads = [threading.Thread(target=worker) for _ in range(repls)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        run.seconds = time.perf_counter() - started
        run.cpu_s = cpu_seconds(me) - cpu
        stats = verifier.pool.stats
        run.note = f"pool: {stats.created} created, {stats.reused} reused, {stats.retired} retired"
    finally:
        verifier.close()
    run.counters = setting.counters("leanloop")
    setting.stop_leftovers("leanloop")
    return run


# -- Kimina --------------------------------------------------------------------------------------


class KiminaUnavailable(Exception):
    """Kimina cannot be installed or started here; the message says why, in one line."""


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(no output)"


def is_python312(python: str) -> bool:
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        done = subprocess.run(
            [python, "-c", "import sys; print(sys.version_info >= (3, 12))"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        return done.stdout.strip() == "True"
    return False


def find_python312() -> str | None:
    """A Python >= 3.12 that runs: on PATH, or under pyenv (whose shims may refuse to run a
    version that is not selected)."""
    candidates = [shutil.which(name) for name in ("python3.13", "python3.12")]
    versions = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    for pattern in ("3.13*", "3.12*"):
        for version in sorted(versions.glob(pattern), reverse=True):
            candidates += [str(version / "bin" / name) for name in ("python3.13", "python3.12")]
    for candidate in candidates:
        if candidate and Path(candidate).exists() and is_python312(candidate):
            return candidate
    return None


def step(argv: list[str], what: str, **kwargs) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, **kwargs)
    except (OSError, subprocess.SubprocessError) as exc:
        raise KiminaUnavailable(f"{what} failed: {exc}") from None
    if done.returncode != 0:
        output = "\n".join(
            line for line in (done.stdout + done.stderr).splitlines() if "is ignored" not in line
        )
        raise KiminaUnavailable(f"{what} failed: {last_line(output)}")
    return done.stdout


def ensure_kimina(venv: Path, python: str | None) -> Path:
    """The venv's Python with kimina-ast-server installed and its Prisma client generated
    (made on first run)."""
    interpreter = venv / "bin" / "python"
    if not (venv / "bin" / SCRIPT).exists():
        python = python or find_python312()
        why = "kimina-ast-client's models use typing.TypedDict, which pydantic refuses before 3.12"
        if python is None:
            raise KiminaUnavailable(
                f"no Python >= 3.12 was found ({why}); give one with --kimina-python"
            )
        if not is_python312(python):
            raise KiminaUnavailable(f"{python} does not run as Python >= 3.12 ({why})")
        print(f"kimina: installing kimina-ast-server {KIMINA_VERSION} into {venv} ({python})")
        step([python, "-m", "venv", str(venv)], "python -m venv")
        step(
            [str(interpreter), "-m", "pip", "install", "-q", "-r", str(REQUIREMENTS)],
            "pip install -r bench/requirements-kimina.txt",
        )
    try:
        step([str(interpreter), "-c", "from prisma import Prisma"], "import prisma")
    except KiminaUnavailable:
        generate_prisma_client(venv, interpreter)
    return interpreter


def generate_prisma_client(venv: Path, interpreter: Path) -> None:
    """Generate the Prisma client kimina's server imports at start. Prisma's CLI (from npm)
    wants its engines from binaries.prisma.sh; placeholders stand for them (only a database
    connection, which this benchmark never makes, would run them)."""
    print("kimina: generating its Prisma client (placeholder engines: no database is used)")
    version = step(
        [str(interpreter), "-c", "from prisma._config import config; "
         "print(config.expected_engine_version)"],
        "reading the Prisma engine version",
    ).strip()  # fmt: skip
    engines = venv / "placeholder-engines"
    engines.mkdir(exist_ok=True)
    for name, banner in (("query-engine", "query-engine"), ("schema-engine", "schema-engine-cli")):
        path = engines / name
        path.write_text(
            f'#!/bin/sh\necho "{banner} {version}"\necho "placeholder: no database" >&2\nexit 0\n'
        )
        path.chmod(0o755)
    schema = step(
        [str(interpreter), "-c", "import pathlib, server; "
         "print(pathlib.Path(server.__file__).parent / 'prisma' / 'schema.prisma')"],
        "locating kimina's Prisma schema",
    ).strip()  # fmt: skip
    env = dict(os.environ)
    env.update(
        PATH=f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        PRISMA_QUERY_ENGINE_BINARY=str(engines / "query-engine"),
        PRISMA_SCHEMA_ENGINE_BINARY=str(engines / "schema-engine"),
        PRISMA_ENGINES_CHECKSUM_IGNORE_MISSING="1",
        PRISMA_PY_GENERATE_SKIP_WARNING="1",
        CHECKPOINT_DISABLE="1",  # Prisma's CLI telemetry
    )
    step(
        [str(interpreter), "-m", "prisma", "generate", "--schema", schema],
        "prisma generate",
        env=env,
        timeout=600,
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_kimina(interpreter: Path, setting: Setting, repls: int, side: str, quiet: bool):
    """Kimina's server on 127.0.0.1, its REPLs the stand-in; ``(process, port)`` once
    ``/health`` answers. ``quiet``: started with its snippet echo off."""
    placeholder = setting.root / "ast-export"  # checked to exist at start; never run here
    placeholder.write_text("#!/bin/sh\nexit 1\n")
    placeholder.chmod(0o755)
    (setting.root / "ast_export").mkdir(exist_ok=True)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEAN_SERVER_")}
    env.update(
        PATH=f"{setting.bin}{os.pathsep}{os.environ.get('PATH', '')}",
        LEAN_SERVER_HOST="127.0.0.1",
        LEAN_SERVER_PORT=str(port),
        LEAN_SERVER_REPL_PATH=str(setting.repl(side)),
        LEAN_SERVER_PROJECT_DIR=str(setting.project),
        LEAN_SERVER_AST_EXPORT_BIN=str(placeholder),
        LEAN_SERVER_AST_EXPORT_PROJECT_DIR=str(setting.root / "ast_export"),
        LEAN_SERVER_MAX_REPLS=str(repls),
        LEAN_SERVER_LOG_LEVEL="WARNING",
        LEAN_SERVER_ENVIRONMENT="dev",
    )
    argv = [str(interpreter), "-c", QUIET_START] if quiet else [str(interpreter.parent / SCRIPT)]
    log = setting.root / f"{side}.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            argv, cwd=setting.root, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise KiminaUnavailable(
                f"the server exited with status {process.returncode} at start: "
                + last_line(log.read_text(errors="replace"))
            )
        with contextlib.suppress(OSError, http.client.HTTPException):
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            connection.request("GET", "/health")
            if connection.getresponse().status == 200:
                connection.close()
                return process, port
        time.sleep(0.2)
    stop(process)
    raise KiminaUnavailable("the server did not answer /health within 120 s")


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def run_kimina(
    setting: Setting, codes: list[str], args: argparse.Namespace, interpreter: Path, quiet: bool
) -> Run:
    """Kimina's throughput (``KiminaUnavailable`` if its server does not start)."""
    import psutil

    side = "kimina-quiet" if quiet else "kimina"
    process, port = start_kimina(interpreter, setting, args.repls, side, quiet)
    run = Run(f"Kimina {KIMINA_VERSION}" + (", echo off" if quiet else ""))
    path = "/api/check" if args.kimina_endpoint == "check" else "/verify"
    batches: queue.Queue = queue.Queue()
    for first in range(0, len(codes), args.kimina_batch):
        batches.put(range(first, min(first + args.kimina_batch, len(codes))))
    lock = threading.Lock()

    def body(indices: range) -> bytes:
        if path == "/api/check":
            snippets = [{"id": str(i), "code": codes[i]} for i in indices]
            return json.dumps({"snippets": snippets, "timeout": 60, "reuse": True}).encode()
        items = [{"custom_id": str(i), "proof": codes[i]} for i in indices]
        return json.dumps({"codes": items, "timeout": 60}).encode()

    def client() -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        try:
            while True:
                try:
                    indices = batches.get_nowait()
                except queue.Empty:
                    return
                connection.request(
                    "POST", path, body(indices), {"Content-Type": "application/json"}
                )
                answer = connection.getresponse()
                payload = answer.read()
                with lock:
                    if answer.status != 200:
                        run.failures.append(f"HTTP {answer.status}: {payload[:200]!r}")
                        continue
                    results = json.loads(payload)["results"]
                    run.checks += len(results)
                    for result in results:
                        response = result.get("response") or {}
                        if result.get("error") or "env" not in response:
                            run.failures.append(str(result)[:300])
        finally:
            connection.close()

    server, me = psutil.Process(process.pid), psutil.Process()
    try:
        cpu = cpu_seconds(server) + cpu_seconds(me)
        started = time.perf_counter()
        threads = [threading.Thread(target=client) for _ in range(args.kimina_clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        run.seconds = time.perf_counter() - started
        run.cpu_s = cpu_seconds(server) + cpu_seconds(me) - cpu
    finally:
        stop(process)
        time.sleep(0.5)  # its REPLs end when their input closes
        setting.stop_leftovers(side)
    run.counters = setting.counters(side)
    run.note = f"{args.kimina_clients} clients x {args.kimina_batch} snippets a POST {path}"
    if quiet:
        run.note += "; started with server.repl.console = None (its snippet echo off)"
    return run


# -- report --------------------------------------------------------------------------------------


def warm_up(setting: Setting) -> None:
    """Start and stop one stand-in process (the interpreter's files in the page cache)."""
    done = subprocess.run(
        [str(setting.lake), "env", sys.executable, str(STANDIN), "--latency-ms", "0"],
        input=b'{"cmd": "example : True := trivial"}\n\n',
        capture_output=True,
        cwd=setting.project,
        timeout=60,
    )
    if b'"env"' not in done.stdout:
        raise SystemExit(f"the stand-in REPL does not answer: {done.stderr.decode()[-300:]}")


def row(run: Run, repls: int, latency: float, import_s: float) -> str:
    cpu = f"{1000 * run.cpu_s / run.checks:.2f} ms" if run.cpu_s and run.checks else "-"
    return (
        f"{run.name:<24} {run.per_s:>9.1f} {run.seconds:>7.2f} "
        f"{run.overhead_ms(repls, latency, import_s):>7.2f} ms {run.commands_per_check():>10.2f} "
        f"{run.counters.get('imports', 0):>7} {cpu:>10} {len(run.failures):>6}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--snippets", type=int, default=1000)
    parser.add_argument("--repls", type=int, default=4, help="REPL processes on each side")
    parser.add_argument("--latency-ms", type=float, default=20.0, help="stand-in: per command")
    parser.add_argument("--import-s", type=float, default=0.5, help="stand-in: per import")
    parser.add_argument("--quick", action="store_true", help="200 snippets")
    parser.add_argument("--kimina-clients", type=int, default=8, help="concurrent HTTP clients")
    parser.add_argument("--kimina-batch", type=int, default=16, help="snippets per request")
    parser.add_argument("--kimina-endpoint", choices=("check", "verify"), default="check")
    parser.add_argument("--kimina-venv", type=Path, default=KIMINA_VENV)
    parser.add_argument("--kimina-python", help="a Python >= 3.12 to make the Kimina venv with")
    parser.add_argument(
        "--no-kimina-quiet", action="store_true", help="skip the run with Kimina's echo off"
    )
    parser.add_argument("--no-kimina", action="store_true", help="leanloop and the floor only")
    args = parser.parse_args()
    if args.quick:
        args.snippets = min(args.snippets, 200)

    codes, source = make_snippets(args.snippets)
    latency, import_s, repls = args.latency_ms, args.import_s, args.repls
    print(
        f"{len(codes)} snippets ({source}, one proof each, one header: import Mathlib, import "
        f"Aesop); {repls} stand-in REPL processes a side: {latency:g} ms a command, "
        f"{import_s:g} s an import (bench/support/standin_repl.py: its own answers, not Lean's)"
    )
    kimina_runs: list[Run] = []
    why = ""
    with tempfile.TemporaryDirectory(prefix="leanloop-bench-verify-") as tmp:
        setting = Setting(Path(tmp), latency, import_s)
        warm_up(setting)
        floor = run_floor(setting, codes, repls)
        leanloop = run_leanloop(setting, codes, repls)
        if args.no_kimina:
            why = "--no-kimina"
        else:
            try:
                interpreter = ensure_kimina(args.kimina_venv, args.kimina_python)
                kimina_runs.append(run_kimina(setting, codes, args, interpreter, quiet=False))
                if not args.no_kimina_quiet:
                    kimina_runs.append(run_kimina(setting, codes, args, interpreter, quiet=True))
            except (KiminaUnavailable, OSError, subprocess.SubprocessError) as exc:
                why = str(exc)

    runs = [floor, leanloop, *kimina_runs]
    print(
        f"{'':<24} {'checks/s':>9} {'wall s':>7} {'overhead':>10} {'cmds/check':>10} "
        f"{'imports':>7} {'cpu/check':>10} {'failed':>6}"
    )
    for run in runs:
        print(row(run, repls, latency, import_s))
    for run in runs:
        counted = run.counters
        waited = (counted["waited_s"] - counted["imports"] * import_s) / max(
            counted["commands"] - counted["imports"], 1
        )
        notes = [run.note] if run.note else []
        notes.append(f"the stand-in slept {1000 * waited:.2f} ms a command (imports aside)")
        print(f"  {run.name}: {'; '.join(notes)}")
        if run.failures:
            print(f"  {run.name}: {len(run.failures)} failed, first: {run.failures[0][:300]}")
    lean_rate, lean_over = leanloop.per_s, leanloop.overhead_ms(repls, latency, import_s)
    floor_over = floor.overhead_ms(repls, latency, import_s)
    print(
        f"leanloop vs the bare pipes: {lean_rate / floor.per_s:.3f}x their throughput, "
        f"{lean_over - floor_over:+.2f} ms a check beside theirs"
    )
    kimina_rate = kimina_over = ratio = math.nan
    if not kimina_runs:
        print(f"kimina: not measured — {why}")
    for kimina in kimina_runs:
        rate, over = kimina.per_s, kimina.overhead_ms(repls, latency, import_s)
        extra = kimina.commands_per_check() - 1
        print(
            f"{kimina.name}: {kimina.commands_per_check():.2f} commands a check (a health check, "
            f"#eval 1, before each check on a reused REPL); without the extra {extra:.2f} x "
            f"{latency:g} ms its overhead is {over - extra * latency:.2f} ms a check"
        )
        print(
            f"  target against {kimina.name}: leanloop ≥ 1.0x its throughput "
            f"({'met' if lean_rate >= rate else 'missed'}: {lean_rate / rate:.2f}x), "
            f"leanloop's overhead below its ({'met' if lean_over < over else 'missed'}: "
            f"{lean_over:.2f} ms vs {over:.2f} ms a check)"
        )
    if kimina_runs:
        kimina_rate = kimina_runs[0].per_s
        kimina_over = kimina_runs[0].overhead_ms(repls, latency, import_s)
        ratio = lean_rate / kimina_rate
    if why and kimina_runs:
        print(f"kimina: a later run was not measured — {why}")
    print(
        f"RESULT: leanloop_checks_per_s={lean_rate:.1f} kimina_checks_per_s={kimina_rate:.1f} "
        f"ratio={ratio:.2f} leanloop_overhead_ms={lean_over:.2f} "
        f"kimina_overhead_ms={kimina_over:.2f}"
    )
    failed = any(run.failures for run in runs)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
