"""Encoders of static images over ``T`` time-steps: ``nn.Module`` layers ``[B, ...] -> [T, B, ...]``.

Three encodings, each exactly defined (``x`` is the intensity of one element):

- :class:`DirectEncoder` (the paper's; the default of ``plif train``): the image itself at every
  step, ``out[t] = x`` (a view of ``x``, no copy); the network's first convolution is the learnable
  encoder.  Any real ``x``.
- :class:`PoissonEncoder` (rate coding): ``out[t] = 1`` with probability ``x``, independently at
  every step and element: ``out[t] = (u[t] < x)`` with ``u`` uniform on ``[0, 1)``, so ``x = 0``
  never fires and ``x = 1`` fires at every step.  ``x`` must lie in ``[0, 1]``.  (SpikingJelly's
  ``PoissonEncoder`` compares ``u <= x``, which lets ``x = 0`` fire once in 2^24; snnTorch's
  ``spikegen.rate`` draws ``torch.bernoulli(x)``; Norse's ``PoissonEncoder`` scales ``x`` by
  ``f_max * dt`` first.)
- :class:`LatencyEncoder` (time-to-first-spike): one spike per element, at step
  ``t_f = round((T - 1) * (1 - x))`` (round half to even, as ``torch.round``): the brightest
  element fires first (``x = 1`` at step 0), ``x = 0`` at the last step ``T - 1``.  This is
  SpikingJelly 2.0's ``LatencyEncoder(T, enc_function="linear")``, all ``T`` steps at once.
  ``x`` must lie in ``[0, 1]``.

Randomness (Poisson) comes from ``generator`` (a ``torch.Generator`` on the input's device) or, by
default, the global RNG; nothing synchronises with the host, so an encoder runs inside a captured
CUDA graph or ``torch.compile``.  The range check of ``x``: a one-line ``ValueError`` on the CPU
(eager); on another device ``torch._assert_async`` (no host sync; it fails the next synchronising
call); under ``torch.compile`` none (``check=False`` skips it everywhere).

``plif train --encoder poisson|latency`` puts one in front of the network (:func:`make_encoder`,
``build_network(..., encoder=...)``); the data pipeline normalises images (``(x/255 - mean) / std``),
so the stored encoder first maps them back to ``[0, 1]`` (:class:`Intensity`).

Example: a batch of two 2x2 images over T = 4:

>>> import torch
>>> from plif.encoding import DirectEncoder, LatencyEncoder, PoissonEncoder
>>> x = torch.tensor([[[0.0, 1.0], [0.5, 0.25]]]).expand(2, 2, 2)      # [B, H, W]
>>> DirectEncoder(4)(x).shape                                          # [T, B, H, W]
torch.Size([4, 2, 2, 2])
>>> LatencyEncoder(4)(x)[:, 0].argmax(0)                               # the step each element fires
tensor([[3, 0],
        [2, 2]])
>>> gen = torch.Generator().manual_seed(0)
>>> s = PoissonEncoder(1000, generator=gen)(x)
>>> s[:, 0].mean(0)                                                    # rates: close to x
tensor([[0.0000, 1.0000],
        [0.4810, 0.2660]])
>>> PoissonEncoder(4)(x + 1)
Traceback (most recent call last):
...
ValueError: PoissonEncoder: input must lie in [0, 1] (an intensity), got 6 of 8 values outside (min 1.25, max 2); ...
"""
from __future__ import annotations

import numbers
from typing import Sequence

import torch
from torch import nn

__all__ = ["Encoder", "DirectEncoder", "PoissonEncoder", "LatencyEncoder", "Intensity", "ENCODERS",
           "DEFAULT_ENCODER", "make_encoder", "encoder_spec", "poisson_spikes", "latency_spikes"]

DEFAULT_ENCODER = "direct"


def _check_T(T) -> int:
    if isinstance(T, bool) or not isinstance(T, numbers.Integral) or T < 1:
        raise ValueError(f"T must be a positive integer, got {T!r}")
    return int(T)


