"""Triton's interpreter with every load and store checked against the launch's tensor arguments.

The interpreter reads and writes the addresses a kernel computes as they are: an access past the
end of a tensor returns whatever lies there (or is lost), where a GPU may stop with an illegal
address.  :func:`install` (in a process with ``TRITON_INTERPRET=1``) records each unmasked access
that falls outside every tensor the running launch was given; :func:`take` returns and clears them.
"""
from __future__ import annotations

import numpy as np
import torch

_extents: list[tuple[int, int]] = []  # [start, end) in bytes of each tensor argument of the running launch
_kernel: list[str] = [""]
_faults: list[str] = []


def _extent(t: torch.Tensor) -> tuple[int, int]:
    """The bytes ``t`` itself covers (its view, not its whole storage)."""
    if t.numel() == 0:
        return t.data_ptr(), t.data_ptr()
    last = sum((n - 1) * s for n, s in zip(t.shape, t.stride()))
    return t.data_ptr(), t.data_ptr() + (last + 1) * t.element_size()


def _check(kind: str, ptrs, mask, itemsize: int) -> None:
    addr = np.asarray(ptrs.data, dtype=np.uint64)
    live = np.broadcast_to(np.asarray(mask.data, dtype=bool), addr.shape)
    addr = addr[live]
    if addr.size == 0:
        return
    inside = np.zeros(addr.shape, dtype=bool)
    for start, end in _extents:
        inside |= (addr >= start) & (addr + itemsize <= end)
    if not inside.all():
        _faults.append(f"{_kernel[0]}: {kind} of {int((~inside).sum())} element(s) outside every tensor argument")


def install() -> None:
    """Patch the interpreter (idempotent)."""
    from triton.runtime import interpreter as it

    if getattr(it.GridExecutor, "_bounds_checked", False):
        return
    init, load, store = it.GridExecutor._init_args_hst, it.InterpreterBuilder.create_masked_load, \
        it.InterpreterBuilder.create_masked_store

    def init_args(self, args_dev, kwargs):
        args_hst, kwargs_hst = init(self, args_dev, kwargs)
        tensors = [a for a in (*args_hst, *kwargs_hst.values()) if isinstance(a, torch.Tensor)]
        _extents[:] = [_extent(t) for t in tensors]
        _kernel[0] = self.fn.__name__
        return args_hst, kwargs_hst

    def masked_load(self, ptrs, mask, other, cache_policy, is_volatile):
        _check("load", ptrs, mask, np.dtype(it._get_np_dtype(ptrs.get_element_ty())).itemsize)
        return load(self, ptrs, mask, other, cache_policy, is_volatile)

    def masked_store(self, ptrs, value, mask, cache_policy):
        _check("store", ptrs, mask, np.dtype(it._get_np_dtype(ptrs.get_element_ty())).itemsize)
        return store(self, ptrs, value, mask, cache_policy)

    it.GridExecutor._init_args_hst = init_args
    it.InterpreterBuilder.create_masked_load = masked_load
    it.InterpreterBuilder.create_masked_store = masked_store
    it.GridExecutor._bounds_checked = True


def take() -> list[str]:
    """The accesses out of bounds since the last call (each ``kernel: what``, once)."""
    out = sorted(set(_faults))
    _faults.clear()
    return out
