"""Encoders of input over ``T`` time-steps: ``nn.Module`` layers whose output is time-first ``[T, B, ...]``.

Encoders of a static image ``[B, ...] -> [T, B, ...]`` (``x`` is the intensity of one element),
each exactly defined:

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
  SpikingJelly 2.0's ``LatencyEncoder(T, enc_function="linear")``, all ``T`` steps at once;
  ``function="log"`` is its ``enc_function="log"``, ``t_f = round((T - 1) - ln((e^(T-1) - 1) x + 1))``.
  ``x`` must lie in ``[0, 1]``.
- :class:`WeightedPhaseEncoder` (weighted phase coding): ``x`` in binary, the digit of weight
  ``2^-(t+1)`` at step ``t`` (SpikingJelly's ``WeightedPhaseEncoder``).  ``x`` must lie in ``[0, 1]``.

And three whose input or output is not a network's static feed: :class:`PeriodicEncoder` (a pattern
``[P, B, ...]`` repeated over ``T`` steps), :class:`DeltaEncoder` (a spike where a sequence
``[T, B, ...]`` changed by a threshold, snnTorch's ``spikegen.delta``) and
:class:`PopulationEncoder` (Gaussian receptive fields, ``[B, ..., F] -> [T, B, ..., F * N]``, learnable,
SpikingJelly's ``PopEncoder`` family).  Every argument after ``T`` is keyword-only.

Randomness (Poisson) comes from ``generator`` (a ``torch.Generator`` on the input's device) or, by
default, the global RNG; nothing synchronises with the host, so an encoder runs inside a captured
CUDA graph or ``torch.compile``.  The range check of ``x``: a one-line ``ValueError`` on the CPU
(eager); on another device ``torch._assert_async`` (no host sync; it fails the next synchronising
call); under ``torch.compile`` none (``check=False`` skips it everywhere).  The input must be a real
floating-point ``torch.Tensor`` (a one-line ``TypeError`` otherwise), and an output that would not
fit in the device's free memory is refused in one line with its size.

``plif train --encoder poisson|latency|latency-log|phase`` puts one in front of the network
(:func:`make_encoder`, ``build_network(..., encoder=...)``); the data pipeline normalises images
(``(x/255 - mean) / std``), so the stored encoder first maps them back to ``[0, 1]`` (:class:`Intensity`).

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
>>> LatencyEncoder(4, "log")
Traceback (most recent call last):
...
TypeError: LatencyEncoder: the arguments after T are keyword-only (function=, check=); write LatencyEncoder(T, function='log')
"""
from __future__ import annotations

from .base import Encoder, check_unit_range
from .delta import DeltaEncoder, delta_spikes
from .direct import DirectEncoder
from .intensity import Intensity, Normalised
from .latency import LatencyEncoder, latency_spikes, latency_times
from .periodic import PeriodicEncoder
from .phase import WeightedPhaseEncoder, phase_spikes
from .poisson import PoissonEncoder, poisson_spikes
from .population import PopulationEncoder, gaussian_fields
from .registry import DEFAULT_ENCODER, ENCODERS, OTHER_ENCODERS, encoder_spec, make_encoder


__all__ = ["Encoder", "DirectEncoder", "PoissonEncoder", "LatencyEncoder", "WeightedPhaseEncoder", "PeriodicEncoder",
           "DeltaEncoder", "PopulationEncoder", "Intensity", "ENCODERS", "OTHER_ENCODERS", "DEFAULT_ENCODER",
           "make_encoder", "encoder_spec", "poisson_spikes", "latency_spikes", "latency_times", "phase_spikes",
           "delta_spikes", "gaussian_fields", "check_unit_range"]
