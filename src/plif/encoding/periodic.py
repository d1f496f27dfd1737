"""A spike pattern repeated with its period."""
from __future__ import annotations

import torch

from .base import Encoder, check_input, check_size, refuse_positional


class PeriodicEncoder(Encoder):
    """A pattern of ``P`` steps ``[P, B, ...]`` played over ``T`` steps: ``out[t] = pattern[t % P]``,
    ``[T, B, ...]`` (a copy).  SpikingJelly 2.0's ``PeriodicEncoder(pattern)`` called ``T`` times
    (it outputs ``pattern[t % P]`` at its ``t``-th call); here the whole sequence at once, and the
    pattern is the input, so one encoder plays any pattern.  Its input is a sequence, not a static
    image: it is not a ``plif train --encoder``.

    >>> PeriodicEncoder(5)(torch.tensor([[1.0], [0.0]]))[:, 0]
    tensor([1., 0., 1., 0., 1.])
    """

    name = "periodic"
    spikes = False  # it plays whatever the pattern holds

    def __init__(self, T: int, *args):
        refuse_positional(type(self).__name__, args, ())
        super().__init__(T)

    def forward(self, pattern: torch.Tensor) -> torch.Tensor:
        who = type(self).__name__
        check_input(pattern, who, scaled=False)
        if pattern.dim() < 1 or pattern.shape[0] < 1:
            raise ValueError(f"{who}: pattern must be [P, ...] with P >= 1 steps, got shape {list(pattern.shape)}")
        check_size(who, self.T, pattern[0], pattern.element_size())
        steps = torch.arange(self.T, device=pattern.device) % pattern.shape[0]
        return pattern.index_select(0, steps)
