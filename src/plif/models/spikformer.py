"""plif's spiking transformer: Spikformer, written with plif's layers (no SpikingJelly import).

Zhou et al., "Spikformer: When Spiking Neural Network Meets Transformer", ICLR 2023: a spiking patch
splitting stem (SPS, Sec. 3.2), ``depth`` encoder blocks of spiking self-attention (SSA, Sec. 3.3, Eq. 4-6;
:class:`plif.layers.SpikingSelfAttention`) and an MLP, each added to its input (Eq. 2-3), global average
pooling over the tokens and a linear head.  As SpikingJelly 2.0's ``activation_based.model.spikformer``
builds it, module for module and name for name (so a SpikingJelly ``Spikformer`` converted by
:func:`plif.from_spikingjelly` and this one hold the same ``state_dict`` keys and, given the same
weights, compute the same outputs):

- stem: four ``3x3 conv - BN [- 3x3/2 max-pool] - LIF`` stages of ``width/8, /4, /2, width`` channels,
  pooling in the last two (``patch_size=4``, CIFAR: 32x32 -> 8x8 tokens) or all four
  (``patch_size=16``, ImageNet), then the relative position embedding ``x + LIF(BN(conv3x3(x)))``;
- block: ``x + SSA(x)``, then ``x + MLP(x)`` with ``MLP = LIF(BN(Conv1d(LIF(BN(Conv1d(x))))))`` of
  ``mlp_ratio · width`` hidden channels, on the tokens ``[T, B, width, H·W]``;
- head: the mean over the tokens, then a linear layer with bias at every time-step (``[T, B, classes]``;
  the paper applies it to the mean over T, the same for an affine layer).

The neurons are the paper's: LIF with ``τ = 2``, the reset detached, SpikingJelly's sigmoid surrogate
(α = 4), threshold 1, the attention's 0.5.  The CIFAR-10 configuration, Spikformer-4-384 (4 blocks,
width 384, 12 heads), is the default: 9.3M parameters, as the paper's Table 2 lists.
"""
from __future__ import annotations

import numbers
from collections import OrderedDict

import torch
from torch import nn

from ..layers import MaxPool2d, TimeFolded
from ..layers.attention import SpikingSelfAttention, conv_bn_1d
from .residual import _finish, _Neurons, _shape

__all__ = ["Spikformer", "SpikformerPatchStem", "SpikformerBlock", "spikformer", "TRANSFORMER_ZOO"]

_NEURON_DEFAULTS = {"detach_reset": True, "surrogate": "sigmoid", "alpha": 4.0}
"""The neuron of Spikformer's code (SpikingJelly's ``LIFNode(tau=2., detach_reset=True)``), besides τ."""


def _conv_bn_neuron(cin: int, cout: int, pool: bool, neurons) -> nn.Sequential:
    """``3x3 conv - BN [- 3x3/2 max-pool] - neuron``, named as SpikingJelly's ``SpikformerConv2dBNLIF``."""
    block = [TimeFolded(nn.Conv2d(cin, cout, 3, 1, 1, bias=False)), TimeFolded(nn.BatchNorm2d(cout))]
    if pool:
        block.append(TimeFolded(MaxPool2d(3, 2, 1)))
    conv_bn = nn.Sequential(OrderedDict(block=nn.Sequential(*block)))
    return nn.Sequential(OrderedDict(conv_bn=conv_bn, neuron=neurons()))


