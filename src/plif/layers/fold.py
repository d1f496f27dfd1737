"""Run stateless layers once over all time-steps by folding time into the batch.

``[T, B, ...] -> [T*B, ...] -> layer -> [T, B, ...]``: one conv/linear/pool call instead of T.
"""
from __future__ import annotations

import torch
from torch import nn

from .precision import norm_in_fp32

__all__ = ["TimeFolded", "PerStepBatchNorm", "unwrap"]


class TimeFolded(nn.Module):
    """Wrap a stateless ``layer`` so it takes and returns ``[T, B, ...]``.

    ``x [T, B, ...]`` is folded to ``[T*B, ...]``, ``layer`` runs once on it, and its output
    ``[T*B, ...']`` is unfolded to ``[T, B, ...']``: one conv/linear/pool/BN call instead of T
    (a BatchNorm so wrapped computes its statistics over ``T*B``, and under autocast returns fp32:
    :mod:`plif.layers.precision`).  ``.layer`` is the wrapped
    module, so the state dict reads ``<name>.layer.weight``.
    """

    def __init__(self, layer: nn.Module):
        super().__init__()
        self.layer = layer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        T, B = x.shape[:2]
        y = norm_in_fp32(self.layer, x.flatten(0, 1))
        return y.unflatten(0, (T, B))

    def extra_repr(self) -> str:
        return "time folded into batch"


class PerStepBatchNorm(nn.Module):
    """BatchNorm with statistics per time-step, as the authors' step-by-step code computes them.

    One ``bn`` module is applied to each ``x[t] [B, ...]`` in turn (running statistics are updated
    T times per batch), instead of once over ``[T*B, ...]``.
    """

    def __init__(self, bn: nn.Module):
        super().__init__()
        self.layer = bn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.stack([norm_in_fp32(self.layer, x[t]) for t in range(x.shape[0])])


def unwrap(layer: nn.Module) -> nn.Module:
    """The module a time wrapper runs (:class:`TimeFolded` and its subclasses, :class:`PerStepBatchNorm`),
    else ``layer`` itself: what a layer is.  How it runs over time (over ``T*B`` at once, or step
    by step) is the wrapper's type, which callers that care ask separately."""
    return layer.layer if isinstance(layer, (TimeFolded, PerStepBatchNorm)) else layer
