"""Build an ``nn.Module`` from the paper's network notation, inferring every shape.

The network takes ``[T, B, C, H, W]`` (event frames) or a static ``[B, C, H, W]`` image, which is
fed unchanged at every step; in that case the first convolution (the start of the learnable
encoder) runs once on ``[B, ...]`` and its output is repeated over ``T``, which gives exactly the
result of repeating the input.  Output: the voting layer's spikes ``[T, B, classes]``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from ..layers import PerStepBatchNorm, TimeFolded, TimeInvariantDropout, Voting
from ..neurons import SpikingNeuron, make_neuron
from .notation import NotationError, Token, parse

__all__ = ["LayerInfo", "SpikingNetwork", "build_network"]


@dataclass(frozen=True)
class LayerInfo:
    """What the builder knows about one layer: its token and per-sample output shape."""

    token: str
    kind: str
    out_shape: tuple
    params: int
    neurons: int


class SpikingNetwork(nn.Module):
    """A sequence of layers over ``[T, B, ...]`` built from a notation string (see :func:`build_network`)."""

    def __init__(self, spec: str, layers: list[nn.Module], info: list[LayerInfo], input_shape: tuple, T: int):
        super().__init__()
        self.spec = spec
        self.layers = nn.ModuleList(layers)
        self.info = info
        self.input_shape = tuple(input_shape)
        self.T = int(T)

    def _hoistable(self) -> bool:
        first = self.layers[0] if len(self.layers) else None
        return isinstance(first, TimeFolded) and isinstance(first.layer, (nn.Conv2d, nn.Linear))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x [B, *input_shape]`` (static, repeated over T) or ``[T, B, *input_shape]`` -> ``[T, B, classes]``."""
        n = len(self.input_shape)
        start = 0
        if x.dim() == n + 1:
            if tuple(x.shape[1:]) != self.input_shape:
                raise ValueError(f"expected input [B, {', '.join(map(str, self.input_shape))}], got {tuple(x.shape)}")
            if self._hoistable():
                x = self.layers[0].layer(x)
                start = 1
            x = x.unsqueeze(0).expand(self.T, *x.shape)
        elif x.dim() == n + 2:
            if tuple(x.shape[2:]) != self.input_shape:
                raise ValueError(f"expected input [T, B, {', '.join(map(str, self.input_shape))}], got {tuple(x.shape)}")
        else:
            raise ValueError(f"expected [B, ...] or [T, B, ...] with per-sample shape {self.input_shape}, got {tuple(x.shape)}")
        for layer in self.layers[start:]:
            x = layer(x)
        return x

    def neuron_layers(self) -> list[SpikingNeuron]:
        return [m for m in self.layers if isinstance(m, SpikingNeuron)]

    def taus(self) -> list[float]:
        """τ of every PLIF layer, in order (mean over channels where τ is per channel)."""
        return [float(m.tau.mean()) for m in self.neuron_layers() if hasattr(m, "w")]


def _numel(shape) -> int:
    return int(math.prod(shape))


