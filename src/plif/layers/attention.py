"""The spiking transformers' attention over time-first tokens ``[T, B, C, L]`` (``C`` channels, ``L`` tokens)
or feature maps ``[T, B, C, H, W]``: the products of spikes as pure functions, and the three attention
layers built from plif's own layers (:class:`~plif.layers.TimeFolded` 1x1 convolutions and BatchNorm,
plif neurons).

Heads split the channels: ``[T, B, C, L] -> [T, B, heads, C/heads, L]``, channel-first as SpikingJelly
2.0 lays them out (its ``layer.attention``), so each formula below is written for one head's
``q, k, v [d, L]`` (``d = C/heads`` channels, ``L`` tokens); ``Q = qᵀ`` is the token-first matrix
the papers write.

- Spikformer's spiking self-attention (Zhou et al., "Spikformer: When Spiking Neural Network Meets
  Transformer", ICLR 2023, Eq. 4-6): ``SSA' = SN(Q Kᵀ V · s)`` with ``s = 0.125``, computed as
  ``(v kᵀ) q · s = (Q Kᵀ V)ᵀ · s`` (no softmax: the products of spikes are counts);
- QKFormer's Q-K attention (Zhou et al., "QKFormer: Hierarchical Spiking Transformer using Q-K
  Attention", NeurIPS 2024, Eq. 5-8): a spiking mask from ``q``'s sum over a head's channels (token
  attention, one bit per token) or over the tokens (channel attention, one bit per channel), times
  ``k``;
- the Spike-driven Transformer's self-attention (Yao et al., "Spike-driven Transformer",
  NeurIPS 2023, Eq. 8-10): ``q ⊗ SN(Σ_tokens k ⊗ v)``, a spiking mask per channel, times ``q``.

The layers keep SpikingJelly's module names, so :func:`plif.from_spikingjelly` maps its
``SpikingSelfAttention``, ``QKAttention`` and ``SpikeDrivenSelfAttention`` onto these with the same
``state_dict`` keys (plus the time wrappers' ``.layer``).
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from ..neurons import LIF
from .fold import TimeFolded

__all__ = ["spiking_self_attention", "qk_attention_input", "spike_driven_attention_input", "split_heads",
           "SpikingSelfAttention", "QKAttention", "SpikeDrivenSelfAttention", "transformer_lif", "conv_bn_1d",
           "QKA_AXES"]

QKA_AXES = {"token": -2, "channel": -1}
"""Q-K attention's kinds: the dim of ``q [..., d, L]`` its mask sums over (channels: one bit per token;
tokens: one bit per channel)."""


def split_heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    """``[T, B, C, L] -> [T, B, heads, C/heads, L]`` (a view)."""
    return x.unflatten(2, (heads, x.shape[2] // heads))


def spiking_self_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """Spikformer's ``Q Kᵀ V · s`` for channel-first heads ``q, k, v [..., d, L]``, as ``(v kᵀ) q · s``
    (``[..., d, L]``; the ``d x d`` product first, the order SpikingJelly computes in)."""
    return v @ k.transpose(-2, -1) @ q * scale


def qk_attention_input(q: torch.Tensor, kind: str) -> torch.Tensor:
    """What Q-K attention's mask neuron charges with: ``q [..., d, L]`` summed over a head's channels
    (``kind="token"``: ``[..., 1, L]``) or over the tokens (``"channel"``: ``[..., d, 1]``)."""
    return q.sum(dim=QKA_AXES[kind], keepdim=True)


def spike_driven_attention_input(k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """What the Spike-driven Transformer's mask neuron charges with: ``Σ_tokens k ⊗ v`` for token-first
    heads ``k, v [..., L, d]`` (``[..., 1, d]``)."""
    return (k * v).sum(dim=-2, keepdim=True)


def transformer_lif(v_threshold: float = 1.0) -> LIF:
    """The spiking transformers' neuron as their code builds it by default (SpikingJelly's ``LIFNode``):
    LIF with ``τ = 2``, hard reset to 0, the reset detached, SpikingJelly's sigmoid surrogate (α = 4)."""
    return LIF(tau=2.0, v_threshold=v_threshold, detach_reset=True, surrogate="sigmoid", alpha=4.0)


def conv_bn_1d(cin: int, cout: int, bias: bool = False) -> nn.Sequential:
    """A time-folded 1x1 ``Conv1d`` over tokens then ``BatchNorm1d``: ``[T, B, cin, L] -> [T, B, cout, L]``."""
    return nn.Sequential(TimeFolded(nn.Conv1d(cin, cout, 1, bias=bias)), TimeFolded(nn.BatchNorm1d(cout)))


def _check_heads(dim: int, heads: int) -> None:
    if isinstance(heads, bool) or not isinstance(heads, int) or heads < 1 or dim % heads:
        raise ValueError(f"num_heads must be a positive integer dividing dim {dim}, got {heads!r}")


def _tokens(x: torch.Tensor, name: str) -> None:
    if x.dim() != 4:
        raise ValueError(f"{name} takes tokens [T, B, C, L], got a tensor of shape {list(x.shape)}")


Neuron = Callable[[], nn.Module]


