"""Where this process stands among the processes of one training run (started by ``torchrun``,
``accelerate launch`` or ``leanloop train --nproc``): its rank, whether it is the main process,
and a barrier. Whatever writes shared state — the export, the database, checkpoints, ``LATEST``,
reports — is written by the main process alone; the others wait at the barrier and then read it."""

from __future__ import annotations

from dataclasses import dataclass

from leanloop.settings import Settings


@dataclass(frozen=True)
class Processes:
    """This process's ``rank`` among ``world_size`` processes (``local_rank`` on its machine)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    def barrier(self) -> None:
        """Wait until every process of the run is here (nothing to wait for on one process).
        The process group is the one the launcher set up (``accelerate``'s, which TRL and the
        trainers share); it is made on first use."""
        if not self.distributed:
            return
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            dist.barrier()
            return
        from accelerate import PartialState

        PartialState().wait_for_everyone()


def current() -> Processes:
    """This process, as the launcher's environment (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``)
    describes it; one process when none is set."""

    def number(name: str, default: int) -> int:
        value = Settings.variable(name) or ""
        return int(value) if value.isdigit() else default

    world = number("WORLD_SIZE", 1)
    rank = number("RANK", 0)
    return Processes(rank=rank, world_size=world, local_rank=number("LOCAL_RANK", rank))
