"""Fold an inference-mode BatchNorm into the convolution (or linear layer) before it.

``BN(conv(x)) = γ (W x + b - μ) / sqrt(σ² + ε) + β`` is a conv with weight
``W γ / sqrt(σ² + ε)`` and bias ``(b - μ) γ / sqrt(σ² + ε) + β``; the arithmetic is torch's own
(:func:`torch.nn.utils.fusion.fuse_conv_bn_eval` / :func:`~torch.nn.utils.fusion.fuse_linear_bn_eval`),
so a network folded here is bit for bit the one ``torch.ao`` / FX fusion would give.
"""
from __future__ import annotations

import copy

import torch
from torch import nn
from torch.nn.utils.fusion import fuse_conv_bn_eval, fuse_linear_bn_eval

__all__ = ["fold_bn_into"]


@torch.no_grad()
def fold_bn_into(layer: nn.Module, bn: nn.modules.batchnorm._BatchNorm) -> nn.Module:
    """Return a copy of ``layer`` (``Conv2d`` or ``Linear``) with ``bn``'s running statistics folded in.

    Neither argument is modified (torch's fusion wants both in eval mode: it gets eval copies).
    The copy always has a bias."""
    if not isinstance(layer, (nn.Conv2d, nn.Linear)):
        raise TypeError(f"can only fold BatchNorm into Conv2d or Linear, not {type(layer).__name__}")
    if not bn.track_running_stats or bn.running_mean is None:
        raise ValueError("cannot fold a BatchNorm without running statistics")
    bn = copy.deepcopy(bn).eval()
    if not bn.affine:  # fuse_linear_bn_weights needs γ and β: the identity affine map
        bn.weight = nn.Parameter(torch.ones_like(bn.running_mean))
        bn.bias = nn.Parameter(torch.zeros_like(bn.running_mean))
    fuse = fuse_conv_bn_eval if isinstance(layer, nn.Conv2d) else fuse_linear_bn_eval
    was_training = layer.training
    folded = fuse(layer.eval(), bn)  # fuse_* deep-copies the layer
    layer.train(was_training)
    return folded.train(was_training)
