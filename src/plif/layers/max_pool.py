"""``nn.MaxPool2d`` that runs plif's compiled CPU kernel where it can (:mod:`plif.kernels.cpu_pool`)."""
from __future__ import annotations

import torch
from torch import nn

__all__ = ["MaxPool2d"]


def _one(v) -> int | None:
    """``v`` as one int when it is an int or a pair of equal ints, else ``None``."""
    if isinstance(v, int):
        return v
    if isinstance(v, (tuple, list)) and len(v) == 2 and v[0] == v[1] and isinstance(v[0], int):
        return v[0]
    return None


class MaxPool2d(nn.MaxPool2d):
    """Same module, state dict, values and gradients as ``nn.MaxPool2d``; square windows without
    padding, dilation or ceil mode on a CPU fp32/fp64 ``[N, C, H, W]`` tensor go through the
    compiled kernel (several times faster than PyTorch's on a contiguous tensor), anything else
    through ``nn.MaxPool2d``."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        k, s = _one(self.kernel_size), _one(self.stride)
        plain = (_one(self.padding) == 0 and _one(self.dilation) == 1 and not self.ceil_mode
                 and not self.return_indices and k is not None and s is not None)
        self._ks = (k, s) if plain else None
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
