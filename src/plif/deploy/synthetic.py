"""Made-up activity and input, for tests, benchmarks and ``plif stats --random``.

A freshly initialised network barely fires past its first spiking layer, so its spike counts say
nothing about deployment costs.  :func:`liven_` rescales every synaptic layer on a batch so that
each pre-activation has a chosen spread, which makes every spiking layer fire at a
trained-network-like rate (roughly 5-25%) without needing a checkpoint.  :func:`random_batches` is
input without a dataset.
"""
from __future__ import annotations

from typing import Iterator

import torch
from torch import nn

from ..models import SpikingNetwork
from ..models.inputs import is_static, repeat_over_time
from ..layers import unwrap
from .bn_folding import is_batchnorm

__all__ = ["liven_", "random_batches"]


def random_batches(input_shape: tuple, samples: int, batch_size: int = 64, seed: int = 0) -> Iterator:
    """Standard-normal static inputs ``[B, *input_shape]`` without labels (for smoke runs and tests)."""
    g = torch.Generator().manual_seed(seed)
    for i in range(0, samples, batch_size):
        yield torch.randn(min(batch_size, samples - i), *input_shape, generator=g)


@torch.no_grad()
def liven_(net: SpikingNetwork, x: torch.Tensor, std: float = 1.0, shift: float = 0.2) -> SpikingNetwork:
    """Rescale ``net`` in place on the batch ``x [B, ...]`` (or ``[T, B, ...]``); returns it in eval mode.

    Each BN gets running statistics equal to its input's and ``γ = std``, ``β = shift``; each
    conv/linear not followed by a BN is scaled so its output has standard deviation ``std``.
    """
    net.eval()
    h = repeat_over_time(x, net.T) if is_static(x, net.input_shape) else x
    layers = list(net.layers)
    for i, layer in enumerate(layers):
        m = unwrap(layer)
        if is_batchnorm(layer):
            dims = [d for d in range(h.dim()) if d != 2]
            m.running_mean.copy_(h.mean(dims))
            m.running_var.copy_(h.var(dims) + 1e-3)
            m.weight.fill_(std)
            m.bias.fill_(shift)
        elif isinstance(m, (nn.Conv2d, nn.Linear)):
            followed_by_bn = i + 1 < len(layers) and is_batchnorm(layers[i + 1])
            if not followed_by_bn:
                out_std = float(layer(h).std())
                if out_std > 0:
                    m.weight.mul_(std / out_std)
        h = layer(h)
    return net
