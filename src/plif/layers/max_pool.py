"""``nn.MaxPool2d`` that runs plif's compiled CPU kernel where it can (:mod:`plif.kernels.cpu_pool`)."""
from __future__ import annotations

import torch
from torch import nn

from .pool_rule import max_pool_rule

__all__ = ["MaxPool2d"]


class MaxPool2d(nn.MaxPool2d):
    """Same module, state dict, values and gradients as ``nn.MaxPool2d``; square windows and strides
    without padding, dilation or ceil mode (:func:`~plif.layers.pool_rule.max_pool_rule`) on a CPU
    fp32/fp64 ``[N, C, H, W]`` tensor go through the compiled kernel (several times faster than
    PyTorch's on a contiguous tensor), anything else through ``nn.MaxPool2d``."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        rule = max_pool_rule(self)
        plain = rule.kernel == ""
        self._ks = (rule.window[0], rule.stride[0]) if plain else None
        if plain:
            from ..kernels.cpu_pool import kernel_loaded

            kernel_loaded()  # load the library now, never inside a torch.compile trace

    def uses_kernel(self, x: torch.Tensor) -> bool:
        """Whether ``forward(x)`` (``x [N, C, H, W]``) runs the compiled kernel, which keeps one byte
        per output for backward."""
        if self._ks is None:
            return False
        from ..kernels.cpu_pool import cpu_pool_supports

        return cpu_pool_supports(x, *self._ks)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.uses_kernel(x):
            from ..kernels.cpu_pool import max_pool2d_cpu

            return max_pool2d_cpu(x, *self._ks)
        return super().forward(x)
