"""Normalised images mapped back to intensities in [0, 1], in front of an encoder."""
from __future__ import annotations

import math
import numbers
from typing import Sequence

import torch
from torch import nn

from .base import Encoder


def _floats(values, key: str) -> list[float]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not values or not all(
            isinstance(v, numbers.Real) and not isinstance(v, bool) for v in values):
        raise ValueError(f"Intensity: {key} must be a non-empty list of numbers (one per channel), got {values!r}")
    out = [float(v) for v in values]
    if not all(math.isfinite(v) for v in out):
        raise ValueError(f"Intensity: {key} must be finite, got {values!r}")
    return out


class Intensity(nn.Module):
    """Undo the pipeline's normalisation: ``x * std + mean`` per channel (dim 1 of ``[B, C, ...]``),
    clamped to ``[0, 1]`` (``(p/255 - mean)/std`` comes back as ``p/255`` to within a rounding, which
    the clamp keeps inside the range).  No parameters: a network's state dict is unchanged.

    mean, std: one finite value per channel (or one for all), ``std > 0``; channels: the input's
    channels where known (then the lengths must fit them)."""

    def __init__(self, mean: Sequence[float], std: Sequence[float], channels: int | None = None):
        super().__init__()
        self.mean, self.std = _floats(mean, "mean"), _floats(std, "std")
        if len(self.mean) != len(self.std):
            raise ValueError(f"Intensity: mean and std need one value per channel each, got {len(self.mean)} "
                             f"and {len(self.std)}")
        if min(self.std) <= 0:
            raise ValueError(f"Intensity: std must be > 0 (std > 0 per channel), got {std!r}")
        if channels is not None and len(self.mean) not in (1, channels):
            raise ValueError(f"Intensity: mean and std have {len(self.mean)} values, the input has {channels} "
                             "channels; give one per channel")
        # buffers (not in the state dict) that move with the network: no host-to-device copy per call,
        # which a CUDA graph capture would refuse
        self.register_buffer("_mean", torch.tensor(self.mean), persistent=False)
        self.register_buffer("_std", torch.tensor(self.std), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = len(self.mean)
        if n != 1 and (x.dim() < 2 or x.shape[1] != n):
            raise ValueError(f"Intensity: mean and std have {n} values (one per channel), the input "
                             f"{list(x.shape)} has {x.shape[1] if x.dim() >= 2 else 'no'} channels (dim 1)")
        shape = (1, n) + (1,) * (x.dim() - 2) if x.dim() >= 2 else (n,)
        m, s = self._mean.to(x.dtype).view(shape), self._std.to(x.dtype).view(shape)
        return (x * s + m).clamp(0, 1)

    def extra_repr(self) -> str:
        return f"mean={self.mean}, std={self.std}"


class Normalised(Encoder):
    """An encoder fed normalised images: :class:`Intensity`, then ``encoder``."""

    def __init__(self, encoder: Encoder, intensity: Intensity):
        super().__init__(encoder.T)
        self.intensity, self.encoder = intensity, encoder
        self.name, self.spikes = encoder.name, encoder.spikes

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.encoder(self.intensity(x))
