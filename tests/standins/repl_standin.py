"""A stand-in process that speaks the Lean REPL's framing (JSON + blank line each way).

It exists to test process handling only: its answers echo the request and are not Lean output;
nothing a test learns from it is a proof result. The request decides what it does:
{"cmd": "sleep"} hangs, {"cmd": "die"} exits with status 3, {"cmd": "garbage"} prints non-JSON,
{"cmd": "grow", "mb": N} holds N more MB before answering, {"cmd": "hangup"} closes its output.
Every answer carries "instance", a token of this process (its pid is 2 in a sandbox).
"""

import json
import os
import sys
import time

INSTANCE = os.urandom(8).hex()
held = []
count = 0
buffer = []
for line in sys.stdin:
    if line.strip():
        buffer.append(line)
        continue
    if not buffer:
        continue
    request = json.loads("".join(buffer))
    buffer = []
    count += 1
    action = request.get("cmd")
    if action == "sleep":
        time.sleep(3600)
    elif action == "die":
        sys.stderr.write("stand-in: dying on request\n")
        sys.stderr.flush()
        sys.exit(3)
    elif action == "garbage":
        sys.stdout.write("this is not json\n\n")
        sys.stdout.flush()
        continue
    elif action == "grow":
        held.append(bytearray(int(request.get("mb", 300)) * 1024 * 1024))
        for block in held:
            for i in range(0, len(block), 4096):
                block[i] = 1
        time.sleep(float(request.get("hold", 5)))
    elif action == "hangup":
        os.close(sys.stdout.fileno())
        time.sleep(3600)
    answer = {"echo": request, "pid": os.getpid(), "instance": INSTANCE, "count": count}
    # multi-line answers, as the REPL prints them
    sys.stdout.write(json.dumps(answer, indent=1) + "\n\n")
    sys.stdout.flush()
