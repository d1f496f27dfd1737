"""The one rule for "the same input at every step": a ``[T, B, ...]`` tensor that is a ``[B, ...]``
tensor repeated over time as a view (stride 0 along T, more than one step).

A static input becomes such frames in one place (:func:`repeat_over_time`: a notation network's
``[B, ...]`` input, a ``--model`` run's static batches, statistics, the NIR check); every place that
runs it once instead of T times asks :func:`repeated_input` (the memory plan's hoisted first layers,
the fused block's repeated convolution output).  Nothing is read: a layout test, no host sync.
"""
from __future__ import annotations

import torch

__all__ = ["repeat_over_time", "repeated_input"]


def repeat_over_time(x: torch.Tensor, T: int) -> torch.Tensor:
    """A static input ``x [B, ...]`` as the ``[T, B, ...]`` frames a network steps through: the same
    sample at every step, as a view (stride 0 along T: nothing is copied)."""
    return x.unsqueeze(0).expand(T, *x.shape)


def repeated_input(x: torch.Tensor) -> torch.Tensor | None:
    """The ``[B, ...]`` tensor that ``x [T, B, ...]`` feeds at every step, else None: ``x`` is a view
    with stride 0 along ``T > 1``, or :func:`repeat_over_time` of a tensor at any ``T`` (one step is
    the same input at every step too: a static input runs as it does at ``T > 1``).  Where ``x`` is
    :func:`repeat_over_time` of a tensor, that tensor (so autograd's gradient reaches it once, not
    through ``T`` copies); otherwise (and under ``torch.compile``, which makes its own views) ``x[0]``."""
    if x.dim() < 2 or (x.shape[0] > 1 and x.stride(0) != 0):
        return None
    base = None if torch.compiler.is_compiling() else x._base
    if (base is not None and base.shape == x.shape[1:] and base.stride() == x.stride()[1:]
            and base.data_ptr() == x.data_ptr()):
        return base
    return x[0] if x.shape[0] > 1 else None
