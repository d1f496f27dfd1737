"""Max-pooling of spikes that saves a two-byte window offset instead of int64 indices.

On binary spikes max-pooling is an OR over each window.  ``nn.MaxPool2d`` keeps an int64 index
per output for backward (8 bytes, twice the fp32 input's size per element for k2s2); here each
output keeps the offset of its chosen element from its window's corner, ``dy * W + dx``, as
``int16`` (2 bytes; ``int32`` for rows wider than 32767/(k-1)).  A one-byte ``dy * k + dx`` would
need an integer division per output in forward and backward, which cost more time than the byte
saves memory (measured: about 0.25 s of a 1.3 s DVS128 Gesture step).
The choice is ``nn.MaxPool2d``'s own (the first maximal element of the window, row by row), and
backward scatters the gradient through the same kernel, so gradients are bit-identical to
``nn.MaxPool2d`` on the same input, overlapping windows included.

The forward and backward are ``torch.library`` custom ops with fake implementations, so
``torch.compile(fullgraph=True)`` sees one opaque op whose output shape is a formula of the
input's, which stays valid when the batch size is symbolic.  Windows and strides may be rectangular;
padding, dilation and ceil mode are not used by the paper's networks and are not supported (such a
pool runs as written: :func:`~plif.layers.pool_rule.max_pool_rule`).
"""
from __future__ import annotations

import torch
from torch import nn

from ..kernels.pool_autograd import pooled_size, register_pool_autograd
from .fold import TimeFolded
from .pool_rule import max_pool_rule
from .spike_input import saves_for_backward

__all__ = ["spike_max_pool2d", "SpikeMaxPool2d", "spike_poolable"]


def _offset_dtype(k: list[int], w: int) -> torch.dtype:
    """The dtype of an offset ``dy * w + dx`` within a ``k = [kh, kw]`` window of rows ``w`` wide."""
    return torch.int16 if (k[0] - 1) * w + k[1] - 1 < 2 ** 15 else torch.int32


def _window_starts(h_out: int, w_out: int, w: int, s: list[int], device, dtype) -> torch.Tensor:
    """``[h_out, w_out]``: the flat index (``row * w + col``) of each window's top-left element."""
    rows = torch.arange(h_out, device=device, dtype=dtype) * (s[0] * w)
    cols = torch.arange(w_out, device=device, dtype=dtype) * s[1]
    return rows.view(-1, 1) + cols.view(1, -1)


@torch.library.custom_op("plif::spike_max_pool2d", mutates_args=())
def _pool(x: torch.Tensor, k: list[int], s: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    out, flat = torch.ops.aten.max_pool2d_with_indices(x, list(k), list(s))
    h, w = x.shape[-2:]
    small = h * w < 2 ** 31  # int32 arithmetic is twice as fast and the int64 indices can go at once
    flat = flat.to(torch.int32) if small else flat
    # offset of the chosen element from its window's top-left corner: dy * w + dx, small enough for int16
    offset = flat - _window_starts(out.shape[-2], out.shape[-1], w, s, x.device, flat.dtype)
    return out, offset.to(_offset_dtype(k, w))


@_pool.register_fake
def _(x, k, s):
    shape = (*x.shape[:-2], pooled_size(x.shape[-2], k[0], s[0]), pooled_size(x.shape[-1], k[1], s[1]))
    return x.new_empty(shape), x.new_empty(shape, dtype=_offset_dtype(k, x.shape[-1]))


@torch.library.custom_op("plif::spike_max_pool2d_backward", mutates_args=())
def _pool_backward(grad: torch.Tensor, offset: torch.Tensor, h: int, w: int, k: list[int],
                   s: list[int]) -> torch.Tensor:
    flat = offset.to(torch.int64) + _window_starts(grad.shape[-2], grad.shape[-1], w, s, grad.device, torch.int64)
    like = grad.new_empty((*grad.shape[:-2], h, w))
    # the kernel nn.MaxPool2d's backward uses, so overlapping windows accumulate in the same order
    return torch.ops.aten.max_pool2d_with_indices_backward(grad.contiguous(), like, list(k), list(s), [0, 0], [1, 1],
                                                           False, flat)


@_pool_backward.register_fake
def _(grad, offset, h, w, k, s):
    return grad.new_empty((*grad.shape[:-2], h, w))


register_pool_autograd(_pool, _pool_backward)


def _pair(v, name: str) -> list[int]:
    pair = [v, v] if isinstance(v, int) else list(v) if isinstance(v, (tuple, list)) else None
    ok = pair is not None and len(pair) == 2
    if not ok or not all(isinstance(e, int) and not isinstance(e, bool) and e >= 1 for e in pair):
        raise ValueError(f"spike_max_pool2d: {name} takes a positive int or a pair of them, got {v!r}")
    return pair


def spike_max_pool2d(x: torch.Tensor, kernel_size, stride=None) -> torch.Tensor:
    """``x [N, C, H, W]`` -> ``[N, C, H', W']``: max (OR on spikes) over ``kernel_size`` windows (an int
    or ``(kh, kw)``) every ``stride`` (likewise; default: the window), no padding.

    Same values and gradients as ``nn.MaxPool2d(kernel_size, stride)`` on any input; the memory kept
    for backward is two bytes per output instead of eight.
    """
    if x.dim() != 4:
        raise ValueError(f"spike_max_pool2d takes [N, C, H, W], got shape {tuple(x.shape)}")
    k = _pair(kernel_size, "kernel_size")
    return _pool(x, k, k if stride is None else _pair(stride, "stride"))[0]


def spike_poolable(pool: nn.MaxPool2d) -> bool:
    """Whether :class:`SpikeMaxPool2d` takes ``pool`` (:func:`~plif.layers.pool_rule.max_pool_rule`:
    any window and stride; no padding, dilation, ceil mode or indices: a ResNet stem's 3x3/2 pool with
    padding 1 stays an ``nn.MaxPool2d``)."""
    return max_pool_rule(pool).spike == ""


class SpikeMaxPool2d(TimeFolded):
    """``[T, B, C, H, W]`` max-pooling with two-byte saved offsets; ``.layer`` stays the
    ``nn.MaxPool2d`` it replaces (same state dict, same exporters)."""

    def __init__(self, pool: nn.MaxPool2d):
        super().__init__(pool)
        rule = max_pool_rule(pool)
        if rule.spike:
            raise ValueError(f"SpikeMaxPool2d does not take this pool: {rule.spike}")
        self.k, self.s = list(rule.window), list(rule.stride)

    def _plain_is_smaller(self, x: torch.Tensor) -> bool:
        """plif's :class:`~plif.layers.max_pool.MaxPool2d` on the CPU runs the compiled kernel, which keeps
        one byte per output (this op keeps two) and is faster: the plain layer is then the saving."""
        uses_kernel = getattr(self.layer, "uses_kernel", None)  # a plain nn.MaxPool2d has none
        return uses_kernel is not None and uses_kernel(x.flatten(0, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # nothing is kept for backward (the plain pool, as the other saving layers do), or the plain
        # CPU kernel keeps less than this op would
        if not saves_for_backward(self.layer) or self._plain_is_smaller(x):
            return super().forward(x)
        T, B = x.shape[:2]
        return spike_max_pool2d(x.flatten(0, 1), self.k, self.s).unflatten(0, (T, B))

    def extra_repr(self) -> str:
        return "time folded into batch, two-byte saved offsets"
