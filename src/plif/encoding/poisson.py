"""Rate coding: a spike with probability ``x`` at every step."""
from __future__ import annotations

import torch

from .base import Encoder, check_input, check_size, check_unit_range, refuse_positional, refuse_unknown


def poisson_spikes(x: torch.Tensor, T: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """``[T, *x.shape]``: ``u < x`` with ``u`` uniform on ``[0, 1)`` drawn for every step and element
    (Bernoulli(x) per step); ``x`` in ``[0, 1]`` (not checked here)."""
    u = torch.rand((T, *x.shape), generator=generator, device=x.device, dtype=x.dtype)
    return (u < x).to(x.dtype)


class PoissonEncoder(Encoder):
    """Rate coding: spike with probability ``x`` at every step (the package docstring).

    generator: a ``torch.Generator`` on the input's device (None: the global RNG; a CUDA graph
    capture and ``torch.compile`` take that one).  check: refuse ``x`` outside ``[0, 1]``.  Both
    keyword-only."""

    name = "poisson"
    _options = ("generator", "check")

    def __init__(self, T: int, *args, generator: torch.Generator | None = None, check: bool = True, **unknown):
        refuse_positional(type(self).__name__, args, self._options)
        refuse_unknown(type(self).__name__, unknown, self._options)
        super().__init__(T)
        if generator is not None and not isinstance(generator, torch.Generator):
            raise TypeError("PoissonEncoder: generator must be a torch.Generator or None, "
                            f"got {type(generator).__name__}")
        self.generator, self.check = generator, bool(check)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        who = type(self).__name__
        check_input(x, who)
        check_size(who, self.T, x, 2 * x.element_size() + 1)  # the uniform draws, their comparison, the spikes
        if self.check:
            check_unit_range(x, who)
        return poisson_spikes(x, self.T, self.generator)
