"""Synaptic layers for binary (spike) inputs: accumulate the weights of active inputs only.

A linear layer fed by spikes computes ``y[r] = sum_{i : s[r, i] = 1} W[:, i]``: no multiplies,
only the weight columns of the inputs that fired are gathered and added.  On CPU this is
``F.embedding_bag(mode="sum")`` over the indices of the active inputs (one "bag" per row),
whose cost grows with the number of spikes instead of the number of inputs.  A convolution is
the same operation on the receptive fields (``F.unfold``), one row per output position.

Named ``Gather*`` / ``gather_*``: ``plif.layers.SpikeLinear`` / ``SpikeConv2d`` are the training
layers that keep their spike inputs as bits for backward, a different thing.

The sums run in a different order than a dense GEMM, so potentials agree to rounding (~1e-6
relative in float32, ~1e-15 in float64), not bit for bit.  Above some spike density the dense
GEMM is faster; ``max_density`` switches to it per call (see ``benchmarks/bench_inference.py``).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .op_counts import is_binary

__all__ = ["gather_linear", "gather_conv2d", "GatherLinear", "GatherConv2d", "gather_form", "check_binary", "DEFAULT_MAX_DENSITY",
           "DEFAULT_MAX_DENSITY_CONV"]

# Crossovers measured on a 2-core CPU (benchmarks/bench_inference.py): a linear layer's gather
# wins below ~6% input density (2.6x at 2.8%, 10x at 0.9%); the unfold-based conv gather lost to
# the oneDNN convolution at every density tried (20x slower at 5%), so it is off by default.
DEFAULT_MAX_DENSITY = 0.06
DEFAULT_MAX_DENSITY_CONV = 0.0


def check_binary(x: torch.Tensor, where: str) -> None:
    """Raise if ``x`` holds anything but 0 and 1 (the gather path would silently drop the values)."""
    if not bool(is_binary(x)):
        bad = x[(x != 0) & (x != 1)].flatten()[0].item()
        raise ValueError(f"{where}: spike-only layer got a non-binary input (value {bad}); "
                         f"it can only follow a spiking layer")


def gather_linear(s: torch.Tensor, weight_t: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``s [R, in]`` binary, ``weight_t [in, out]`` (the transposed Linear weight) -> ``[R, out]``.

    Row ``r`` of the result is the sum of the rows of ``weight_t`` whose input fired.
    """
    active = s != 0
    cols = active.nonzero()[:, 1]
    counts = active.sum(1)
    offsets = counts.cumsum(0) - counts  # where each row's bag of active inputs starts
    y = F.embedding_bag(cols, weight_t, offsets, mode="sum")
    return y if bias is None else y + bias


def gather_conv2d(s: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, stride, padding,
                 chunk: int = 64) -> torch.Tensor:
    """``s [N, C, H, W]`` binary -> ``[N, O, H', W']`` for a conv with ``weight [O, C, k, k]``.

    Each output position gathers the weights of the active inputs in its receptive field;
    ``chunk`` samples are unfolded at a time to bound memory (``C k k`` floats per position).
    """
    O, C, kh, kw = weight.shape
    weight_t = weight.reshape(O, -1).t().contiguous()
    N, _, H, W = s.shape
    Ho = (H + 2 * padding[0] - kh) // stride[0] + 1
    Wo = (W + 2 * padding[1] - kw) // stride[1] + 1
    out = s.new_empty(N, O, Ho, Wo, dtype=weight.dtype)
    for i in range(0, N, chunk):
        cols = F.unfold(s[i:i + chunk], (kh, kw), padding=padding, stride=stride)  # [n, C k k, L]
        n = cols.shape[0]
        y = gather_linear(cols.transpose(1, 2).reshape(n * Ho * Wo, -1), weight_t, bias)
        out[i:i + n] = y.view(n, Ho * Wo, O).transpose(1, 2).reshape(n, O, Ho, Wo)
    return out


def _density(s: torch.Tensor) -> float:
    return float(torch.count_nonzero(s)) / max(1, s.numel())


class GatherLinear(nn.Module):
    """A ``Linear`` for spike inputs ``[..., in]``: gather-accumulate below ``max_density``, GEMM above."""

    def __init__(self, linear: nn.Linear, max_density: float = DEFAULT_MAX_DENSITY, validate: bool = True):
        super().__init__()
        self.weight = nn.Parameter(linear.weight.detach().clone(), requires_grad=False)
        self.bias = None if linear.bias is None else nn.Parameter(linear.bias.detach().clone(), requires_grad=False)
        self.register_buffer("weight_t", self.weight.t().contiguous(), persistent=False)
        self.max_density, self.validate = float(max_density), validate

    @torch.no_grad()
    def forward(self, s: torch.Tensor) -> torch.Tensor:
        if self.validate:
            check_binary(s, "GatherLinear")
        if self.max_density <= 0 or _density(s) > self.max_density:
            return F.linear(s, self.weight, self.bias)
        rows = s.reshape(-1, s.shape[-1])
        return gather_linear(rows, self.weight_t, self.bias).view(*s.shape[:-1], -1)

    def extra_repr(self) -> str:
        return f"{self.weight.shape[1]} -> {self.weight.shape[0]}, gather below density {self.max_density}"


class GatherConv2d(nn.Module):
    """A ``Conv2d`` (groups=1, dilation=1) for spike inputs ``[N, C, H, W]``."""

    def __init__(self, conv: nn.Conv2d, max_density: float = DEFAULT_MAX_DENSITY_CONV, validate: bool = True):
        super().__init__()
        if conv.groups != 1 or conv.dilation != (1, 1) or not isinstance(conv.padding, tuple):
            raise ValueError("GatherConv2d supports groups=1, dilation=1 and integer padding only")
        self.conv = conv
        self.max_density, self.validate = float(max_density), validate

    @torch.no_grad()
    def forward(self, s: torch.Tensor) -> torch.Tensor:
        if self.validate:
            check_binary(s, "GatherConv2d")
        c = self.conv
        if self.max_density <= 0 or _density(s) > self.max_density:
            return c(s)
        return gather_conv2d(s, c.weight, c.bias, c.stride, c.padding)

    def extra_repr(self) -> str:
        return f"gather below density {self.max_density}"


def gather_form(layer: nn.Module, max_density: float | None = None, validate: bool = True) -> nn.Module:
    """The gather-accumulate form of a spike-fed ``nn.Linear`` (:class:`GatherLinear`) or ``nn.Conv2d``
    (:class:`GatherConv2d`); ``max_density`` None takes each one's measured default."""
    if isinstance(layer, nn.Linear):
        return GatherLinear(layer, DEFAULT_MAX_DENSITY if max_density is None else max_density, validate)
    return GatherConv2d(layer, DEFAULT_MAX_DENSITY_CONV if max_density is None else max_density, validate)
