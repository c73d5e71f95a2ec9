"""A stand-in for ``lake env PROGRAM ARGS...``: starts PROGRAM with a Lake-like environment.

It exists to test process handling only. It sets LEAN_PATH to $LAKE_STANDIN_LEAN_PATH (a
directory a test chooses) and LAKE_STANDIN=1, appends one line to $LAKE_STANDIN_LOG (when set)
for each run, and replaces itself with PROGRAM. Other subcommands exit with status 2.
"""

import json
import os
import sys

if len(sys.argv) < 3 or sys.argv[1] != "env":
    sys.stderr.write(f"lake stand-in: only 'env PROGRAM...' is known, not {sys.argv[1:]}\n")
    sys.exit(2)
log = os.environ.get("LAKE_STANDIN_LOG")
if log:
    with open(log, "a") as handle:
        handle.write(json.dumps(sys.argv[1:]) + "\n")
environment = dict(os.environ)
environment["LEAN_PATH"] = os.environ.get("LAKE_STANDIN_LEAN_PATH", "")
environment["LAKE_STANDIN"] = "1"
os.execvpe(sys.argv[2], sys.argv[2:], environment)
