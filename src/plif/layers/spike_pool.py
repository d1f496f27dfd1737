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
input's, which stays valid when the batch size is symbolic.  Padding, dilation and ceil mode are
not used by the paper's networks and are not supported.
"""
from __future__ import annotations

import torch
from torch import nn

from ..kernels.pool_autograd import pooled_size, register_pool_autograd
from .fold import TimeFolded
from .spike_input import saves_for_backward

__all__ = ["spike_max_pool2d", "SpikeMaxPool2d", "spike_poolable"]


def _offset_dtype(k: int, w: int) -> torch.dtype:
    return torch.int16 if (k - 1) * (w + 1) < 2 ** 15 else torch.int32


def _window_starts(h_out: int, w_out: int, w: int, s: int, device, dtype) -> torch.Tensor:
    """``[h_out, w_out]``: the flat index (``row * w + col``) of each window's top-left element."""
    rows = torch.arange(h_out, device=device, dtype=dtype) * (s * w)
    cols = torch.arange(w_out, device=device, dtype=dtype) * s
    return rows.view(-1, 1) + cols.view(1, -1)


@torch.library.custom_op("plif::spike_max_pool2d", mutates_args=())
def _pool(x: torch.Tensor, k: int, s: int) -> tuple[torch.Tensor, torch.Tensor]:
    out, flat = torch.ops.aten.max_pool2d_with_indices(x, [k, k], [s, s])
    h, w = x.shape[-2:]
    small = h * w < 2 ** 31  # int32 arithmetic is twice as fast and the int64 indices can go at once
    flat = flat.to(torch.int32) if small else flat
    # offset of the chosen element from its window's top-left corner: dy * w + dx, small enough for int16
    offset = flat - _window_starts(out.shape[-2], out.shape[-1], w, s, x.device, flat.dtype)
    return out, offset.to(_offset_dtype(k, w))


@_pool.register_fake
def _(x, k, s):
    shape = (*x.shape[:-2], pooled_size(x.shape[-2], k, s), pooled_size(x.shape[-1], k, s))
    return x.new_empty(shape), x.new_empty(shape, dtype=_offset_dtype(k, x.shape[-1]))


@torch.library.custom_op("plif::spike_max_pool2d_backward", mutates_args=())
def _pool_backward(grad: torch.Tensor, offset: torch.Tensor, h: int, w: int, k: int, s: int) -> torch.Tensor:
    flat = offset.to(torch.int64) + _window_starts(grad.shape[-2], grad.shape[-1], w, s, grad.device, torch.int64)
    like = grad.new_empty((*grad.shape[:-2], h, w))
    # the kernel nn.MaxPool2d's backward uses, so overlapping windows accumulate in the same order
    return torch.ops.aten.max_pool2d_with_indices_backward(grad.contiguous(), like, [k, k], [s, s], [0, 0], [1, 1],
                                                           False, flat)


@_pool_backward.register_fake
def _(grad, offset, h, w, k, s):
    return grad.new_empty((*grad.shape[:-2], h, w))


register_pool_autograd(_pool, _pool_backward)


def spike_max_pool2d(x: torch.Tensor, kernel_size: int, stride: int | None = None) -> torch.Tensor:
    """``x [N, C, H, W]`` -> ``[N, C, H', W']``: max (OR on spikes) over ``k×k`` windows every ``stride``.

    Same values and gradients as ``nn.MaxPool2d(k, stride)`` on any input; the memory kept for
    backward is two bytes per output instead of eight.
    """
    if x.dim() != 4:
        raise ValueError(f"spike_max_pool2d takes [N, C, H, W], got shape {tuple(x.shape)}")
    k, s = int(kernel_size), int(kernel_size if stride is None else stride)
    return _pool(x, k, s)[0]


def spike_poolable(pool: nn.MaxPool2d) -> bool:
    """Whether :class:`SpikeMaxPool2d` takes ``pool``: no padding, dilation or ceil mode (a ResNet stem's
    3x3/2 pool with padding 1 stays an ``nn.MaxPool2d``)."""
    return pool.padding in (0, (0, 0)) and pool.dilation in (1, (1, 1)) and not pool.ceil_mode


class SpikeMaxPool2d(TimeFolded):
    """``[T, B, C, H, W]`` max-pooling with two-byte saved offsets; ``.layer`` stays the
    ``nn.MaxPool2d`` it replaces (same state dict, same exporters)."""

    def __init__(self, pool: nn.MaxPool2d):
        super().__init__(pool)
        k, s = pool.kernel_size, pool.stride
        k, s = (k if isinstance(k, int) else k[0]), (s if isinstance(s, int) else s[0])
        if not spike_poolable(pool):
            raise ValueError("SpikeMaxPool2d supports neither padding, dilation nor ceil_mode")
        self.k, self.s = k, s

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
