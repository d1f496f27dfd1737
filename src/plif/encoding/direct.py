"""The paper's encoding: the image itself at every step."""
from __future__ import annotations

import torch

from .base import Encoder, check_input, check_size, refuse_positional


class DirectEncoder(Encoder):
    """The paper's encoding: ``x`` at every step, a ``[T, B, ...]`` view (no copy); any real ``x``.

    The view costs nothing, but every layer after it computes on all ``T`` frames: ``T`` whose
    frames would not fit in the device's free memory is refused in one line."""

    name = "direct"
    spikes = False

    def __init__(self, T: int, *args):
        refuse_positional(type(self).__name__, args, ())
        super().__init__(T)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_input(x, type(self).__name__, scaled=False)
        check_size(type(self).__name__, self.T, x, x.element_size(), "frames (a view, but the network computes on all)")
        return x.unsqueeze(0).expand(self.T, *x.shape)
