"""``leanloop train ... --nproc N``: the same command run as N training processes on this machine,
started by PyTorch's launcher (``torch.distributed.run``, what ``torchrun`` runs) with its
rendezvous on 127.0.0.1; a process that fails ends the run with one line naming its rank (the
launcher stops the others, so nothing waits for it)."""

from __future__ import annotations

import socket

import typer

import leanloop.cli.common as common
from leanloop.errors import LeanloopError
from leanloop.ml import distributed

NPROC_OPTION = typer.Option(
    None,
    "--nproc",
    min=1,
    metavar="N",
    help="Train as N processes on this machine (one per GPU, or CPU processes with gloo), "
    "started with torch.distributed.run; under torchrun or accelerate launch, leave it out.",
    show_default=False,
)


def relaunched(nproc: int | None) -> bool:
    """Whether this command was run as ``nproc`` processes (and is done): True after the
    processes ended well, False when this process is to train itself (one process asked, or
    already one of several)."""
    if nproc is None or nproc == 1 or distributed.current().distributed:
        return False
    run_as_processes(nproc, _without_nproc(common.invocation()))
    return True


def _without_nproc(argv: list[str]) -> list[str]:
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg == "--nproc":
            skip = True
            continue
        if arg.startswith("--nproc="):
            continue
        out.append(arg)
    return out


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run_as_processes(nproc: int, argv: list[str]) -> None:
    """``leanloop ARGV`` as ``nproc`` processes; a failing one is a one-line error."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import get_args_parser, run

    options = [
        "--nnodes=1",
        f"--nproc-per-node={nproc}",
        "--master-addr=127.0.0.1",
        f"--master-port={free_port()}",
        "--module",
        "leanloop",
        *argv,
    ]
    try:
        run(get_args_parser().parse_args(options))
    except ChildFailedError as exc:
        rank, failure = exc.get_first_failure()
        raise LeanloopError(
            f"training process of rank {rank} (of {nproc}) failed with exit code "
            f"{failure.exitcode}; the others were stopped",
            hint="its own error is printed above",
        ) from None
