"""Population coding: each input value seen by ``neurons`` Gaussian receptive fields."""
from __future__ import annotations

import math
import numbers

import torch
from torch import nn

from .base import Encoder, check_input, check_size, refuse_positional, refuse_unknown

OUTPUTS = ("activity", "regular", "bernoulli")
THRESHOLD = 0.999  # SpikingJelly's: an activity of 1 fires at every step despite rounding


class _StraightThrough(torch.autograd.Function):
    """``fn(x)`` forward, the gradient passed to ``x`` unchanged (SpikingJelly's DeterministicPass and
    poisson_pass)."""

    @staticmethod
    def forward(ctx, x, fn):
        return fn(x)

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def _heaviside(u: torch.Tensor) -> torch.Tensor:
    return (u >= 0).to(u.dtype)


def gaussian_fields(x: torch.Tensor, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """``[..., F] -> [..., F * N]``: ``exp(-((x_f - mean[f, n]) / std[f, n])^2 / 2)``, the ``N``
    fields of feature ``f`` side by side (``mean``, ``std`` ``[1, F, N]``)."""
    a = torch.exp(-0.5 * ((x.unsqueeze(-1) - mean[0]) / std[0]).square())
    return a.flatten(-2)


def regular_spikes(a: torch.Tensor, T: int) -> torch.Tensor:
    """``[T, *a.shape]``: an integrate-and-fire neuron fed ``a`` at every step, ``V += a``, a spike
    where ``V >= 0.999``, then ``V -= 0.999`` (reset by subtraction, detached), ``V`` from 0; the
    gradient passes straight through each spike."""
    v, out = torch.zeros_like(a), []
    for _ in range(T):
        h = v + a
        s = _StraightThrough.apply(h - THRESHOLD, _heaviside)
        out.append(s)
        v = h - s.detach() * THRESHOLD
    return torch.stack(out)


class PopulationEncoder(Encoder):
    """Population coding with Gaussian receptive fields: each of the ``features`` input values is
    seen by ``neurons`` fields ``exp(-((x - mu)/sigma)^2 / 2)`` with centres ``mu`` spread evenly
    over ``mean_range`` and width ``sigma = std``, both learnable (``mean``, ``std``: ``[1, F, N]``
    parameters, SpikingJelly's names and shapes, so its state dict loads).  ``[B, ..., F] -> [T, B,
    ..., F * N]`` (each feature's ``N`` fields side by side), as ``output`` says:

    - ``"activity"``: the fields' activities at every step (not spikes; SpikingJelly's ``PopEncoder``);
    - ``"regular"``: spikes of an integrate-and-fire neuron per field fed its activity (threshold
      0.999, reset by subtraction; SpikingJelly's ``PopSpikeEncoderDeterministic``);
    - ``"bernoulli"``: a spike with probability = the activity at every step, from ``generator``
      (SpikingJelly's ``PopSpikeEncoderRandom``).

    Spikes pass their gradient straight through to the activities, as SpikingJelly's do.  Every
    argument after ``T`` is keyword-only.  The output has ``N`` times the features, so it is not a
    ``plif train --encoder`` (the network's input shape would change); put it in your own model.

    >>> enc = PopulationEncoder(3, features=1, neurons=3, mean_range=(0.0, 1.0), std=0.25)
    >>> enc(torch.tensor([[0.5]]))[0]                      # fields at 0, 0.5 and 1
    tensor([[0.1353, 1.0000, 0.1353]], grad_fn=<SelectBackward0>)
    """

    name = "population"
    _options = ("features", "neurons", "mean_range", "std", "output", "generator")

    def __init__(self, T: int, *args, features: int | None = None, neurons: int | None = None,
                 mean_range=(0.0, 1.0), std: float = 0.1, output: str = "activity",
                 generator: torch.Generator | None = None, **unknown):
        who = type(self).__name__
        refuse_positional(who, args, self._options)
        refuse_unknown(who, unknown, self._options, {"obs_dim": "features", "pop_dim": "neurons",
                                                     "spike_ts": "T (the first argument)"})
        super().__init__(T)
        for key, n in (("features", features), ("neurons", neurons)):
            if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
                raise ValueError(f"{who}: {key} must be a positive integer (required), got {n!r}")
        lo_hi = tuple(mean_range) if isinstance(mean_range, (tuple, list)) else ()
        if len(lo_hi) != 2 or not all(isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)
                                      for v in lo_hi):
            raise ValueError(f"{who}: mean_range must be two finite numbers (lowest, highest centre), "
                             f"got {mean_range!r}")
        if isinstance(std, bool) or not isinstance(std, numbers.Real) or not math.isfinite(std) or std <= 0:
            raise ValueError(f"{who}: std must be a finite number > 0, got {std!r}")
        if output not in OUTPUTS:
            raise ValueError(f"{who}: output must be one of {', '.join(OUTPUTS)}, got {output!r}")
        if generator is not None and (output != "bernoulli" or not isinstance(generator, torch.Generator)):
            raise ValueError(f"{who}: generator is a torch.Generator for output='bernoulli', got {generator!r} "
                             f"with output={output!r}")
        self.features, self.neurons, self.output, self.generator = int(features), int(neurons), output, generator
        mean = torch.linspace(float(lo_hi[0]), float(lo_hi[1]), self.neurons).expand(1, self.features, self.neurons)
        self.mean = nn.Parameter(mean.clone())
        self.std = nn.Parameter(torch.full_like(mean, float(std)))
        self.spikes = output != "activity"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        who = type(self).__name__
        check_input(x, who, scaled=False)
        if x.dim() < 1 or x.shape[-1] != self.features:
            raise ValueError(f"{who}: x must be [B, ..., {self.features}] (features last), got shape {list(x.shape)}")
        check_size(who, self.T, x, self.neurons * (2 * x.element_size() + 1))
        a = gaussian_fields(x, self.mean.to(x.dtype), self.std.to(x.dtype))
        seq = a.unsqueeze(0).expand(self.T, *a.shape)
        if self.output == "activity":
            return seq
        if self.output == "regular":
            return regular_spikes(a, self.T)
        gen = self.generator
        return _StraightThrough.apply(seq, lambda p: torch.bernoulli(p, generator=gen))

    def extra_repr(self) -> str:
        return f"T={self.T}, features={self.features}, neurons={self.neurons}, output={self.output!r}"
