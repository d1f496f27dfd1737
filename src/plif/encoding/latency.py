"""Time-to-first-spike: one spike per element, the brightest first, on a linear or a log scale."""
from __future__ import annotations

import math

import torch

from .base import Encoder, check_input, check_size, check_unit_range, refuse_positional, refuse_unknown

FUNCTIONS = ("linear", "log")


def latency_times(x: torch.Tensor, T: int, function: str = "linear") -> torch.Tensor:
    """The (unrounded) firing step of each element of ``x`` in ``[0, 1]`` (not checked here):

    - ``linear``: ``(T - 1)(1 - x)``;
    - ``log``: ``(T - 1) - ln(alpha x + 1)`` with ``alpha = e^(T-1) - 1`` (so ``x = 1`` fires at step
      0 and ``x = 0`` at ``T - 1``), SpikingJelly 2.0's ``enc_function="log"``.  Where ``alpha``
      overflows ``x``'s dtype (``T > 89`` in float32) the same value is computed as
      ``-ln(x + (1 - x) e^(1-T))``, which does not overflow (SpikingJelly's raises there)."""
    if function == "linear":
        return (T - 1) * (1 - x)
    if T - 1 < math.log(torch.finfo(x.dtype).max):
        return (T - 1.0) - torch.log((math.exp(T - 1.0) - 1.0) * x + 1.0)
    return (-torch.log(x + (1 - x) * math.exp(1.0 - T))).clamp_max(T - 1)


def latency_spikes(x: torch.Tensor, T: int, function: str = "linear") -> torch.Tensor:
    """``[T, *x.shape]``: one spike per element at step ``round(latency_times(x, T, function))``
    (round half to even, as ``torch.round``); ``x`` in ``[0, 1]`` (not checked here)."""
    t_f = latency_times(x, T, function).round()
    steps = torch.arange(T, device=x.device, dtype=x.dtype).view(T, *([1] * x.dim()))
    return (steps == t_f).to(x.dtype)


class LatencyEncoder(Encoder):
    """Time-to-first-spike: one spike at step ``round((T - 1)(1 - x))`` (``function="linear"``, the
    default) or ``round((T - 1) - ln((e^(T-1) - 1) x + 1))`` (``function="log"``: bright inputs
    spread over the early steps, dim ones crowd the last); deterministic.  check: refuse ``x``
    outside ``[0, 1]``.  Both keyword-only (:func:`latency_times`).

    >>> LatencyEncoder(8, function="log")(torch.tensor([1.0, 0.5, 0.1, 0.0])).argmax(0)
    tensor([0, 1, 2, 7])
    """

    name = "latency"
    _options = ("function", "check")

    def __init__(self, T: int, *args, function: str = "linear", check: bool = True, **unknown):
        who = type(self).__name__
        refuse_positional(who, args, self._options)
        refuse_unknown(who, unknown, self._options, {"enc_function": "function"})
        super().__init__(T)
        if function not in FUNCTIONS:
            raise ValueError(f"{who}: function must be one of {', '.join(FUNCTIONS)}, got {function!r}")
        self.function, self.check = function, bool(check)
        if function == "log":
            self.name = "latency-log"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        who = type(self).__name__
        check_input(x, who)
        check_size(who, self.T, x, x.element_size() + 1)  # the comparison with each step, the spikes
        if self.check:
            check_unit_range(x, who)
        return latency_spikes(x, self.T, self.function)

    def extra_repr(self) -> str:
        return f"T={self.T}" + (", function='log'" if self.function == "log" else "")
