"""BatchNorm nodes of a NIR file: how plif writes BN, how its importer computes such a node exactly,
and whether torch's convolution (what Norse builds from it) computes it as BatchNorm on this machine.

plif writes an eval-mode BatchNorm ``[C, H, W]`` as a 1x1 ``Conv2d`` of weight ``diag(α)`` and
bias ``β`` (:func:`~.bn_folding.bn_scale_shift`), which NIR's importers build from the nodes they
know (NIR 1.0.8 has no BatchNorm node, and every importer ignores a convolution's ``groups``).
BatchNorm computes ``fma(x, α, β)``, one rounding.  A convolution computes it so only where its
accumulator starts at the bias: torch's oneDNN 1x1 kernel does that for the input channels of its
first block over channels and adds the later blocks' sums to that afterwards, one rounding more,
and it picks those blocks from the width, the frame size and the CPU's caches (measured on the
2-core AMD EPYC with AVX-512, torch 2.13.0: 8 to 64 channels at every frame size tried, 128 and 256
channels on 8x8 frames, in one block; 96 channels on 16x16 frames, 128 and 256 from 16x16 up, not).
No node that Norse 1.1.0 builds (``Conv2d``, ``Affine`` = ``nn.Linear``, ``LIF`` whose ``v_leak``
is added after the product) computes ``fma(x, α, β)`` otherwise.  So:

- plif's importer recognises the node (:func:`bn_form`) and computes it through torch's own
  BatchNorm kernel (:class:`ChannelAffine`), the trained network's operation: exact at every width;
- :func:`conv_channels_off` measures, on the machine it runs on, how many of a node's channels
  torch's convolution, built as Norse builds it, computes otherwise (``plif export`` and ``--check``
  say what it found for Norse).
"""
from __future__ import annotations

import hashlib

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["bn_form", "ChannelAffine", "conv_channels_off", "MAX_MEASURED", "CANDIDATES"]

# the most input values conv_channels_off runs through one node (2 samples of [C, H, W]): 256 MiB of float32
MAX_MEASURED = 2 ** 26
# candidate inputs per channel among which conv_channels_off picks those where one rounding more shows
CANDIDATES = 1024


def bn_form(node) -> tuple[np.ndarray, np.ndarray] | None:
    """``(α, β)`` float32 ``[C]`` if ``node`` is a per-channel scale and shift written as a NIR
    ``Conv2d`` (a ``[C, C, 1, 1]`` weight, zero off the diagonal, stride 1, no padding, one group:
    how plif writes BatchNorm), else None."""
    if type(node).__name__ != "Conv2d" or isinstance(node.padding, str):
        return None
    w = np.asarray(node.weight)
    if w.ndim != 4 or w.shape[2:] != (1, 1) or w.shape[0] != w.shape[1] or int(node.groups) != 1:
        return None
    if np.any(np.asarray(node.stride) != 1) or np.any(np.asarray(node.padding) != 0):
        return None
    m = w[:, :, 0, 0]
    alpha = np.diag(m).astype(np.float32)
    if np.any(m - np.diag(np.diag(m))):
        return None
    return alpha, np.asarray(node.bias, dtype=np.float32).reshape(-1)


class ChannelAffine(nn.Module):
    """``x α + β`` per channel of ``x [N, C, ...]`` through torch's BatchNorm kernel in eval mode,
    with mean 0, variance 1 and ε 0: its own scale and shift (``1/√(1+0) · α`` and ``β − 0 · α``)
    are then exactly ``α`` and ``β``, so it computes what the trained BatchNorm computes with the
    ``α``, ``β`` of :func:`~.bn_folding.bn_scale_shift`: bit for bit, at every width."""

    def __init__(self, alpha, beta):
        super().__init__()
        self.register_buffer("alpha", torch.as_tensor(np.asarray(alpha, dtype=np.float32)))
        self.register_buffer("beta", torch.as_tensor(np.asarray(beta, dtype=np.float32)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = self.alpha.to(x.dtype), self.beta.to(x.dtype)
        return F.batch_norm(x, torch.zeros_like(a), torch.ones_like(a), a, b, False, 0.0, 0.0)


_measured: dict[bytes, int] = {}  # conv_channels_off's answers, by node and shape


def _telling_inputs(alpha: np.ndarray, beta: np.ndarray, n: int) -> np.ndarray:
    """``[C, n]`` float32 inputs, for each channel ones at which ``x α + β`` rounded once (BatchNorm)
    and rounded twice (the product, then the sum: a convolution that adds the bias after the
    product) differ: the first 8 such of :data:`CANDIDATES` normal values scaled by ``|β/α|``
    (product and bias of one size: about a fifth of them differ), repeated; plain candidates where
    fewer differ (none where ``α = 0`` or ``β = 0``: both roundings give ``β`` or ``α x`` there)."""
    with np.errstate(all="ignore"):
        ratio = np.abs(beta.astype(np.float64) / alpha)
    scale = np.where(np.isfinite(ratio) & (ratio > 0), np.clip(ratio, 2.0 ** -60, 2.0 ** 60), 1.0)
    cand = (np.random.default_rng(0).standard_normal((alpha.size, CANDIDATES)) * scale[:, None]).astype(np.float32)
    a, b = alpha[:, None], beta[:, None]
    once = (cand.astype(np.float64) * a + b).astype(np.float32)  # the product is exact in float64
    twice = cand * a + b  # float32: the product rounded, then the sum
    order = np.argsort(once == twice, axis=1, kind="stable")  # per channel, those that differ first
    first = np.take_along_axis(cand, order, axis=1)[:, :8]
    return np.tile(first, (1, -(-n // first.shape[1])))[:, :n]


@torch.no_grad()
def conv_channels_off(node, shape: tuple | None) -> int | None:
    """How many channels of a :func:`bn_form` ``node`` on input ``shape`` ``[C, H, W]`` torch's
    ``Conv2d``, built from the node as Norse builds it, computes otherwise than :class:`ChannelAffine`
    (BatchNorm) on this machine: float32, with the threads torch has, at batch 2 (at batch 1, on
    inputs of at most 20480 values, torch runs its own GEMM, which adds the bias after the product),
    on inputs where one rounding more shows (:func:`_telling_inputs`).  None where the shape is
    unknown or the node larger than :data:`MAX_MEASURED` (not measured).  The answer is kept per
    node and shape."""
    form = bn_form(node)
    if form is None or shape is None or len(shape) != 3 or 2 * int(np.prod(shape)) > MAX_MEASURED:
        return None
    key = hashlib.sha1(np.asarray(node.weight, dtype=np.float32).tobytes() + form[1].tobytes()
                       + repr((tuple(shape), np.asarray(node.dilation).tolist())).encode()).digest()
    if key not in _measured:
        alpha, beta = form
        c, h, w = shape
        x = torch.as_tensor(_telling_inputs(alpha, beta, 2 * h * w)).reshape(c, 2, h, w).transpose(0, 1)
        x = x.contiguous()
        weight = torch.as_tensor(np.asarray(node.weight, dtype=np.float32))
        dilation = tuple(int(d) for d in np.broadcast_to(np.asarray(node.dilation), (2,)))
        conv = F.conv2d(x, weight, torch.as_tensor(beta), dilation=dilation)
        _measured[key] = int((conv != ChannelAffine(alpha, beta)(x)).any(3).any(2).any(0).sum())
    return _measured[key]