def build_network(spec: str, input_shape, T: int = 8, *, neuron: str | None = None, tau0: float = 2.0,
                  pool: str | None = None, bn_per_step: bool = False, per_channel_tau: bool = False,
                  dropout_p: float | None = None, **neuron_kwargs) -> SpikingNetwork:
    """Parse ``spec`` and build the network for per-sample ``input_shape`` (``(C, H, W)`` or ``(N,)``).

    neuron: replace every neuron token with this one (``PLIF``, ``LIF``, ``IF``; ablations).
    tau0: initial τ of PLIF layers, the fixed τ of LIF layers.
    pool: ``max`` or ``avg`` replaces every spatial pooling (the voting layer is kept).
    bn_per_step: BatchNorm statistics per time-step (authors' code) instead of over ``T*B``.
    per_channel_tau: one learnable τ per channel (or per feature after FC) instead of per layer.
    dropout_p: override the probability of every ``DP``.
    neuron_kwargs: passed to every neuron (``v_threshold``, ``v_reset``, ``surrogate``, ...).
    """
    tokens = parse(spec)
    shape = tuple(int(s) for s in input_shape)
    if len(shape) not in (1, 3) or min(shape) <= 0:
        raise ValueError(f"input shape must be (C, H, W) or (N,) with positive sizes, got {input_shape}")
    layers: list[nn.Module] = []
    info: list[LayerInfo] = []

    def fail(tok: Token, msg: str):
        raise NotationError(spec, tok.pos, len(tok.text), f"{tok.text}: {msg} (input to it: {shape})")

    def add(tok: Token, module: nn.Module, out_shape, label=None):
        nonlocal shape
        params = sum(p.numel() for p in module.parameters())
        neurons = _numel(out_shape) if isinstance(module, SpikingNeuron) else 0
        layers.append(module)
        info.append(LayerInfo(label or tok.text, tok.kind, tuple(out_shape), params, neurons))
        shape = tuple(out_shape)

    for i, tok in enumerate(tokens):
        a = tok.args
        if tok.kind == "conv":
            if len(shape) != 3:
                fail(tok, "a convolution needs a [C, H, W] input")
            pad = a.get("p", a["k"] // 2)
            conv = nn.Conv2d(shape[0], a["out"], a["k"], a["s"], pad, bias=False)
            h = (shape[1] + 2 * pad - a["k"]) // a["s"] + 1
            w = (shape[2] + 2 * pad - a["k"]) // a["s"] + 1
            if h <= 0 or w <= 0:
                fail(tok, "the kernel is larger than the padded input")
            add(tok, TimeFolded(conv), (a["out"], h, w))
        elif tok.kind == "bn":
            bn = nn.BatchNorm2d(shape[0]) if len(shape) == 3 else nn.BatchNorm1d(shape[0])
            add(tok, PerStepBatchNorm(bn) if bn_per_step else TimeFolded(bn), shape)
        elif tok.kind == "neuron":
            name = neuron or a["name"]
            channels = shape[0] if per_channel_tau and name.upper() == "PLIF" else None
            extra = {"num_channels": channels} if channels else {}
            add(tok, make_neuron(name, tau=tau0, **extra, **neuron_kwargs), shape, label=name.upper())
        elif tok.kind == "pool":
            op = a["op"]
            if len(shape) == 1:
                if op != "AP" or a["k"] != a["s"]:
                    fail(tok, "on features only the voting layer APk<n>s<n> is defined")
                if shape[0] % a["k"]:
                    fail(tok, f"voting needs a multiple of {a['k']} features")
                add(tok, Voting(a["k"]), (shape[0] // a["k"],))
                continue
            if pool is not None:
                if pool not in ("max", "avg"):
                    raise ValueError(f"pool must be 'max' or 'avg', got {pool!r}")
                op = "MP" if pool == "max" else "AP"
            cls = nn.MaxPool2d if op == "MP" else nn.AvgPool2d
            h = (shape[1] - a["k"]) // a["s"] + 1
            w = (shape[2] - a["k"]) // a["s"] + 1
            if h <= 0 or w <= 0:
                fail(tok, "the pooling window is larger than the input")
            add(tok, TimeFolded(cls(a["k"], a["s"])), (shape[0], h, w), label=f"{op}k{a['k']}s{a['s']}")
        elif tok.kind == "dropout":
            add(tok, TimeInvariantDropout(a["p"] if dropout_p is None else dropout_p), shape)
        elif tok.kind == "fc":
            if len(shape) == 3:
                layers.append(TimeFolded(nn.Flatten()))
                shape = (_numel(shape),)
                info.append(LayerInfo("flatten", "flatten", shape, 0, 0))
            add(tok, TimeFolded(nn.Linear(shape[0], a["out"], bias=False)), (a["out"],))
        else:  # a token kind added to the registry without a builder
            fail(tok, f"no builder for token kind {tok.kind!r}")
    return SpikingNetwork(spec, layers, info, input_shape, T)
