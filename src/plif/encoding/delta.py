"""Delta (change) coding of a sequence: a spike where the input rose (or fell) by a threshold."""
from __future__ import annotations

import math
import numbers

import torch

from .base import Encoder, check_input, refuse_positional, refuse_unknown


def delta_spikes(x: torch.Tensor, threshold: float = 0.1, padding: bool = False,
                 off_spike: bool = False) -> torch.Tensor:
    """``[T, ...] -> [T, ...]``: ``d[t] = x[t] - x[t-1]``, with ``x[-1] = 0`` (``padding=False``) or
    ``x[0]`` (``padding=True``: no spike at step 0); ``out[t] = 1`` where ``d[t] >= threshold``, and
    with ``off_spike`` also ``-1`` where ``d[t] <= -threshold`` (else 0).  snnTorch's
    ``spikegen.delta(x, threshold, padding, off_spike)``."""
    before = torch.cat((x[:1] if padding else torch.zeros_like(x[:1]), x[:-1]))
    d = x - before
    out = (d >= threshold).to(x.dtype)
    return out - (d <= -threshold).to(x.dtype) if off_spike else out


class DeltaEncoder(Encoder):
    """Delta (change) coding of a sequence ``[T, B, ...] -> [T, B, ...]`` (:func:`delta_spikes`):
    threshold (``> 0``), padding and off_spike as snnTorch's ``spikegen.delta`` takes them, all
    keyword-only.  Its input is already ``T`` steps (a recording, a video, frames); it is not a
    ``plif train --encoder`` (a static image repeated changes only at step 0).

    >>> DeltaEncoder(5, threshold=1.0, off_spike=True)(torch.tensor([1.0, 2.0, 0.0, 2.0, 2.9]))
    tensor([ 1.,  1., -1.,  1.,  0.])
    """

    name = "delta"
    _options = ("threshold", "padding", "off_spike")

    def __init__(self, T: int, *args, threshold: float = 0.1, padding: bool = False, off_spike: bool = False,
                 **unknown):
        who = type(self).__name__
        refuse_positional(who, args, self._options)
        refuse_unknown(who, unknown, self._options)
        super().__init__(T)
        if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real) or not math.isfinite(threshold) \
                or threshold <= 0:
            raise ValueError(f"{who}: threshold must be a finite number > 0, got {threshold!r}")
        self.threshold, self.padding, self.off_spike = float(threshold), bool(padding), bool(off_spike)
        self.spikes = not self.off_spike  # -1 spikes are not 0/1 spikes

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        who = type(self).__name__
        check_input(x, who, scaled=False)
        if x.dim() < 1 or x.shape[0] != self.T:
            raise ValueError(f"{who}: x must be a sequence [T, ...] of T = {self.T} steps, got shape {list(x.shape)}")
        return delta_spikes(x, self.threshold, self.padding, self.off_spike)

    def extra_repr(self) -> str:
        return f"T={self.T}, threshold={self.threshold:g}, padding={self.padding}, off_spike={self.off_spike}"
