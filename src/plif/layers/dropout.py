"""Dropout whose mask is drawn once per sample and reused at every time-step."""
from __future__ import annotations

import torch
from torch import nn

__all__ = ["TimeInvariantDropout"]


class TimeInvariantDropout(nn.Module):
    """``x [T, B, ...]``: in training, zero each neuron of a sample with probability ``p`` for all
    ``T`` steps together and scale survivors by ``1/(1-p)``; identity in eval mode.

    A mask redrawn every step would let information leak through a dropped neuron over time;
    the paper's dropout keeps the same network for the whole sample.
    """

    def __init__(self, p: float = 0.5):
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"dropout probability must be in [0, 1), got {p}")
        self.p = float(p)

    def mask(self, x: torch.Tensor) -> torch.Tensor | None:
        """The scaled keep mask ``[B, ...]`` for ``x [T, B, ...]`` (``None`` when dropout is off)."""
        if not self.training or self.p == 0.0:
            return None
        # drawn in logical order whatever x's memory layout, so a channels-last run draws the same mask
        return torch.empty(x.shape[1:], dtype=x.dtype, device=x.device).bernoulli_(1.0 - self.p) / (1.0 - self.p)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        keep = self.mask(x)
        return x if keep is None else x * keep

    def extra_repr(self) -> str:
        return f"p={self.p}, mask shared over time"
