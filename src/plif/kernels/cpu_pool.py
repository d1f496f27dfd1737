"""Max-pooling on the CPU through the compiled ``cpu_pool.cpp`` (same library as the neuron kernel).

PyTorch's CPU ``max_pool2d_with_indices`` on a contiguous ``[N, C, H, W]`` tensor walks one output
at a time and writes an int64 index per output: on the cpu preset's first pooling layer
(``[256, 32, 28, 28]`` fp32) it took 11.8 ms of a 96 ms training step, and the forward-only
``max_pool2d`` of evaluation 26 ms (one thread, this 2-core AMD EPYC, torch 2.13.0+cpu).  The
kernel here picks the same element (the first maximum of the window row by row, the last NaN if
any), keeps a one-byte place in the window for backward instead of the int64 index, and writes
``∂x`` in one pass, so values and gradients are bit-identical to ``nn.MaxPool2d``.

``plif::cpu_max_pool2d`` and its backward are ``torch.library`` custom operators with fake
implementations, so ``torch.compile(fullgraph=True)`` traces through them.
"""
from __future__ import annotations

import torch
from torch import Tensor

from .cpu_build import load_library
from .pool_autograd import pooled_size, register_pool_autograd

__all__ = ["cpu_pool_supports", "max_pool2d_cpu", "kernel_loaded", "MAX_KERNEL"]

_SUFFIX = {torch.float32: "f32", torch.float64: "f64"}
MAX_KERNEL = 16  # the place in a k×k window must fit one byte
_loaded: bool | None = None


def kernel_loaded() -> bool:
    """Whether the compiled library is here (built on the first call, which layers make when they
    are built); cached, so a compiled forward only reads a flag (inside a ``torch.compile`` trace
    it is never loaded: a library not loaded yet counts as absent there)."""
    global _loaded
    if _loaded is None:
        if torch.compiler.is_compiling():
            return False
        _loaded = load_library() is not None
    return _loaded


@torch.library.custom_op("plif::cpu_max_pool2d", mutates_args=())
def _pool(x: Tensor, k: int, s: int) -> tuple[Tensor, Tensor]:
    x = x.contiguous()
    n, c, h, w = x.shape
    out = x.new_empty((n, c, pooled_size(h, k, s), pooled_size(w, k, s)))
    place = torch.empty(out.shape, dtype=torch.uint8)
    getattr(load_library(), f"plif_max_pool_forward_{_SUFFIX[x.dtype]}")(
        x.data_ptr(), out.data_ptr(), place.data_ptr(), n * c, h, w, k, s, torch.get_num_threads())
    return out, place


@_pool.register_fake
def _(x, k, s):
    shape = (*x.shape[:2], pooled_size(x.shape[2], k, s), pooled_size(x.shape[3], k, s))
    return x.new_empty(shape), x.new_empty(shape, dtype=torch.uint8)


@torch.library.custom_op("plif::cpu_max_pool2d_backward", mutates_args=())
def _pool_backward(grad: Tensor, place: Tensor, h: int, w: int, k: int, s: int) -> Tensor:
    grad = grad.contiguous()
    n, c = grad.shape[:2]
    g_x = grad.new_empty((n, c, h, w))
    getattr(load_library(), f"plif_max_pool_backward_{_SUFFIX[grad.dtype]}")(
        grad.data_ptr(), place.data_ptr(), g_x.data_ptr(), n * c, h, w, k, s, torch.get_num_threads())
    return g_x


@_pool_backward.register_fake
def _(grad, place, h, w, k, s):
    return grad.new_empty((*grad.shape[:2], h, w))


register_pool_autograd(_pool, _pool_backward)


def cpu_pool_supports(x: Tensor, k: int, s: int) -> bool:
    """The kernel takes ``x [N, C, H, W]`` on the CPU in fp32/fp64 (not channels-last, which
    PyTorch's own kernel vectorises) with ``1 <= k <= 16``, ``s >= 1`` and ``H, W >= k``."""
    if x.device.type != "cpu" or x.dtype not in _SUFFIX or x.dim() != 4 or not 1 <= k <= MAX_KERNEL or s < 1:
        return False
    if x.shape[2] < k or x.shape[3] < k or x.numel() == 0:
        return False
    if not x.is_contiguous() and x.is_contiguous(memory_format=torch.channels_last):
        return False
    return kernel_loaded()


def max_pool2d_cpu(x: Tensor, k: int, s: int) -> Tensor:
    """``x [N, C, H, W]`` -> max over ``k×k`` windows every ``s`` (no padding): the values and
    gradients of ``F.max_pool2d(x, k, s)``.  Check :func:`cpu_pool_supports` first."""
    return _pool(x, k, s)[0]