class SpikformerPatchStem(nn.Module):
    """Spiking patch splitting: ``[T, B, C, H, W] -> [T, B, width, H/p, W/p]`` (``p = patch_size``, 4 or 16),
    four conv-BN-neuron stages then ``x + pe(x)``, the relative position embedding."""

    def __init__(self, in_channels: int, width: int, patch_size: int, neurons):
        super().__init__()
        dims, cin, pool_from = (width // 8, width // 4, width // 2, width), in_channels, 2 if patch_size == 4 else 0
        stages = []
        for i, cout in enumerate(dims):
            stages.append(_conv_bn_neuron(cin, cout, i >= pool_from, neurons))
            cin = cout
        self.stages = nn.Sequential(*stages)
        self.positional_encoding = _conv_bn_neuron(width, width, False, neurons)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stages(x)
        return self.positional_encoding(x) + x


class SpikformerBlock(nn.Module):
    """An encoder block over feature maps ``[T, B, C, H, W]`` (same shape out), on the tokens ``[T, B, C, H·W]``:
    ``x + SSA(x)``, then ``x + MLP(x)``."""

    def __init__(self, width: int, heads: int, mlp_ratio: float, neurons, attn_neurons):
        super().__init__()
        self.attn = SpikingSelfAttention(width, heads, neuron=neurons, attn_neuron=attn_neurons)
        hidden = int(width * mlp_ratio)
        self.mlp = nn.Sequential(OrderedDict(fc1=conv_bn_1d(width, hidden), neuron1=neurons(),
                                             fc2=conv_bn_1d(hidden, width), neuron2=neurons()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = x.flatten(3)
        tokens = tokens + self.attn(tokens)
        tokens = tokens + self.mlp(tokens)
        return tokens.reshape(x.shape)


class Spikformer(nn.Module):
    """Spikformer over ``[T, B, C, H, W]`` -> ``[T, B, num_classes]`` (see the module docstring)."""

    def __init__(self, in_channels: int, num_classes: int, width: int, depth: int, heads: int, mlp_ratio: float,
                 patch_size: int, neurons, attn_neurons):
        super().__init__()
        self.patch_embed = SpikformerPatchStem(in_channels, width, patch_size, neurons)
        self.blocks = nn.ModuleList(SpikformerBlock(width, heads, mlp_ratio, neurons, attn_neurons)
                                    for _ in range(depth))
        self.head = TimeFolded(nn.Linear(width, num_classes))
        for m in self.modules():  # Spikformer's (and SpikingJelly's) initialisation
            if isinstance(m, (nn.Linear, nn.Conv1d, nn.Conv2d)):
                nn.init.trunc_normal_(m.weight, std=0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x.flatten(3).mean(dim=-1))


def _positive(name: str, value, kind=numbers.Integral):
    if isinstance(value, bool) or not isinstance(value, kind) or not value > 0:
        raise ValueError(f"{name} must be a positive {'integer' if kind is numbers.Integral else 'number'}, "
                         f"got {value!r}")
    return value


def spikformer(input_shape=(3, 32, 32), num_classes: int = 10, T: int | None = None, *, width: int = 384,
               depth: int = 4, heads: int = 12, mlp_ratio: float = 4.0, patch_size: int | None = None,
               attn_threshold: float = 0.5, fused: bool = True, memory: str = "fused", **neuron):
    """Spikformer (default Spikformer-4-384, the paper's CIFAR configuration); ``width`` a multiple of 8
    that ``heads`` divides; ``patch_size`` None: 4 for inputs up to 64x64, else 16; ``neuron``:
    ``neuron="LIF"``, ``tau0=2.0`` and the neuron layer's keywords (the paper's by default), the
    attention's with threshold ``attn_threshold``."""
    c, h, w = _shape(input_shape)
    width, depth, heads = _positive("width", width), _positive("depth", depth), _positive("heads", heads)
    _positive("mlp_ratio", mlp_ratio, numbers.Real)
    if width % 8:
        raise ValueError(f"width must be a multiple of 8 (the stem's first stage has width/8 channels), got {width}")
    if width % heads:
        raise ValueError(f"heads must divide width {width}, got {heads}")
    patch_size = (4 if max(h, w) <= 64 else 16) if patch_size is None else patch_size
    if patch_size not in (4, 16):
        raise ValueError(f"patch_size must be 4 or 16 (two or four 2x down-samplings), got {patch_size!r}")
    kwargs = {"neuron": "LIF", "tau0": 2.0, **_NEURON_DEFAULTS, **neuron}
    neurons = _Neurons(**kwargs)
    attn_neurons = _Neurons(**{**kwargs, "v_threshold": attn_threshold})
    net = Spikformer(c, int(num_classes), int(width), int(depth), int(heads), float(mlp_ratio), patch_size, neurons,
                     attn_neurons)
    return _finish(net, fused, memory)


TRANSFORMER_ZOO = {"spikformer": (spikformer, "cifar10")}
"""plif's spiking transformers by name, as :data:`plif.models.residual.RESIDUAL_ZOO`: ``(factory, listed dataset)``."""
