"""Convolution and linear layers whose input is spikes, saving that input as one byte per element.

The weight gradient needs the layer's input; autograd keeps it in fp32 (4 bytes).  When the
input is binary it is kept as ``bool`` and turned back into exactly the same floats in backward,
and the gradients are computed by the same ATen calls autograd makes (``convolution_backward``,
``mm``), so they are bit-identical to the plain layer's.

``on`` is the value a spike has at this layer: 1, or ``1/(1-p)`` after time-invariant dropout,
whose per-sample mask is passed as ``keep`` (``x = s * keep``, saved as ``s`` in one byte plus the
small ``[B, ...]`` mask).

:class:`SpikeConvBN` also drops BatchNorm's saved input (the convolution's output, fp32, the
largest tensor of a block): backward recomputes it from the one-byte spikes (or, for the first
convolution, from the network's input, which the caller keeps anyway) with one more
convolution, and reuses the batch statistics saved in forward.

Under ``torch.autocast`` the input and weight are cast to the autocast dtype before these
functions (differentiably, as autocast casts them for the plain layer), since their backward runs
outside autocast and must see the dtypes forward used (the linear layer casts its weight inside,
to form the weight's gradient in fp32 directly); BatchNorm's parameters, statistics and output
stay fp32 (:mod:`plif.layers.precision` states what bf16 means in plif).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .fold import TimeFolded

__all__ = ["SpikeConv2d", "SpikeLinear", "SpikeConvBN", "spike_conv2d", "spike_linear", "spike_conv_bn", "conv_args",
           "conv_refusal", "conv_weight_grad", "conv_input_grad", "conv_backward", "pack_spikes", "unpack_spikes",
           "autocast_dtype", "autocast_inputs", "saves_for_backward"]


def pack_spikes(s: torch.Tensor) -> torch.Tensor:
    """Spikes ``s`` (0 or the value of one) kept as one byte each: ``bool``."""
    # the cast, not ``s != 0`` (the same values, NaN included): ATen's comparison is not vectorised to a
    # bool output (4.8-5.0 against 0.8-0.9 ms for [128, 128, 14, 14] fp32 or bf16, one thread, Intel Xeon)
    return s.to(torch.bool)


def unpack_spikes(packed: torch.Tensor, keep, dtype) -> torch.Tensor:
    """The floats :func:`pack_spikes` kept, in ``dtype``, times the dropout mask ``keep`` (or None)."""
    # from the bytes as uint8 (0/1, the same floats): ATen's bool -> float copy is not vectorised
    # (3.3 against 0.9 ms for [128, 128, 14, 14] -> bf16, one thread)
    x = packed.view(torch.uint8).to(dtype)
    return x if keep is None else x * keep


def autocast_dtype(device_type: str) -> torch.dtype | None:
    """The dtype autocast casts to on ``device_type`` ("cpu", "cuda"), or None where it is off."""
    return torch.get_autocast_dtype(device_type) if torch.is_autocast_enabled(device_type) else None


def autocast_inputs(*tensors):
    """``tensors`` in the autocast dtype when autocast is on for their device (else unchanged)."""
    dtype = autocast_dtype(tensors[0].device.type)
    if dtype is None:
        return tensors
    return tuple(t if t is None or t.dtype == dtype else t.to(dtype) for t in tensors)


def conv_args(conv: nn.Conv2d):
    """``(stride, padding, dilation, groups)``: what ``F.conv2d`` needs besides the weight to compute
    ``conv`` (bias-free, zero-padded: :func:`conv_refusal` says where it cannot)."""
    return list(conv.stride), list(conv.padding), list(conv.dilation), conv.groups


def conv_refusal(conv: nn.Module) -> str | None:
    """Why ``conv`` is not computed by ``F.conv2d(x, conv.weight, None, *conv_args(conv))`` (the
    call the one-byte and fused paths make in its place), or None where it is: not a plain
    ``nn.Conv2d`` (a subclass with its own forward), a bias, a ``padding_mode`` other than zeros
    (``reflect``, ``circular``, ``replicate`` pad by themselves), padding given as a string."""
    if not isinstance(conv, nn.Conv2d) or (type(conv).forward, type(conv)._conv_forward) != (
            nn.Conv2d.forward, nn.Conv2d._conv_forward):
        return f"{type(conv).__name__} is not a plain nn.Conv2d"
    if conv.bias is not None:
        return "the convolution has a bias"
    if conv.padding_mode != "zeros":
        return f"padding_mode={conv.padding_mode!r}"
    if isinstance(conv.padding, str):
        return f"padding={conv.padding!r}"
    return None


def conv_weight_grad(g: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, args) -> torch.Tensor:
    """``∂L/∂weight`` of a bias-free convolution (``args`` from :func:`conv_args`), by the ATen call autograd makes."""
    stride, padding, dilation, groups = args
    return torch.ops.aten.convolution_backward(g, x, weight, None, stride, padding, dilation, False, [0, 0],
                                               groups, [False, True, False])[1]


def conv_input_grad(g: torch.Tensor, shape, weight: torch.Tensor, args) -> torch.Tensor:
    """``∂L/∂x`` of a bias-free convolution whose input had ``shape``: the input's values are not
    needed, so an uninitialised tensor of that shape stands for it.  Not a one-element view expanded
    to the shape, as ``torch.nn.grad.conv2d_input`` passes: ATen's backends make their input
    contiguous first, so that view was written out whole at every call (DVS128 Gesture's second
    convolution at T = 20: a 40 MiB copy per step, and 40 MiB more of the step's peak); the
    kernel neither reads nor writes this one."""
    stride, padding, dilation, groups = args
    like = weight.new_empty(shape)
    return torch.ops.aten.convolution_backward(g, like, weight, None, stride, padding, dilation, False, [0, 0],
                                               groups, [True, False, False])[0]


_ONE_CALL_BYTES = 32 * 2**20  # an unpacked input below this: both gradients in one call (its reorders shared)


def conv_backward(g, x_of, shape, weight, args, mask):
    """``(∂x, ∂weight)``, one gradient at a time: the input ``x_of()`` (unpacked from one byte) is
    made only for the weight's gradient and freed before the input's gradient is allocated.  A small
    input takes both in one ``convolution_backward`` call, as autograd makes it (the cpu preset's
    second convolution: 12% less time; its memory does not matter)."""
    if mask[0] and mask[1] and math.prod(shape) * weight.element_size() < _ONE_CALL_BYTES:
        stride, padding, dilation, groups = args
        return torch.ops.aten.convolution_backward(g, x_of(), weight, None, stride, padding, dilation, False, [0, 0],
                                                   groups, [True, True, False])[:2]
    g_w = conv_weight_grad(g, x_of(), weight, args) if mask[1] else None
    g_x = conv_input_grad(g, shape, weight, args) if mask[0] else None
    return g_x, g_w


class _SpikeConv(torch.autograd.Function):
    @staticmethod
    def forward(ctx, s, weight, args):
        stride, padding, dilation, groups = args
        ctx.save_for_backward(pack_spikes(s), weight)
        ctx.args, ctx.dtype = args, s.dtype
        return F.conv2d(s, weight, None, stride, padding, dilation, groups)

    @staticmethod
    def backward(ctx, g):
        packed, weight = ctx.saved_tensors
        g_s, g_w = conv_backward(g, lambda: unpack_spikes(packed, None, ctx.dtype), packed.shape, weight, ctx.args,
                                  ctx.needs_input_grad[:2])
        return g_s, g_w, None


class _SpikeLinear(torch.autograd.Function):
    """``y [T, B, O] = (s * keep) Wᵀ`` for binary ``s [T, B, F]`` and a ``keep [B, F]`` mask (or None).

    ``dtype``: the products' dtype (autocast's), or None for the weight's own.  The weight is cast
    here rather than before the call, so that its gradient is formed in the weight's dtype by
    :func:`_product_into` (for FC2048 of the paper network a 51 MB fp32 tensor) instead of in bf16
    and widened by a second pass over it."""

    @staticmethod
    def forward(ctx, s, keep, weight, dtype):
        w = weight if dtype is None or weight.dtype == dtype else weight.to(dtype)
        x = s if keep is None else s * keep
        ctx.save_for_backward(pack_spikes(s), keep, w)
        ctx.dtype, ctx.weight_dtype = s.dtype, weight.dtype
        return x.flatten(0, 1).mm(w.t()).unflatten(0, s.shape[:2])

    @staticmethod
    def backward(ctx, g):
        packed, keep, weight = ctx.saved_tensors
        g2 = g.flatten(0, 1)
        g_s = g_w = None
        # the products autograd's mm backward forms for a row-major input and a transposed weight
        if ctx.needs_input_grad[0]:
            g_s = g2.mm(weight).unflatten(0, packed.shape[:2])
            if keep is not None:
                g_s = g_s * keep
        if ctx.needs_input_grad[2]:
            g_w = _product_into(ctx.weight_dtype, g2.t(), unpack_spikes(packed, keep, ctx.dtype).flatten(0, 1))
        return g_s, None, g_w, None


_CHUNK_BYTES = 4 * 2**20  # a block of rows of the product that stays in cache before it is widened


def _product_into(dtype: torch.dtype, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` in ``dtype``: computed in ``a``'s dtype (bf16 under autocast) a block of rows at a
    time and each block widened while it is still in cache, the values ``(a @ b).to(dtype)`` has
    without that tensor being written and read back whole.  FC2048's weight gradient, ``[2048, 128]
    @ [128, 6272]``, on the quiet 2-core Intel Xeon (torch 2.13.0+cpu, fastest of 15): one thread
    12.6 -> 10.2 ms, two threads 6.6 -> 6.1 ms."""
    if a.dtype == dtype:
        return a.mm(b)
    out = torch.empty(a.shape[0], b.shape[1], dtype=dtype, device=a.device)
    rows = max(1, _CHUNK_BYTES // max(1, b.shape[1] * a.element_size()))
    for i in range(0, a.shape[0], rows):
        out[i:i + rows].copy_(a[i:i + rows].mm(b))
    return out


class _ConvBN(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bn_weight, bn_bias, running_mean, running_var, args, momentum, eps, binary):
        stride, padding, dilation, groups = args
        y = F.conv2d(x, weight, None, stride, padding, dilation, groups)
        # the call BatchNorm makes in training: output, batch statistics, running statistics updated
        # from a bf16 y (autocast) in fp32: BatchNorm's output is fp32 on every path (plif.layers.precision)
        z, mean, invstd = torch.ops.aten.native_batch_norm(y.float(), bn_weight, bn_bias, running_mean, running_var,
                                                           True, momentum, eps)
        del y
        ctx.save_for_backward(pack_spikes(x) if binary else x, weight, bn_weight, mean, invstd)
        ctx.args, ctx.eps, ctx.dtype, ctx.binary = args, eps, x.dtype, binary
        return z

    @staticmethod
    def backward(ctx, g):
        saved, weight, bn_weight, mean, invstd = ctx.saved_tensors
        stride, padding, dilation, groups = ctx.args
        x = unpack_spikes(saved, None, ctx.dtype) if ctx.binary else saved
        y = F.conv2d(x, weight, None, stride, padding, dilation, groups)  # recomputed, not saved
        del x  # unpacked again for the weight's gradient: one fewer input-sized tensor beside BN's backward
        need = ctx.needs_input_grad
        g_y, g_gamma, g_beta = torch.ops.aten.native_batch_norm_backward(
            g, y.float(), bn_weight, None, None, mean, invstd, True, ctx.eps, [True, need[2], need[3]])
        g_y = g_y.to(y.dtype)  # the gradient of y's widening, as autograd casts it
        del y
        g_x, g_w = conv_backward(g_y, lambda: unpack_spikes(saved, None, ctx.dtype) if ctx.binary else saved, saved.shape,
                                  weight, ctx.args, need[:2])
        return g_x, g_w, g_gamma, g_beta, None, None, None, None, None, None


def spike_conv2d(s: torch.Tensor, conv: nn.Conv2d) -> torch.Tensor:
    """``conv(s)`` for binary ``s [N, C, H, W]`` (bias-free conv), keeping ``s`` as one byte for backward."""
    return _SpikeConv.apply(*autocast_inputs(s, conv.weight), conv_args(conv))


def spike_linear(s: torch.Tensor, fc: nn.Linear, keep: torch.Tensor | None = None) -> torch.Tensor:
    """``fc(s * keep)`` for binary ``s [T, B, F]`` and ``keep [B, F]`` (or None), bias-free,
    keeping ``s`` as one byte for backward: ``[T, B, O]``."""
    s, keep = autocast_inputs(s, keep)
    return _SpikeLinear.apply(s, keep, fc.weight, autocast_dtype(s.device.type))


def spike_conv_bn(x: torch.Tensor, conv: nn.Conv2d, bn: nn.BatchNorm2d, binary: bool = True) -> torch.Tensor:
    """``bn(conv(x))`` in training mode, keeping for backward only ``x`` (one byte per element when
    ``binary``: spikes; else the tensor itself, which the caller holds anyway) and BN's batch
    statistics; the convolution's output is recomputed in backward instead of kept."""
    if bn.momentum is None:
        raise ValueError("spike_conv_bn needs a BatchNorm with a momentum (cumulative averages are not supported)")
    bn.num_batches_tracked.add_(1)
    x, weight = autocast_inputs(x, conv.weight)
    return _ConvBN.apply(x, weight, bn.weight, bn.bias, bn.running_mean, bn.running_var,
                         conv_args(conv), bn.momentum, bn.eps, binary)


def saves_for_backward(layer: nn.Module) -> bool:
    """Whether ``layer`` keeps anything for backward here, so that the one-byte layers pay: training,
    gradients on, and for a convolution one that ``F.conv2d`` computes (:func:`conv_refusal`)."""
    # eval mode and no-grad runs keep nothing for backward: the plain layer is as small and as fast;
    # a convolution F.conv2d does not compute as it is (reflect padding, ...) runs as it is
    return layer.training and torch.is_grad_enabled() and (not isinstance(layer, nn.Conv2d)
                                                           or conv_refusal(layer) is None)


class SpikeConv2d(TimeFolded):
    """``[T, B, C, H, W]`` bias-free convolution of spikes; ``.layer`` is the ``nn.Conv2d`` it wraps."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not saves_for_backward(self.layer):
            return super().forward(x)
        T, B = x.shape[:2]
        return spike_conv2d(x.flatten(0, 1), self.layer).unflatten(0, (T, B))

    def extra_repr(self) -> str:
        return "time folded into batch, input saved as one byte"


class SpikeLinear(TimeFolded):
    """``[T, B, F]`` bias-free linear layer of spikes; ``.layer`` is the ``nn.Linear`` it wraps."""

    def forward(self, x: torch.Tensor, keep: torch.Tensor | None = None) -> torch.Tensor:
        if not saves_for_backward(self.layer):
            return super().forward(x if keep is None else x * keep)
        return spike_linear(x, self.layer, keep)

    def extra_repr(self) -> str:
        return "time folded into batch, input saved as one byte"


class SpikeConvBN(nn.Module):
    """``conv`` then ``bn`` (both ``TimeFolded``) on ``[T, B, C, H, W]``, the conv's output recomputed
    in backward.  ``binary``: the input is spikes, kept as one byte (else kept as it is)."""

    def __init__(self, conv: TimeFolded, bn: TimeFolded, binary: bool = True):
        super().__init__()
        self.conv, self.bn, self.binary = conv, bn, bool(binary)

    def forward(self, x: torch.Tensor, start: int = 0) -> torch.Tensor:
        """``start=1``: ``x`` is already the convolution's output (a static input's hoisted encoder)."""
        if start == 1:
            return self.bn(x)
        if not (saves_for_backward(self.conv.layer) and self.bn.layer.training):
            return self.bn(self.conv(x))
        T, B = x.shape[:2]
        return spike_conv_bn(x.flatten(0, 1), self.conv.layer, self.bn.layer, self.binary).unflatten(0, (T, B))