class SpikingSelfAttention(nn.Module):
    """Spikformer's spiking self-attention over tokens ``x [T, B, dim, L] -> [T, B, dim, L]``:

    ``q, k, v = SN(BN(Conv1d(x)))`` (one 1x1 convolution to ``3·dim`` channels), per head
    ``SN_attn((v kᵀ) q · scale)`` (:func:`spiking_self_attention`), then ``SN(BN(Conv1d(.)))``.

    neuron: makes each neuron layer (default :func:`transformer_lif`); attn_neuron: the attention's
    (default the same with threshold 0.5, as Spikformer's code has it).
    """

    def __init__(self, dim: int, num_heads: int = 8, *, scale: float = 0.125, neuron: Neuron | None = None,
                 attn_neuron: Neuron | None = None):
        super().__init__()
        _check_heads(dim, num_heads)
        neuron = neuron or transformer_lif
        self.dim, self.num_heads, self.scale = dim, num_heads, float(scale)
        self.qkv_conv_bn = conv_bn_1d(dim, 3 * dim)
        self.qkv_lif = neuron()
        self.attn_lif = (attn_neuron or (lambda: transformer_lif(0.5)))()
        self.proj_conv_bn = conv_bn_1d(dim, dim)
        self.proj_lif = neuron()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _tokens(x, "SpikingSelfAttention")
        qkv = self.qkv_lif(self.qkv_conv_bn(x))
        q, k, v = (split_heads(part, self.num_heads) for part in qkv.chunk(3, dim=2))
        x = self.attn_lif(spiking_self_attention(q, k, v, self.scale)).flatten(2, 3)
        return self.proj_lif(self.proj_conv_bn(x))

    def extra_repr(self) -> str:
        return f"dim={self.dim}, num_heads={self.num_heads}, scale={self.scale}"


class QKAttention(nn.Module):
    """QKFormer's Q-K attention over tokens ``x [T, B, dim, L] -> [T, B, dim, L]``:

    ``q, k = SN(BN(Conv1d(x)))`` (one 1x1 convolution to ``2·dim`` channels), per head
    ``SN_attn(Σ q) ⊗ k`` (:func:`qk_attention_input`; ``kind`` "token" or "channel"), then
    ``SN(BN(Conv1d(.)))``.  neuron, attn_neuron: as :class:`SpikingSelfAttention`'s.
    """

    def __init__(self, dim: int, num_heads: int = 8, kind: str = "token", *, neuron: Neuron | None = None,
                 attn_neuron: Neuron | None = None):
        super().__init__()
        _check_heads(dim, num_heads)
        if kind not in QKA_AXES:
            raise ValueError(f"kind must be 'token' or 'channel', got {kind!r}")
        neuron = neuron or transformer_lif
        self.dim, self.num_heads, self.kind = dim, num_heads, kind
        self.qk_conv_bn = conv_bn_1d(dim, 2 * dim)
        self.qk_lif = neuron()
        self.attn_lif = (attn_neuron or (lambda: transformer_lif(0.5)))()
        self.proj_conv_bn = conv_bn_1d(dim, dim)
        self.proj_lif = neuron()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _tokens(x, "QKAttention")
        q, k = (split_heads(part, self.num_heads) for part in self.qk_lif(self.qk_conv_bn(x)).chunk(2, dim=2))
        x = (self.attn_lif(qk_attention_input(q, self.kind)) * k).flatten(2, 3)
        return self.proj_lif(self.proj_conv_bn(x))

    def extra_repr(self) -> str:
        return f"dim={self.dim}, num_heads={self.num_heads}, kind={self.kind}"


class SpikeDrivenSelfAttention(nn.Module):
    """The Spike-driven Transformer's self-attention over feature maps ``x [T, B, dim, H, W]`` (same shape
    out), with its shortcut: ``s = SN(x)``; ``q, k, v = SN(BN(Conv2d_1x1(s)))`` each; per head
    ``q ⊗ SN_attn(Σ_tokens k ⊗ v)`` (:func:`spike_driven_attention_input`); then
    ``BN(Conv2d_1x1(.)) + x`` (the projection has a bias, no neuron).
    neuron, attn_neuron: as :class:`SpikingSelfAttention`'s.
    """

    def __init__(self, dim: int, num_heads: int = 8, *, neuron: Neuron | None = None,
                 attn_neuron: Neuron | None = None):
        super().__init__()
        _check_heads(dim, num_heads)
        neuron = neuron or transformer_lif
        self.dim, self.num_heads = dim, num_heads
        self.shortcut_lif = neuron()
        for name in "qkv":
            self.add_module(f"{name}_conv", TimeFolded(nn.Conv2d(dim, dim, 1, bias=False)))
            self.add_module(f"{name}_bn", TimeFolded(nn.BatchNorm2d(dim)))
            self.add_module(f"{name}_lif", neuron())
        self.attn_lif = (attn_neuron or (lambda: transformer_lif(0.5)))()
        self.proj_conv = TimeFolded(nn.Conv2d(dim, dim, 1))
        self.proj_bn = TimeFolded(nn.BatchNorm2d(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 5:
            raise ValueError(f"SpikeDrivenSelfAttention takes feature maps [T, B, C, H, W], got {list(x.shape)}")
        s = self.shortcut_lif(x)
        q, k, v = (self._heads(lif(bn(conv(s))))
                   for conv, bn, lif in ((self.q_conv, self.q_bn, self.q_lif), (self.k_conv, self.k_bn, self.k_lif),
                                         (self.v_conv, self.v_bn, self.v_lif)))
        out = q * self.attn_lif(spike_driven_attention_input(k, v))  # [T, B, heads, HW, d]
        out = out.transpose(3, 4).reshape(x.shape)
        return self.proj_bn(self.proj_conv(out)) + x

    def _heads(self, y: torch.Tensor) -> torch.Tensor:
        """``[T, B, C, H, W] -> [T, B, heads, H·W, C/heads]``, token-first."""
        return split_heads(y.flatten(3), self.num_heads).transpose(-1, -2)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, num_heads={self.num_heads}"
