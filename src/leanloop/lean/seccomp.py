"""The seccomp program of the Lean sandbox (``leanloop.lean.sandbox``): no new processes.

A classic BPF program, as bwrap's ``--seccomp FD`` reads it. It refuses ``fork``, ``vfork`` and
``clone`` without ``CLONE_THREAD`` (``EPERM``), answers ``clone3`` with ``ENOSYS`` so that the C
library falls back to ``clone`` (threads keep working: Lean runs a thread pool), refuses
``ptrace`` and ``process_vm_writev``, and kills a process that makes system calls of another
architecture (32-bit calls on x86-64) or x32 calls. It is written here
because the Python bindings of libseccomp are not on PyPI (only in distributions) and the
ctypes wrapper that is (``pyseccomp``) has not been released since 2021; the program is short,
and the tests run it.
"""

from __future__ import annotations

import platform
import struct
import sys
from typing import Any

from leanloop.lean.errors import SandboxUnavailable

_LD_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET = 0x06  # BPF_RET | BPF_K
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
_KILL_PROCESS = 0x80000000
_EPERM, _ENOSYS = 1, 38
_CLONE_THREAD = 0x00010000
_X32_SYSCALL_BIT = 0x40000000

#: Per machine: the audit architecture, the system calls refused and whether x32 calls exist.
_ARCHES: dict[str, tuple[int, dict[str, int], bool]] = {
    "x86_64": (
        0xC000003E,
        {"clone": 56, "fork": 57, "vfork": 58, "ptrace": 101, "process_vm_writev": 311},
        True,
    ),
    "aarch64": (0xC00000B7, {"clone": 220, "ptrace": 117, "process_vm_writev": 271}, False),
}
_CLONE3 = 435  # the same number on every architecture


def seccomp_filter(machine: str | None = None) -> bytes:
    """The seccomp program that forbids new processes, as bwrap's ``--seccomp`` reads it.

    Args:
        machine: ``platform.machine()`` of the target (default: this machine's).

    Returns:
        The classic BPF program (``struct sock_filter`` entries, native byte order).

    Raises:
        SandboxUnavailable: No program is written for this machine.
    """
    machine = machine or platform.machine()
    if machine not in _ARCHES:
        raise SandboxUnavailable(
            f"the sandbox's process filter is not written for {machine} machines",
            hint="set LEANLOOP_SANDBOX_SUBPROCESSES=on (sandbox without the filter) or "
            "LEANLOOP_SANDBOX=off",
        )
    arch, numbers, x32 = _ARCHES[machine]
    # each entry: a label, or (code, jump if true, jump if false, k) with labels as targets
    program: list[Any] = [
        (_LD_ABS, None, None, 4),  # seccomp_data.arch
        (_JEQ, None, "kill", arch),
        (_LD_ABS, None, None, 0),  # seccomp_data.nr
    ]
    if x32:
        program.append((_JGE, "kill", None, _X32_SYSCALL_BIT))
    program += [(_JEQ, "enosys", None, _CLONE3), (_JEQ, "clone", None, numbers["clone"])]
    program += [(_JEQ, "eperm", None, nr) for name, nr in numbers.items() if name != "clone"]
    program += [
        (_RET, None, None, _ALLOW),
        "clone",
        (_LD_ABS, None, None, 16 if sys.byteorder == "little" else 20),  # args[0], low word
        (_JSET, "allow", "eperm", _CLONE_THREAD),
        "allow",
        (_RET, None, None, _ALLOW),
        "eperm",
        (_RET, None, None, _ERRNO | _EPERM),
        "enosys",
        (_RET, None, None, _ERRNO | _ENOSYS),
        "kill",
        (_RET, None, None, _KILL_PROCESS),
    ]
    labels: dict[str, int] = {}
    code: list[tuple[int, str | None, str | None, int]] = []
    for item in program:
        if isinstance(item, str):
            labels[item] = len(code)
        else:
            code.append(item)
    out = bytearray()
    for index, (op, if_true, if_false, k) in enumerate(code):
        jumps = [0 if t is None else labels[t] - index - 1 for t in (if_true, if_false)]
        out += struct.pack("=HBBI", op, *jumps, k)
    return bytes(out)
