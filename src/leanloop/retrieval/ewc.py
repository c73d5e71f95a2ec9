"""Elastic weight consolidation: the diagonal Fisher information of the repositories learnt so far
with the weights they were learnt at (θ*), and the penalty Σ F (θ − θ*)² that keeps later training
close to them where it mattered.

After each repository the Fisher of its training data is added to the Fisher kept so far and the
anchor moves to the current weights (the "online" form of EWC: one penalty term whatever the
number of repositories).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch
from torch import Tensor, nn


class EWCState:
    """Fisher information and anchor weights by parameter name; empty until the first
    ``consolidate``."""

    def __init__(self) -> None:
        self.fisher: dict[str, Tensor] = {}
        self.anchor: dict[str, Tensor] = {}
        self.repositories = 0
        self.samples = 0

    @property
    def active(self) -> bool:
        return bool(self.fisher)

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
    ) -> None:
        """Add ``fisher`` to the Fisher kept so far and anchor at the current weights."""
        for name, param in named_parameters:
            if name not in fisher:
                continue
            new = fisher[name].detach().to(param.device)
            old = self.fisher.get(name)
            self.fisher[name] = new if old is None else old.to(param.device) + new
            self.anchor[name] = param.detach().clone()
        self.repositories += 1
        self.samples += samples

    def state_dict(self) -> dict[str, Any]:
        return {
            "fisher": {k: v.detach().cpu() for k, v in self.fisher.items()},
            "anchor": {k: v.detach().cpu() for k, v in self.anchor.items()},
            "repositories": self.repositories,
            "samples": self.samples,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.fisher = dict(state.get("fisher", {}))
        self.anchor = dict(state.get("anchor", {}))
        missing = set(self.fisher) ^ set(self.anchor)
        if missing:
            raise ValueError(f"EWC state: Fisher and anchor differ on {sorted(missing)[:3]}")
        self.repositories = int(state.get("repositories", 0))
        self.samples = int(state.get("samples", 0))


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
