"""A training step's dense bound, measured: the convolutions and matrix products the step computes,
recorded as ATen sees them, then run alone.

A step cannot be faster than the products it must compute, unless it computes fewer of them.  This
records every call of :data:`PRODUCTS` during one real step (a :class:`~torch.utils._python_dispatch.TorchDispatchMode`
sees the calls below autograd and autocast: the fused paths, which call the products directly rather
than through ``nn.Conv2d`` / ``nn.Linear``, the weight and input gradients of backward, the dtypes
autocast gave them), with each tensor argument's shape, strides and dtype and every other argument
as it was.  :func:`replay` then calls the same operations on fresh tensors of those layouts, back
to back: its time is the bound, measured on the same machine by the same library, and
``step time / bound`` is how much the step adds on top of its products (the BatchNorm, neuron,
pool and dropout passes, casts, packing, the optimizer and the per-step overhead).

A convolution of few taps (``plif.layers.few_tap_conv``: few input channels times a small window) is
computed by plif as shifted multiply-adds, not by an ATen product, and is not counted: the bound is
the products ATen computes, a lower bound where such convolutions run.

Values do not change the products' speed, so the replay fills floating tensors with normal noise
(spikes included).  A memory mode that recomputes a convolution in backward makes the step compute
it twice, and the record counts it twice: compare steps of the same ``--memory``.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

__all__ = ["PRODUCTS", "ProductCall", "record_products", "replay", "summarize"]

aten = torch.ops.aten

PRODUCTS = frozenset({aten.convolution, aten.convolution_backward, aten.mm, aten.addmm, aten.bmm, aten.baddbmm,
                      aten.mv, aten.addmv, aten.addbmm, aten.dot, aten.vdot})
"""The operator families that count as the step's products (every overload: ``out=`` ones too)."""


@dataclass(frozen=True)
class TensorLayout:
    """What the replay needs of one tensor argument: a fresh tensor like it, not its values."""

    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: torch.dtype
    device: torch.device

    def fresh(self) -> torch.Tensor:
        """A tensor of this shape and these strides (an expanded one, stride 0, included: the values are
        written into the storage it views, then viewed as the step's tensor was)."""
        extent = 1 + sum((n - 1) * st for n, st in zip(self.shape, self.stride)) if all(self.shape) else 0
        base = torch.empty(extent, dtype=self.dtype, device=self.device)
        base = base.normal_() if base.is_floating_point() else base.zero_()
        return base.as_strided(self.shape, self.stride)


@dataclass(frozen=True)
class ProductCall:
    """One product the step computed: the operator overload, its arguments with each tensor as its
    :class:`TensorLayout`."""

    op: torch._ops.OpOverload
    args: tuple
    kwargs: dict

    @property
    def name(self) -> str:
        return str(self.op.overloadpacket.__name__)

    def shapes(self) -> str:
        tensors = [a for a in (*self.args, *self.kwargs.values()) if isinstance(a, TensorLayout)]
        return " ".join("x".join(map(str, t.shape)) + f":{str(t.dtype).removeprefix('torch.')}" for t in tensors)


def _layout(x):
    return TensorLayout(tuple(x.shape), tuple(x.stride()), x.dtype, x.device) if isinstance(x, torch.Tensor) else x


class _Recorder(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.calls: list[ProductCall] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func.overloadpacket in PRODUCTS:
            self.calls.append(ProductCall(func, tree_map(_layout, tuple(args)), tree_map(_layout, dict(kwargs))))
        return func(*args, **kwargs)


def record_products(step: Callable[[], object]) -> list[ProductCall]:
    """Run ``step`` once (a whole training step: forward, backward, optimizer) and return the
    products it computed, in order."""
    with _Recorder() as rec:
        step()
    return rec.calls


def replay(calls: list[ProductCall]) -> Callable[[], None]:
    """A function that computes ``calls`` again, back to back, on tensors made once here (so the
    timed function allocates only the products' outputs, as the step does)."""
    fresh = lambda a: a.fresh() if isinstance(a, TensorLayout) else a  # noqa: E731
    bound = [(c.op, tree_map(fresh, c.args), tree_map(fresh, c.kwargs)) for c in calls]

    def run() -> None:
        with torch.no_grad():
            for op, args, kwargs in bound:
                op(*args, **kwargs)
    return run


def summarize(calls: list[ProductCall]) -> list[tuple[str, int]]:
    """``(operator and its tensors' shapes, calls per step)``, most frequent first."""
    return Counter(f"{c.name} {c.shapes()}" for c in calls).most_common()
