"""Fold every inference-mode BatchNorm of a network into the convolution or linear layer before it.

In eval mode BN is an affine map per channel, so ``BN(conv(x))`` is one conv with a bias: the
folded network computes the same potentials with one layer less, and exporters (NIR) only have
to know conv/linear layers with bias.
"""
from __future__ import annotations

import copy

from torch import nn

from ..layers import TimeFolded, fold_bn_into, unwrap
from ..models import LayerInfo, SpikingNetwork

__all__ = ["fold_batchnorm", "is_batchnorm"]


def is_batchnorm(layer: nn.Module) -> bool:
    return isinstance(unwrap(layer), nn.modules.batchnorm._BatchNorm)


def fold_batchnorm(net: SpikingNetwork) -> SpikingNetwork:
    """A copy of ``net`` in eval mode with each BN merged into the conv/linear right before it.

    Per-step BN (``bn_per_step``) folds the same way: in eval mode it uses one set of running
    statistics for every step.  A BN that does not follow a conv/linear is kept as it is.
    The original network is not modified.
    """
    layers: list[nn.Module] = []
    info: list[LayerInfo] = []
    for layer, li in zip(net.layers, net.info):
        prev = unwrap(layers[-1]) if layers else None
        if is_batchnorm(layer) and isinstance(prev, (nn.Conv2d, nn.Linear)):
            layers[-1] = TimeFolded(fold_bn_into(prev, unwrap(layer)))
            last = info[-1]
            info[-1] = LayerInfo(f"{last.token}+BN", last.kind, last.out_shape,
                                 sum(p.numel() for p in layers[-1].parameters()), last.neurons)
            continue
        layers.append(copy.deepcopy(layer))
        info.append(li)
    folded = SpikingNetwork(net.spec, layers, info, net.input_shape, net.T)
    return folded.eval()
