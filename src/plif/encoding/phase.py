"""Weighted phase coding: ``x`` written in binary, one digit per step, the most significant first."""
from __future__ import annotations

import torch

from .base import Encoder, check_input, check_size, check_unit_range, refuse_positional, refuse_unknown


def phase_spikes(x: torch.Tensor, T: int) -> torch.Tensor:
    """``[T, *x.shape]``: ``out[t]`` is the binary digit of weight ``2^-(t+1)`` of ``x`` in
    ``[0, 1 - 2^-T]``, so ``x = sum_t out[t] 2^-(t+1)`` exactly where ``x`` is a multiple of
    ``2^-T`` (truncated otherwise); ``x`` up to 1 saturates at every digit 1.  ``x`` in ``[0, 1]``
    (not checked here).

    The digits are taken as SpikingJelly's ``WeightedPhaseEncoder`` takes them (``r >= w``, then
    ``r -= w``: exact in floating point, since ``w <= r < 2w``); steps whose weight is below the
    dtype's smallest number are 0 (a digit no float of that dtype has)."""
    out = torch.zeros((T, *x.shape), device=x.device, dtype=x.dtype)
    r, w, tiny = x.clone(), 0.5, torch.finfo(x.dtype).smallest_normal * torch.finfo(x.dtype).eps
    for t in range(T):
        if w < tiny:
            break
        digit = r >= w
        out[t] = digit
        r = torch.where(digit, r - w, r)
        w *= 0.5
    return out


class WeightedPhaseEncoder(Encoder):
    """Weighted phase coding (Kim et al., "Deep neural networks with weighted spikes",
    Neurocomputing 311, 2018): the spike at step ``t`` stands for ``2^-(t+1)``, so ``T`` steps
    carry ``x`` to ``T`` binary digits, deterministically (:func:`phase_spikes`).  SpikingJelly
    2.0's ``WeightedPhaseEncoder(K=T)`` on its range ``[0, 1 - 2^-T]``, which it asserts; here
    ``x`` up to 1 is taken (an 8-bit image's 255/255 fires at every step, as 255/256 does).
    check (keyword-only): refuse ``x`` outside ``[0, 1]``.

    >>> WeightedPhaseEncoder(4)(torch.tensor([0.75, 0.0625, 1.0])).T
    tensor([[1., 1., 0., 0.],
            [0., 0., 0., 1.],
            [1., 1., 1., 1.]])
    """

    name = "phase"
    _options = ("check",)

    def __init__(self, T: int, *args, check: bool = True, **unknown):
        who = type(self).__name__
        refuse_positional(who, args, self._options)
        refuse_unknown(who, unknown, self._options)
        super().__init__(T)
        self.check = bool(check)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        who = type(self).__name__
        check_input(x, who)
        check_size(who, self.T, x, x.element_size() + 1)
        if self.check:
            check_unit_range(x, who)
        return phase_spikes(x, self.T)
