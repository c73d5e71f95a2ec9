"""A stand-in process that speaks Pantograph's framing ('ready.', then one line per command).

It exists to test process handling only: its answers echo the command and are not Lean output;
nothing a test learns from it is a proof result. Flags: --never-ready (prints nothing),
--chatter (prints lines that are not 'ready.' and never becomes ready), --slow-ready SECONDS.
Commands: 'sleep' hangs, 'die' exits with status 5, 'garbage' prints a non-JSON line. Every
answer carries the arguments the process was started with ("args": the modules to import).
"""

import json
import os
import sys
import time

args = sys.argv[1:]
if "--never-ready" in args:
    time.sleep(3600)
if "--chatter" in args:
    for i in range(100):
        print(f"warming up {i}", flush=True)
    time.sleep(3600)
if "--slow-ready" in args:
    time.sleep(float(args[args.index("--slow-ready") + 1]))
print("ready.", flush=True)
count = 0
for line in sys.stdin:
    if not line.strip():
        continue
    command, _, payload = line.strip().partition(" ")
    count += 1
    if command == "sleep":
        time.sleep(3600)
    elif command == "die":
        sys.exit(5)
    elif command == "garbage":
        print("<<not json>>", flush=True)
        continue
    answer = {
        "echo": command,
        "payload": json.loads(payload or "{}"),
        "pid": os.getpid(),
        "count": count,
        "args": args,
    }
    print(json.dumps(answer), flush=True)