def check_unit_range(x: torch.Tensor, who: str) -> None:
    """Refuse ``x`` outside ``[0, 1]`` (NaN too) without a host sync where it would cost one (module docstring)."""
    if torch.compiler.is_compiling():
        return
    bad = ~((x >= 0) & (x <= 1))
    if x.device.type != "cpu":
        torch._assert_async(~bad.any(), f"{who}: input must lie in [0, 1] (an intensity)")
        return
    n = int(bad.sum())
    if n:
        vals = x[bad]
        raise ValueError(f"{who}: input must lie in [0, 1] (an intensity), got {n} of {x.numel()} values outside "
                         f"(min {float(vals.min()):g}, max {float(vals.max()):g}); scale images to [0, 1] first "
                         "(x / 255 for 8-bit pixels), or use DirectEncoder for any real input")


def poisson_spikes(x: torch.Tensor, T: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """``[T, *x.shape]``: ``u < x`` with ``u`` uniform on ``[0, 1)`` drawn for every step and element
    (Bernoulli(x) per step); ``x`` in ``[0, 1]`` (not checked here)."""
    u = torch.rand((T, *x.shape), generator=generator, device=x.device, dtype=x.dtype)
    return (u < x).to(x.dtype)


def latency_spikes(x: torch.Tensor, T: int) -> torch.Tensor:
    """``[T, *x.shape]``: one spike per element at step ``round((T - 1) * (1 - x))``; ``x`` in
    ``[0, 1]`` (not checked here)."""
    t_f = ((T - 1) * (1 - x)).round()
    steps = torch.arange(T, device=x.device, dtype=x.dtype).view(T, *([1] * x.dim()))
    return (steps == t_f).to(x.dtype)


class Encoder(nn.Module):
    """An encoder of static input over ``T`` steps: ``[B, ...] -> [T, B, ...]`` (time first).

    ``name`` is what ``plif train --encoder`` and a run's ``config.json`` call it."""

    name = ""
    spikes = True  # its output is 0/1 spikes (a network after it has nothing to hoist)

    def __init__(self, T: int):
        super().__init__()
        self.T = _check_T(T)

    def extra_repr(self) -> str:
        return f"T={self.T}"


class DirectEncoder(Encoder):
    """The paper's encoding: ``x`` at every step, a ``[T, B, ...]`` view (no copy)."""

    name = "direct"
    spikes = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.unsqueeze(0).expand(self.T, *x.shape)


class PoissonEncoder(Encoder):
    """Rate coding: spike with probability ``x`` at every step (module docstring).

    generator: a ``torch.Generator`` on the input's device (None: the global RNG; a CUDA graph
    capture and ``torch.compile`` take that one).  check: refuse ``x`` outside ``[0, 1]``."""

    name = "poisson"

    def __init__(self, T: int, generator: torch.Generator | None = None, check: bool = True):
        super().__init__(T)
        self.generator, self.check = generator, bool(check)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.check:
            check_unit_range(x, type(self).__name__)
        return poisson_spikes(x, self.T, self.generator)


class LatencyEncoder(Encoder):
    """Time-to-first-spike: one spike at step ``round((T - 1) * (1 - x))`` (module docstring);
    deterministic.  check: refuse ``x`` outside ``[0, 1]``."""

    name = "latency"

    def __init__(self, T: int, check: bool = True):
        super().__init__(T)
        self.check = bool(check)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.check:
            check_unit_range(x, type(self).__name__)
        return latency_spikes(x, self.T)


class Intensity(nn.Module):
    """Undo the pipeline's normalisation: ``x * std + mean`` per channel (dim 1 of ``[B, C, ...]``),
    clamped to ``[0, 1]`` (``(p/255 - mean)/std`` comes back as ``p/255`` to within a rounding, which
    the clamp keeps inside the range).  No parameters: a network's state dict is unchanged."""

    def __init__(self, mean: Sequence[float], std: Sequence[float]):
        super().__init__()
        self.mean, self.std = [float(m) for m in mean], [float(s) for s in std]
        if len(self.mean) != len(self.std) or not self.mean or min(self.std) <= 0:
            raise ValueError(f"Intensity: mean and std need one value per channel, std > 0; got {mean!r}, {std!r}")
        # buffers (not in the state dict) that move with the network: no host-to-device copy per call,
        # which a CUDA graph capture would refuse
        self.register_buffer("_mean", torch.tensor(self.mean), persistent=False)
        self.register_buffer("_std", torch.tensor(self.std), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = (1, len(self.mean)) + (1,) * (x.dim() - 2)
        m, s = self._mean.to(x.dtype).view(shape), self._std.to(x.dtype).view(shape)
        return (x * s + m).clamp(0, 1)

    def extra_repr(self) -> str:
        return f"mean={self.mean}, std={self.std}"


class _Normalised(Encoder):
    """An encoder fed normalised images: :class:`Intensity`, then ``encoder``."""

    def __init__(self, encoder: Encoder, intensity: Intensity):
        super().__init__(encoder.T)
        self.intensity, self.encoder = intensity, encoder
        self.name, self.spikes = encoder.name, encoder.spikes

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.encoder(self.intensity(x))


ENCODERS = {cls.name: cls for cls in (DirectEncoder, PoissonEncoder, LatencyEncoder)}
"""``plif train --encoder`` name -> encoder class."""


def make_encoder(spec, T: int) -> Encoder | None:
    """The encoder ``spec`` names for ``T`` steps, or None for the direct (the network's own) feed.

    spec: None, an :class:`Encoder` (kept as it is: its ``T`` must equal ``T``), a name of
    :data:`ENCODERS`, or ``{"name": NAME, "mean": [...], "std": [...]}`` as a run's ``config.json``
    stores it (``network_kwargs["encoder"]``: input normalised with that mean and std, mapped back
    to ``[0, 1]`` by :class:`Intensity`, whose clamp makes the range check needless: none runs)."""
    if spec is None or isinstance(spec, DirectEncoder):
        return None
    if isinstance(spec, Encoder):
        if spec.T != T:
            raise ValueError(f"encoder: {type(spec).__name__} has T = {spec.T}, the network T = {T}")
        return spec
    options = {}
    if isinstance(spec, dict):
        unknown = sorted(set(spec) - {"name", "mean", "std"})
        if unknown or "name" not in spec:
            raise ValueError(f"encoder: expected {{'name': ..., 'mean': [...], 'std': [...]}}, got {spec!r}")
        options = {k: v for k, v in spec.items() if k != "name"}
        spec = spec["name"]
    if spec not in ENCODERS:
        raise ValueError(f"unknown encoder {spec!r}; valid: {', '.join(ENCODERS)}")
    if spec == DEFAULT_ENCODER:
        return None
    encoder = ENCODERS[spec](T, check=not options)  # Intensity's clamp keeps normalised images in range
    if options:
        if set(options) != {"mean", "std"}:
            raise ValueError(f"encoder {spec!r}: give both mean and std, got {sorted(options)}")
        encoder = _Normalised(encoder, Intensity(options["mean"], options["std"]))
    return encoder


def encoder_spec(name: str, mean: Sequence[float] | None = None, std: Sequence[float] | None = None):
    """What a run stores for ``--encoder name`` on images normalised with ``mean``/``std``: None for
    ``direct`` (the network's own feed), else the dict :func:`make_encoder` takes."""
    if name not in ENCODERS:
        raise ValueError(f"unknown encoder {name!r}; valid: {', '.join(ENCODERS)}")
    if name == DEFAULT_ENCODER:
        return None
    if mean is None:
        return name
    return {"name": name, "mean": [float(m) for m in mean], "std": [float(s) for s in std]}
