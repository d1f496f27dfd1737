"""A convolution with few taps per output (``in_channels·k·k`` small: a first layer on 1-3 input
channels) through ATen's im2col kernel instead of oneDNN, on the CPU.

oneDNN computes such a convolution in a blocked layout and reorders its output (and, in
backward, the output's gradient) to and from it: at T = 20 on DVS128 Gesture's 2-channel frames
each reorder is another copy of the first block's largest tensor (335 MB at B = 2), a third more
of the step's peak memory and hundreds of thousands of page faults.  ATen's own kernel unfolds
the input instead, ``in_channels·k·k / out_channels`` of the output's size (18/128 there), and
writes the output where it stays.  Same values up to the order of the ``in_channels·k·k``
products' sum.  Eager CPU only; anywhere else :func:`few_taps` is false and the caller runs
``F.conv2d``.

ATen's kernel reads its input and weight as contiguous (its backward, given a transposed or strided
input, computes a wrong weight gradient in silence, and refuses a channels-last one), so both
functions pass them as such: a copy only where they are not, of a tensor with few channels.  Which
convolutions come here at all (zero padding, no bias, ...) is
:func:`plif.layers.fused_block.fused_route`'s to say.
"""
from __future__ import annotations

import torch
from torch import nn

__all__ = ["few_taps", "few_tap_conv2d", "few_tap_conv_backward", "MAX_TAPS"]

MAX_TAPS = 32
"""``in_channels·kh·kw`` up to which :func:`few_taps` holds (a 3×3 kernel on up to 3 channels)."""


def few_taps(conv: nn.Conv2d, x: torch.Tensor) -> bool:
    """Whether ``conv`` on ``x`` runs here: few taps, no groups or dilation, the CPU, not traced."""
    kh, kw = conv.kernel_size
    return (x.device.type == "cpu" and conv.groups == 1 and tuple(conv.dilation) == (1, 1)
            and isinstance(conv.padding, tuple) and conv.in_channels * kh * kw <= MAX_TAPS
            and not torch.compiler.is_compiling())


def few_tap_conv2d(x: torch.Tensor, weight: torch.Tensor, stride, padding) -> torch.Tensor:
    """The bias-free convolution of ``x [N, C, H, W]`` (no autograd: see :func:`few_tap_conv_backward`)."""
    return torch.ops.aten._slow_conv2d_forward(x.contiguous(), weight.contiguous(), list(weight.shape[-2:]), None,
                                               list(stride), list(padding))


def few_tap_conv_backward(g: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, stride, padding, mask):
    """``(∂x, ∂weight)`` of :func:`few_tap_conv2d` for the output gradient ``g`` (``mask``: which), by
    the same kernel's backward: no copy of ``g`` in another layout (oneDNN reorders it: another
    335 MB at DVS128 Gesture B2)."""
    g_x, g_w, _ = torch.ops.aten._slow_conv2d_backward.output_mask(
        g.contiguous(), x.contiguous(), weight.contiguous(), list(weight.shape[-2:]), list(stride), list(padding),
        [bool(mask[0]), bool(mask[1]), False])
    return g_x, g_w
