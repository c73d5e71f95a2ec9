"""A stand-in for the Lean REPL that costs fixed times, for ``bench/verify.py``.

It speaks the REPL's framing (a JSON command and a blank line in, one JSON answer and a blank
line out) and nothing of Lean: every answer is this program's own object, never Lean output and
never a proof result. A command answers ``{"env": n}`` (a new environment number, as the REPL
numbers them) after ``--latency-ms``; a command that starts with ``import`` lines (the header,
which a client sends once per process and then continues from its environment) takes
``--import-s`` instead, each time it is sent. A command naming an environment this process never
gave answers ``{"message": "Unknown environment."}``; a tactic request answers a ``message``
saying tactics are not simulated.

With ``--stats DIR`` it overwrites ``DIR/<pid>.json`` in place after each answer (one ``pwrite``,
as clients stop REPLs with SIGKILL): the commands, the import commands among them and the seconds
it slept. Nothing is written to stderr (a client that never reads stderr must not block on it).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--latency-ms", type=float, default=20.0, help="cost of each command")
    parser.add_argument("--import-s", type=float, default=0.5, help="cost of an import header")
    parser.add_argument("--stats", default=None, help="directory for this process's counters")
    args = parser.parse_args()
    latency, import_cost = args.latency_ms / 1000, args.import_s
    stats = None
    if args.stats:
        path = os.path.join(args.stats, f"{os.getpid()}.json")
        stats = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)

    envs = 0
    commands = imports = 0
    waited = 0.0
    lines: list[str] = []
    stdin, stdout = sys.stdin, sys.stdout
    for line in stdin:
        if line.strip():
            lines.append(line)
            continue
        if not lines:
            continue
        request = json.loads("".join(lines))
        lines = []
        commands += 1
        if "cmd" in request or "path" in request:
            env = request.get("env")
            if env is not None and not (isinstance(env, int) and 0 <= env < envs):
                answer = {"message": "Unknown environment."}
                cost = latency
            else:
                text = request.get("cmd") or ""
                first = next((row for row in text.split("\n") if row.strip()), "")
                is_import = env is None and first.lstrip().startswith("import ")
                imports += is_import
                cost = import_cost if is_import else latency
                answer = {"env": envs}
                envs += 1
        else:
            answer = {"message": "the stand-in REPL does not simulate tactics"}
            cost = latency
        started = time.perf_counter()
        time.sleep(cost)
        waited += time.perf_counter() - started
        stdout.write(json.dumps(answer) + "\n\n")
        stdout.flush()
        if stats is not None:
            counters = {"commands": commands, "imports": imports, "waited_s": waited}
            os.pwrite(stats, json.dumps(counters).ljust(120).encode(), 0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
