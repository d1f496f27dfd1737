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
def liven_(net: nn.Module, x: torch.Tensor, std: float = 1.0, shift: float = 0.2) -> nn.Module:
    """Rescale ``net`` in place on the batch ``x [B, ...]`` (or ``[T, B, ...]``; a module other than a
    notation network takes frames ``[T, B, ...]``); returns it in eval mode.

    Each BN gets running statistics equal to its input's and ``γ = std``, ``β = shift``; each
    conv/linear not followed by a BN is scaled so its output has standard deviation ``std``.  In a
    module (a residual network, one written by hand) "followed by a BN" is a pair that
    :func:`~plif.deploy.fold_batchnorm` folds (:func:`~plif.deploy.module_folding.conv_bn_pairs`), and
    each layer is rescaled as its module's own forward reaches it, through hooks.
    """
    if not isinstance(net, SpikingNetwork):
        return _liven_module(net, x, std, shift)
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


def _liven_module(net: nn.Module, x: torch.Tensor, std: float, shift: float) -> nn.Module:
    from .module_folding import conv_bn_pairs

    net.eval()
    paired = {layer for layer, _ in conv_bn_pairs(net)}

    def calibrate(bn, args):  # before the BN runs: its statistics those of its input (channels at dim 1)
        h = args[0]
        dims = [d for d in range(h.dim()) if d != 1]
        if bn.running_mean is not None:
            bn.running_mean.copy_(h.mean(dims))
            bn.running_var.copy_(h.var(dims) + 1e-3)
        if bn.affine:
            bn.weight.fill_(std)
            bn.bias.fill_(shift)

    def rescale(layer, args, out):  # the output again, from the rescaled weights
        out_std = float(out.std())
        if out_std > 0:
            layer.weight.mul_(std / out_std)
        return layer.forward(*args)

    hooks = []
    for name, m in net.named_modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            hooks.append(m.register_forward_pre_hook(calibrate))
        elif isinstance(m, (nn.Conv2d, nn.Linear)) and name not in paired and name.rpartition(".")[0] not in paired:
            hooks.append(m.register_forward_hook(rescale))  # bare, or inside its TimeFolded (the pair's name)
    try:
        net(x)
    finally:
        for h in hooks:
            h.remove()
    return net
