"""BatchNorm at inference: folded into the convolution or linear layer before it, or kept exactly
as the per-channel scale and shift that torch's CPU kernel applies.

In eval mode BN is an affine map per channel, so ``BN(conv(x))`` is one conv with a bias: the
folded network computes the same potentials with one layer less, up to rounding (the folded
weights ``W γ/√(σ²+ε)`` round differently from ``conv`` then BN, so a potential within rounding of
the threshold can fire differently).  :func:`bn_scale_shift` gives the exact alternative: the
float32 ``α``, ``β`` with which torch computes BN's eval output as ``x α + β``.
"""
from __future__ import annotations

import copy

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..layers import TimeFolded, fold_bn_into, unwrap
from ..models import LayerInfo, SpikingNetwork

__all__ = ["fold_keeping_names", "fold_batchnorm", "is_batchnorm", "bn_scale_shift"]


def is_batchnorm(layer: nn.Module) -> bool:
    return isinstance(unwrap(layer), nn.modules.batchnorm._BatchNorm)


@torch.no_grad()
def bn_scale_shift(bn: nn.modules.batchnorm._BatchNorm) -> tuple[torch.Tensor, torch.Tensor]:
    """``(α, β)`` ``[C]`` float32 with ``bn(x) = x α + β`` per channel in eval mode, as torch's CPU
    kernel computes it: ``α = (1 / sqrt(σ² + float32(ε))) γ`` in float32 operations, and ``β`` is
    read from ``bn`` itself (its output for ``x = 0``), so however the kernel rounds ``γ' - μ α``
    (one rounding, or two) ``β`` is that value.  The product and sum are one fused multiply-add
    where the CPU has one (x86-64 with FMA), else two roundings; a convolution whose accumulator
    starts at its bias computes the same (see :mod:`.nir_export`)."""
    if not bn.track_running_stats or bn.running_mean is None or bn.running_var is None:
        raise ValueError("a BatchNorm without running statistics is not a fixed affine map at inference")
    f32 = lambda t: None if t is None else t.detach().float().cpu()  # noqa: E731
    var = f32(bn.running_var)
    # numpy's float32 sqrt is correctly rounded, as the kernel's scalar std::sqrt; torch.sqrt on
    # the CPU is not (vectorised): it differs in the last bit for about one value in five
    invstd = np.float32(1) / np.sqrt(var.numpy() + np.float32(bn.eps))
    alpha = torch.from_numpy(invstd * (1 if bn.weight is None else f32(bn.weight).numpy()))
    beta = F.batch_norm(torch.zeros(1, var.numel()), f32(bn.running_mean), var, f32(bn.weight), f32(bn.bias),
                        False, 0.0, bn.eps)
    return alpha, beta.reshape(-1)


def fold_batchnorm(net: nn.Module) -> nn.Module:
    """A copy of ``net`` in eval mode with each BN merged into the conv/linear right before it.

    Per-step BN (``bn_per_step``) folds the same way: in eval mode it uses one set of running
    statistics for every step.  A BN that does not follow a conv/linear is kept as it is.
    The original network is not modified.  Any other ``nn.Module`` (a residual network, a converted
    SpikingJelly model, a network written by hand) folds each BN that reads only a conv/linear
    layer's output, found on its traced graph (:func:`plif.deploy.module_folding.fold_module_batchnorm`).
    """
    if not isinstance(net, nn.Module):
        raise TypeError(f"fold_batchnorm takes an nn.Module, got {type(net).__name__}")
    if not isinstance(net, SpikingNetwork):
        from .module_folding import fold_module_batchnorm, replace_networks

        return replace_networks(fold_module_batchnorm(net), fold_batchnorm)
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
    folded = SpikingNetwork(net.spec, layers, info, net.input_shape, net.T, encoder=net.encoder)
    return folded.eval()


def fold_keeping_names(net: nn.Module) -> nn.Module:
    """A copy of ``net`` in eval mode with each BN folded into the conv/linear before it, as
    :func:`fold_batchnorm` folds, and replaced by ``nn.Identity``: every other module keeps its qualified
    name (``plif stats`` names its layers so).  Any module: :func:`plif.deploy.module_folding.fold_module_batchnorm`;
    a network in the paper's notation: its layer chain, as :func:`fold_batchnorm` walks it."""
    if not isinstance(net, SpikingNetwork):
        from .module_folding import fold_module_batchnorm

        return fold_module_batchnorm(net)
    folded = copy.deepcopy(net).eval()
    layers = folded.layers
    for i in range(1, len(layers)):
        prev = unwrap(layers[i - 1])
        if is_batchnorm(layers[i]) and isinstance(prev, (nn.Conv2d, nn.Linear)):
            layers[i - 1] = TimeFolded(fold_bn_into(prev, unwrap(layers[i])))
            layers[i] = nn.Identity()
    return folded
