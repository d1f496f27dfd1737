"""What one call of a synapse costs, as pure functions of the layer and the tensors it saw (the counting
rules of :mod:`plif.deploy.stats`): multiply-accumulates (MACs) where its input is real-valued,
accumulates (SynOps) where it is spikes, and the MACs of the same layer in an ANN.

Every count is a device tensor (float64: exact to 2^53) or a Python integer made from shapes, so a
hook that counts never waits for the device (:mod:`plif.deploy.op_counter` reads them once, at the end).
A synapse is a convolution (1-, 2- or 3-d, any ``groups``: grouped and depthwise count what they
compute) or a linear layer; the spiking transformers' products of spikes are counted per attention
layer (:func:`ssa_products`).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["SYNAPSES", "fan_in", "ann_macs", "dense_macs", "is_binary", "synops", "ssa_products"]

SYNAPSES = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.Linear)
"""The layers whose operations are counted: convolutions and linear layers."""

_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}


def fan_in(layer: nn.Module) -> int:
    """Inputs each output of ``layer`` sums: ``C_in / groups · prod(kernel)`` of a convolution, ``in_features``
    of a linear layer."""
    if isinstance(layer, nn.Linear):
        return layer.in_features
    return layer.in_channels // layer.groups * math.prod(layer.kernel_size)


def ann_macs(layer: nn.Module, out_shape: tuple) -> int:
    """MACs of one evaluation of ``layer`` on one sample whose output is ``out_shape`` (0 for a layer that
    is not a synapse)."""
    return math.prod(out_shape) * fan_in(layer) if isinstance(layer, SYNAPSES) else 0


def dense_macs(layer: nn.Module, out: torch.Tensor) -> int:
    """MACs of one call of ``layer`` that gave ``out``: every output sums :func:`fan_in` products."""
    return out.numel() * fan_in(layer)


def is_binary(x: torch.Tensor) -> torch.Tensor:
    """Whether every value of ``x`` is 0 or 1 (spikes), as a device bool: nothing is read on the host."""
    return ((x == 0) | (x == 1)).all()


def synops(layer: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Accumulates ``layer`` runs for spikes ``x`` (one call's input): each spike once per synapse it reaches.

    A linear layer: spikes · ``out_features``.  A convolution: each spike times the output positions whose
    window holds it (exact at the borders, with the layer's padding mode), times the ``C_out / groups``
    output channels of its group."""
    if isinstance(layer, nn.Linear):
        return x.sum(dtype=torch.float64) * layer.out_features
    dims = len(layer.kernel_size)
    s = x.float()
    padding = layer.padding
    if layer.padding_mode != "zeros":  # reflect, replicate, circular: padded as the layer pads its input
        s, padding = F.pad(s, layer._reversed_padding_repeated_twice, mode=layer.padding_mode), 0
    ones = torch.ones(layer.groups, layer.in_channels // layer.groups, *layer.kernel_size, device=s.device)
    with torch.autocast(s.device.type, enabled=False):  # reach counts up to C_in*k*k: exact only in fp32
        reach = _CONV[dims](s, ones, stride=layer.stride, padding=padding, dilation=layer.dilation, groups=layer.groups)
    return reach.sum(dtype=torch.float64) * (layer.out_channels // layer.groups)


def ssa_products(qkv: torch.Tensor, heads: int) -> tuple[torch.Tensor, int]:
    """``(accumulates, MACs if dense)`` of Spikformer's attention products ``(v kᵀ) q`` per head
    (:func:`plif.layers.attention.spiking_self_attention`) for the spikes ``qkv [..., 3·C, L]`` they are
    split from (``d = C / heads`` channels a head, ``L`` tokens).

    ``v kᵀ`` adds 1 for every pair of a ``v`` and a ``k`` spike of the same token (``Σ_l nv_l · nk_l``,
    ``n_l`` the head's spikes at token ``l``); ``(v kᵀ) q`` adds a column of ``d`` counts for every spike of
    ``q``.  Dense, each product is ``d · d · L`` MACs.  The scale is left out, as pooling is."""
    q, k, v = (p.unflatten(-2, (heads, p.shape[-2] // heads)) for p in qkv.float().chunk(3, dim=-2))
    d, tokens = q.shape[-2], q.shape[-1]
    pairs = (v.sum(-2, dtype=torch.float64) * k.sum(-2, dtype=torch.float64)).sum()
    adds = pairs + q.sum(dtype=torch.float64) * d
    return adds, 2 * d * d * tokens * (q.numel() // (d * tokens))
