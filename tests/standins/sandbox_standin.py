"""A stand-in process that tries to escape its sandbox when asked, speaking the Lean REPL's
framing (JSON + blank line each way), or Pantograph's with --pantograph.

It exists to test process handling only: its answers report what the process could do and are
not Lean output; nothing a test learns from it is a proof result.

{"cmd": "escape", "port": P, "unix": SOCKET?, "outside": [PATH...], "markers": DIR?} tries,
and reports each outcome as "done" or the error: a TCP connection to 127.0.0.1:P; a connection
to the Unix socket SOCKET; writing each PATH; starting a
process by subprocess, os.fork and os.posix_spawn (each started process would write a marker
file into DIR, default the temporary directory); running a thread; writing a file into the
temporary directory ($TMPDIR: in the sandbox, its scratch directory). {"cmd": "where"} reports
its environment, working directory, resource limits and what it can read of the paths in
"read". Any other
request is echoed. Every answer carries "instance", a token of this process.
"""

import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import threading

INSTANCE = os.urandom(8).hex()
MARKER = "import os, sys; open(os.path.join(sys.argv[1], sys.argv[2]), 'w').write('ran')"


def attempt(action):
    try:
        action()
    except Exception as exc:  # the outcome is the answer
        return f"{type(exc).__name__}: {exc}"
    return "done"


def connect(port):
    with socket.create_connection(("127.0.0.1", port), timeout=10):
        pass


def connect_unix(path):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(10)
        client.connect(path)


def write(path):
    with open(path, "w") as handle:
        handle.write("escaped")


def by_subprocess(markers):
    subprocess.run([sys.executable, "-c", MARKER, markers, "subprocess"], check=True)


def by_fork(markers):
    pid = os.fork()
    if pid == 0:  # the child
        try:
            write(os.path.join(markers, "fork"))
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def by_posix_spawn(markers):
    argv = [sys.executable, "-c", MARKER, markers, "posix_spawn"]
    pid = os.posix_spawn(sys.executable, argv, dict(os.environ))
    os.waitpid(pid, 0)


def in_thread():
    seen = []
    worker = threading.Thread(target=lambda: seen.append(threading.get_ident()))
    worker.start()
    worker.join()
    if not seen or seen[0] == threading.get_ident():
        raise RuntimeError("the thread did not run")


def escape(request):
    scratch_dir = tempfile.gettempdir()
    markers = request.get("markers") or scratch_dir
    scratch = os.path.join(scratch_dir, "inside.txt")
    return {
        "tcp": attempt(lambda: connect(request["port"])),
        "unix": attempt(lambda: connect_unix(request["unix"])) if "unix" in request else None,
        "outside": {path: attempt(lambda p=path: write(p)) for path in request["outside"]},
        "spawn": {
            "subprocess": attempt(lambda: by_subprocess(markers)),
            "fork": attempt(lambda: by_fork(markers)),
            "posix_spawn": attempt(lambda: by_posix_spawn(markers)),
        },
        "thread": attempt(in_thread),
        "scratch": attempt(lambda: write(scratch)),
        "scratch_dir": scratch_dir,
    }


def read(path):
    with open(path) as handle:
        handle.read()


def where(request):
    readable = {path: attempt(lambda p=path: read(p)) for path in request.get("read", [])}
    limits = {
        name: resource.getrlimit(getattr(resource, f"RLIMIT_{name}"))
        for name in ("CPU", "FSIZE", "NOFILE", "CORE", "AS")
    }
    return {"env": dict(os.environ), "cwd": os.getcwd(), "read": readable, "limits": limits}


def answer(request):
    action = request.get("cmd")
    if action == "escape":
        result = escape(request)
    elif action == "where":
        result = where(request)
    else:
        result = {"echo": request}
    result["instance"] = INSTANCE
    return result


def repl():
    buffer = []
    for line in sys.stdin:
        if line.strip():
            buffer.append(line)
            continue
        if buffer:
            request = json.loads("".join(buffer))
            buffer = []
            sys.stdout.write(json.dumps(answer(request), indent=1) + "\n\n")
            sys.stdout.flush()


def pantograph():
    print("ready.", flush=True)
    for line in sys.stdin:
        if line.strip():
            command, _, payload = line.strip().partition(" ")
            request = {**json.loads(payload or "{}"), "cmd": command}
            print(json.dumps(answer(request)), flush=True)


if __name__ == "__main__":
    pantograph() if "--pantograph" in sys.argv[1:] else repl()
