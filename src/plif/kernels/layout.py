"""How a time constant ``k`` maps onto the flat neurons of one time-step.

The fused kernels see one step of input as ``N`` contiguous neurons.  ``k`` is broadcastable to
that step (``[B, ...]``); when the dimensions ``k`` varies along are consecutive (one τ per layer,
per channel ``[C, 1, 1]``, per neuron ``[C, H, W]``), neuron ``n`` uses

    k[(n // inner) % C]

so the kernels never materialise a full-size ``k``.  Any other broadcast pattern is expanded to
one value per neuron (``C = N``, ``inner = 1``) and its gradient summed back with ``sum_to_size``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

__all__ = ["KLayout", "k_layout", "flat_k", "fold_k_grad"]


@dataclass(frozen=True)
class KLayout:
    """``channels`` values of ``k``, each shared by ``inner`` consecutive neurons, repeating ``outer`` times."""

    channels: int
    inner: int
    outer: int
    expanded: bool  # k had to be expanded to one value per neuron

    @property
    def per_channel(self) -> bool:
        return self.channels > 1


def k_layout(k_shape: tuple, step_shape: tuple) -> KLayout:
    """The layout of ``k [k_shape]`` over one step ``[step_shape]`` (``[B, ...]``)."""
    if len(k_shape) > len(step_shape):
        raise ValueError(f"k of shape {tuple(k_shape)} has more dims than one step {tuple(step_shape)}")
    padded = (1,) * (len(step_shape) - len(k_shape)) + tuple(k_shape)
    for d, (a, b) in enumerate(zip(padded, step_shape)):
        if a != 1 and a != b:
            raise ValueError(f"k of shape {tuple(k_shape)} does not broadcast to a step of shape {tuple(step_shape)} (dim {d})")
    n = math.prod(step_shape)
    varying = [d for d, a in enumerate(padded) if a != 1]
    if not varying:
        return KLayout(1, n, 1, False)
    lo, hi = varying[0], varying[-1]
    # a size-1 step dim inside the range is harmless; a broadcast one breaks the (n // inner) % C rule
    if all(padded[d] == step_shape[d] for d in range(lo, hi + 1)):
        c = math.prod(step_shape[lo:hi + 1])
        inner = math.prod(step_shape[hi + 1:])
        return KLayout(c, inner, n // (c * inner), False)
    return KLayout(n, 1, 1, True)


def flat_k(k: torch.Tensor, step_shape: tuple, layout: KLayout) -> torch.Tensor:
    """``k`` as a contiguous ``[channels]`` vector for the kernels."""
    if layout.expanded:
        return k.expand(step_shape).contiguous().view(-1)
    return k.contiguous().view(-1)


def fold_k_grad(g: torch.Tensor, k: torch.Tensor, step_shape: tuple, layout: KLayout) -> torch.Tensor:
    """Turn a ``[channels]`` gradient back into ``k``'s shape and dtype."""
    if layout.expanded:
        g = g.view(step_shape).sum_to_size(k.shape)
    return g.reshape(k.shape).to(k.dtype)
