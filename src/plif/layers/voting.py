"""The voting layer: each class is the average of a group of output neurons."""
from __future__ import annotations

import torch
from torch import nn

__all__ = ["Voting"]


class Voting(nn.Module):
    """``[..., N] -> [..., N / group]``: mean of each consecutive group of ``group`` neurons
    (``APk10s10`` on the last spiking layer: 100 neurons -> 10 classes)."""

    def __init__(self, group: int = 10):
        super().__init__()
        self.group = int(group)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[-1]
        if n % self.group:
            raise ValueError(f"voting over groups of {self.group} needs a multiple of {self.group} features, got {n}")
        return x.unflatten(-1, (n // self.group, self.group)).mean(-1)

    def extra_repr(self) -> str:
        return f"group={self.group}"
