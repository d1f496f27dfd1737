"""Fold an inference-mode BatchNorm into the convolution (or linear layer) before it.

``BN(conv(x)) = γ (W x + b - μ) / sqrt(σ² + ε) + β`` is a conv with weight
``W γ / sqrt(σ² + ε)`` and bias ``(b - μ) γ / sqrt(σ² + ε) + β``.
"""
from __future__ import annotations

import copy

import torch
from torch import nn

__all__ = ["fold_bn_into"]


@torch.no_grad()
def fold_bn_into(layer: nn.Module, bn: nn.modules.batchnorm._BatchNorm) -> nn.Module:
    """Return a copy of ``layer`` (``Conv2d`` or ``Linear``) with ``bn``'s running statistics folded in."""
    if not isinstance(layer, (nn.Conv2d, nn.Linear)):
        raise TypeError(f"can only fold BatchNorm into Conv2d or Linear, not {type(layer).__name__}")
    if not bn.track_running_stats or bn.running_mean is None:
        raise ValueError("cannot fold a BatchNorm without running statistics")
    scale = bn.running_var.add(bn.eps).rsqrt()
    if bn.affine:
        gamma, beta = bn.weight, bn.bias
    else:
        gamma, beta = torch.ones_like(scale), torch.zeros_like(scale)
    scale = scale * gamma
    folded = copy.deepcopy(layer)
    shape = (-1,) + (1,) * (layer.weight.dim() - 1)
    folded.weight.copy_(layer.weight * scale.view(shape))
    bias = layer.bias if layer.bias is not None else torch.zeros_like(scale)
    new_bias = (bias - bn.running_mean) * scale + beta
    folded.bias = nn.Parameter(new_bias.to(layer.weight.dtype))
    return folded
