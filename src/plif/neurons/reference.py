"""The multi-step reference: a plain loop of :func:`neuron_step` through autograd.

This is the specification every fast path is tested against; it is not meant to be fast.
"""
from __future__ import annotations

import torch

from .functional import NeuronConfig, neuron_step

__all__ = ["multi_step_reference", "multi_step_potentials"]


def multi_step_reference(x: torch.Tensor, k, v0: torch.Tensor | None, cfg: NeuronConfig):
    """Run ``x [T, B, ...]`` through the neuron; returns ``(spikes [T, B, ...], V_{T-1} [B, ...])``."""
    v = v0
    spikes = []
    for t in range(x.shape[0]):
        s, v = neuron_step(x[t], v, k, cfg)
        spikes.append(s)
    return torch.stack(spikes), v


def multi_step_potentials(x: torch.Tensor, k, v0: torch.Tensor | None, cfg: NeuronConfig):
    """The same loop keeping every potential: ``(spikes [T, B, ...], V [T, B, ...])``, ``V[t]`` the
    potential after step ``t``'s reset (SpikingJelly's ``v_seq``; ``V[-1]`` is ``V_{T-1}``)."""
    v = v0
    spikes, potentials = [], []
    for t in range(x.shape[0]):
        s, v = neuron_step(x[t], v, k, cfg)
        spikes.append(s)
        potentials.append(v)
    return torch.stack(spikes), torch.stack(potentials)
