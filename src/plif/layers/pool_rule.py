"""The one rule for a max-pool: which of plif's pooling paths may run a given ``nn.MaxPool2d``.

Three paths pool spikes faster or with less memory than ``nn.MaxPool2d`` and each takes fewer
pools than it does:

- the spike pool (:class:`~plif.layers.spike_pool.SpikeMaxPool2d`, two-byte saved offsets): any
  window and stride, rectangular included, without padding, dilation, ceil mode or indices;
- the compiled CPU kernel (:class:`~plif.layers.max_pool.MaxPool2d`): as the spike pool, square
  windows and strides only (the kernel's place in a window is one byte of a ``k×k`` window);
- the fused block (:mod:`plif.layers.fused_block`): 2×2 windows every 2 only (its kernels hard-code it).

:func:`max_pool_rule` answers for all three, once per module at plan time (never per forward);
a pool a path does not take runs as written there, and the reason is what ``plif.fuse(...,
explain=True)`` says.
"""
from __future__ import annotations

from dataclasses import dataclass

from torch import nn

__all__ = ["PoolRule", "max_pool_rule"]


def _pair(v) -> tuple[int, int] | None:
    """``v`` (an int or a pair of ints, as ``nn.MaxPool2d`` keeps them) as a pair, else ``None``."""
    if isinstance(v, int) and not isinstance(v, bool):
        return v, v
    if isinstance(v, (tuple, list)) and len(v) == 2 and all(isinstance(e, int) and not isinstance(e, bool) for e in v):
        return int(v[0]), int(v[1])
    return None


@dataclass(frozen=True)
class PoolRule:
    """What plif's pooling paths make of one max-pool: its ``window`` and ``stride`` as ``(h, w)``
    pairs (``None`` where they are not plain ints), and for each path the reason it does not take
    the pool (``""``: it does)."""

    window: tuple[int, int] | None
    stride: tuple[int, int] | None
    spike: str
    kernel: str
    fused: str


def max_pool_rule(pool: nn.Module) -> PoolRule:
    """The :class:`PoolRule` of ``pool`` (an ``nn.MaxPool2d``, plif's ``MaxPool2d`` included; anything
    else is taken by no path).  Pure: it reads the module's settings only."""
    if not isinstance(pool, nn.MaxPool2d):
        why = f"a {type(pool).__name__}, not an nn.MaxPool2d"
        return PoolRule(None, None, why, why, why)
    window, stride = _pair(pool.kernel_size), _pair(pool.kernel_size if pool.stride is None else pool.stride)
    padding, dilation = _pair(pool.padding), _pair(pool.dilation)
    if window is None or stride is None or min(*window, *stride) < 1:
        why = "its window or stride is not one or two positive ints"
    elif padding != (0, 0):
        why = f"it pads (padding={pool.padding})"
    elif dilation != (1, 1):
        why = f"it dilates (dilation={pool.dilation})"
    elif pool.ceil_mode:
        why = "it rounds its output size up (ceil_mode=True)"
    elif pool.return_indices:
        why = "it returns indices (return_indices=True)"
    else:
        why = ""
    spike = why
    kernel = why or ("" if window[0] == window[1] and stride[0] == stride[1] else
                     f"its window or stride is not square ({window[0]}×{window[1]} every {stride})")
    fused = why or ("" if window == (2, 2) and stride == (2, 2) else
                    f"only 2×2 windows every 2 fuse (this one: {window[0]}×{window[1]} windows every "
                    f"{stride[0] if stride[0] == stride[1] else stride})")
    return PoolRule(window, stride, spike, kernel, fused)
