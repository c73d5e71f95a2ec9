"""Elastic weight consolidation: the diagonal Fisher information of the repositories learnt so far
with the weights they were learnt at (θ*), and the penalty Σ F (θ − θ*)² that keeps later training
close to them where it mattered.

Each repository's Fisher is scaled to mean 1 over every parameter entry before it is added: the
raw empirical Fisher of a trained encoder is tiny (squared gradients of a loss near its minimum:
a mean of 2e-5 per weight for MiniLM in ``bench/ewc.py``), so ``λ · Σ F (θ − θ*)²`` with the raw
values stays near 1e-5 for any λ one would write down, and the penalty never acts. Scaled, F
says how much each weight mattered relative to the others, ``Σ F (θ − θ*)²`` is an
importance-weighted squared distance from the anchor (the plain squared distance when every
weight mattered as much), and λ weighs that distance against the loss directly. Every repository
weighs the same, whatever the scale of its loss.

After each repository its (scaled) Fisher is added to the Fisher kept so far and the anchor moves
to the current weights (the "online" form of EWC: one penalty term whatever the number of
repositories). The state names the repositories it covers, so that none is consolidated twice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch
from torch import Tensor, nn

#: Version of the saved state: 2 scales each repository's Fisher to mean 1 and names the
#: repositories; 1 (no ``version`` key) kept the raw Fisher and only counted them.
STATE_VERSION = 2


class AlreadyConsolidated(ValueError):
    """The EWC state already covers the repository it was asked to consolidate."""


class EWCState:
    """Fisher information and anchor weights by parameter name, and the repositories they
    cover; empty until the first ``consolidate``."""

    def __init__(self) -> None:
        self.fisher: dict[str, Tensor] = {}
        self.anchor: dict[str, Tensor] = {}
        self.covered: list[str] = []  # the repositories consolidated, in order
        self.unnamed = 0  # repositories of a version-1 state, which kept no names
        self.scales: list[float] = []  # the mean of each repository's raw Fisher, in order
        self.samples = 0

    @property
    def active(self) -> bool:
        return bool(self.fisher)

    @property
    def repositories(self) -> int:
        """How many repositories the Fisher covers."""
        return self.unnamed + len(self.covered)

    def covers(self, repository: str) -> bool:
        """Whether ``repository`` (a key such as ``url@commit``) is consolidated already."""
        return repository in self.covered

    def penalty(self, named_parameters: Iterable[tuple[str, nn.Parameter]]) -> Tensor:
        """Σ F (θ − θ*)² over the parameters having a Fisher; exactly 0 while there is none."""
        total: Tensor | None = None
        device = None
        for name, param in named_parameters:
            device = param.device
            fisher = self.fisher.get(name)
            if fisher is None:
                continue
            if fisher.device != param.device:
                fisher = self.fisher[name] = fisher.to(param.device)
                self.anchor[name] = self.anchor[name].to(param.device)
            term = (fisher * (param - self.anchor[name]).pow(2)).sum()
            total = term if total is None else total + term
        if total is None:
            return torch.zeros((), device=device)
        return total

    def consolidate(
        self,
        named_parameters: Iterable[tuple[str, nn.Parameter]],
        fisher: dict[str, Tensor],
        samples: int,
        repository: str,
    ) -> None:
        """Scale ``fisher`` (one repository's) to mean 1, add it to the Fisher kept so far and
        anchor at the current weights.

        Raises:
            AlreadyConsolidated: ``repository`` is covered already.
        """
        if self.covers(repository):
            raise AlreadyConsolidated(f"the EWC state already covers {repository}")
        scale = _mean(fisher.values())
        for name, param in named_parameters:
            if name not in fisher:
                continue
            new = fisher[name].detach().to(param.device)
            new = new / scale if scale > 0 else new
            old = self.fisher.get(name)
            self.fisher[name] = new if old is None else old.to(param.device) + new
            self.anchor[name] = param.detach().clone()
        self.covered.append(repository)
        self.scales.append(scale)
        self.samples += samples

    def state_dict(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "fisher": {k: v.detach().cpu() for k, v in self.fisher.items()},
            "anchor": {k: v.detach().cpu() for k, v in self.anchor.items()},
            "covered": list(self.covered),
            "unnamed": self.unnamed,
            "scales": list(self.scales),
            "repositories": self.repositories,
            "samples": self.samples,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.fisher = dict(state.get("fisher", {}))
        self.anchor = dict(state.get("anchor", {}))
        missing = set(self.fisher) ^ set(self.anchor)
        if missing:
            raise ValueError(f"EWC state: Fisher and anchor differ on {sorted(missing)[:3]}")
        self.samples = int(state.get("samples", 0))
        if int(state.get("version", 1)) >= 2:
            self.covered = [str(key) for key in state.get("covered", [])]
            self.unnamed = int(state.get("unnamed", 0))
            self.scales = [float(v) for v in state.get("scales", [])]
            return
        # version 1: a raw Fisher over a count of repositories; scaled as version 2 scales it
        self.covered = []
        self.scales = []
        self.unnamed = int(state.get("repositories", 0))
        scale = _mean(self.fisher.values())
        if scale > 0 and self.unnamed:
            self.fisher = {k: v * (self.unnamed / scale) for k, v in self.fisher.items()}


def _mean(tensors: Iterable[Tensor]) -> float:
    """The mean of every entry of ``tensors`` (0 when there are none)."""
    total, count = 0.0, 0
    for tensor in tensors:
        total += float(tensor.detach().double().sum())
        count += tensor.numel()
    return total / count if count else 0.0


def diagonal_fisher(
    loss_of: Callable[[Any], Tensor],
    batches: Iterator[Any] | Iterable[Any],
    named_parameters: Iterable[tuple[str, nn.Parameter]],
    max_samples: int,
) -> tuple[dict[str, Tensor], int]:
    """The empirical diagonal Fisher: the mean over up to ``max_samples`` batches (one training
    example each) of the squared gradient of ``loss_of(batch)``; returns it and the count."""
    params = [(n, p) for n, p in named_parameters if p.requires_grad]
    sums = [torch.zeros_like(p, dtype=torch.float32) for _, p in params]
    count = 0
    for batch in batches:
        if count >= max_samples:
            break
        loss = loss_of(batch)
        grads = torch.autograd.grad(loss, [p for _, p in params], allow_unused=True)
        for total, grad in zip(sums, grads, strict=True):
            if grad is not None:
                total.add_(grad.detach().float().pow(2))
        count += 1
    if count == 0:
        return {}, 0
    return {name: total / count for (name, _), total in zip(params, sums, strict=True)}, count
