"""Spike-only inference: a folded network whose spike-fed conv/linear layers only accumulate.

Which layers see binary input is decided from the structure (:mod:`plif.models.structure`): the
output of a spiking layer is binary and stays binary through eval-mode dropout, flatten and max
pooling; convolution, linear, average pooling and voting produce real values.  The first layer
(the encoder on static images or event counts) therefore stays a dense float layer.
"""
from __future__ import annotations

from torch import nn

from ..layers import TimeFolded, unwrap
from ..models import SpikingNetwork
from ..models.structure import keeps_binary, spike_fed_layers
from .bn_folding import fold_batchnorm
from .spike_ops import gather_form

__all__ = ["to_spike_inference", "keeps_binary", "spike_fed_layers"]  # the last two: plif.models.structure


def to_spike_inference(net: nn.Module, max_density: float | None = None,
                       validate: bool = True) -> nn.Module:
    """BN-folded eval copy of ``net`` with every spike-fed ``Conv2d``/``Linear`` replaced by its
    gather-accumulate form (:func:`~plif.deploy.spike_ops.gather_form`).

    ``max_density``: input spike density above which a layer uses the dense GEMM instead; ``None``
    takes the measured defaults (linear 0.06, conv 0: the unfold gather never beat oneDNN here),
    ``1`` forces the gather path everywhere, ``0`` keeps every dense GEMM.
    Same input and output as ``net``: ``[B, ...]`` or ``[T, B, ...]`` -> ``[T, B, classes]``.
    Any other ``nn.Module`` gets the same from its traced graph
    (:func:`plif.deploy.module_folding.module_spike_inference`).
    """
    if not isinstance(net, nn.Module):
        raise TypeError(f"to_spike_inference takes an nn.Module, got {type(net).__name__}")
    if not isinstance(net, SpikingNetwork):
        from .module_folding import module_spike_inference, replace_networks

        return replace_networks(module_spike_inference(net, max_density, validate),
                                lambda m: to_spike_inference(m, max_density, validate))
    out = fold_batchnorm(net)
    for i in spike_fed_layers(out):
        syn = unwrap(out.layers[i])
        if isinstance(syn, (nn.Linear, nn.Conv2d)):
            out.layers[i] = TimeFolded(gather_form(syn, max_density, validate))
    return out.eval()
