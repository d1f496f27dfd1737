"""Build an ``nn.Module`` from the paper's network notation, inferring every shape.

The network takes ``[T, B, C, H, W]`` (event frames) or a static ``[B, C, H, W]`` image, which is
fed unchanged at every step; in that case the first convolution (the start of the learnable
encoder) runs once on ``[B, ...]`` and its output is repeated over ``T``, which gives exactly the
result of repeating the input (in eval mode a BatchNorm after it runs once too; the repeated
tensor is a view, which the fused CPU neuron reads in place).  Output: the voting layer's spikes
``[T, B, classes]``.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import torch
from torch import nn

from ..kernels.gpu_switches import current
from ..layers import unwrap
from ..neurons import SpikingNeuron
from .memory import DEFAULT_MEMORY, MEMORY_PRESETS, MemoryOptions, make_plan, run_plan
from .builders import BUILDERS, BuildError, BuildOptions
from .notation import MAX_INT, NotationError, parse
from .stepping import NetworkState, initial_state, step
from .structure import hoists_first_layer

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
    """A sequence of layers over ``[T, B, ...]`` built from a notation string (see :func:`build_network`).

    Input ``[B, *input_shape]`` (a static image, fed at every step) or ``[T, B, *input_shape]``
    (event frames); output the voting layer's spikes ``[T, B, classes]``, whose mean over T is the
    firing rate the prediction takes the argmax of.  ``layers`` is an ``nn.ModuleList``, ``info``
    one :class:`LayerInfo` per layer.  Neurons carry no state between calls: each call starts
    every neuron at its rest potential.
    """

    def __init__(self, spec: str, layers: list[nn.Module], info: list[LayerInfo], input_shape: tuple, T: int,
                 memory: MemoryOptions | None = None):
        super().__init__()
        self.spec = spec
        self.layers = nn.ModuleList(layers)
        self.info = info
        self.input_shape = tuple(input_shape)
        self.T = int(T)
        self.set_memory(memory or MEMORY_PRESETS[DEFAULT_MEMORY])

    def set_memory(self, memory: MemoryOptions) -> "SpikingNetwork":
        """Choose the activation savings used in training (:mod:`plif.models.memory`); the layers,
        parameters and state dict stay the same."""
        if not isinstance(memory, MemoryOptions):
            raise TypeError(f"memory must be a MemoryOptions, got {memory!r}")
        self.memory = memory
        self._plan_key = None
        self.plan()  # made now (a compiled forward uses it as it is) and again after a layer changes
        return self

    def plan(self) -> list:
        """The steps ``forward`` runs (:func:`plif.models.memory.make_plan`), made again whenever a
        layer (or a layer inside one: ``convert_sync_batchnorm``, a swapped ``.layer``) was replaced
        since the last call, so a replaced layer is the one that runs and gets gradients."""
        if not self.memory.any():  # each layer is its own step
            return [(i, i + 1, m) for i, m in enumerate(self.layers)]
        if torch.compiler.is_compiling():
            return self._plan  # made eagerly (set_memory, or the last eager forward)
        key = tuple(self.layers.modules())
        if key != self._plan_key:
            self._plan, self._plan_key = make_plan(list(self.layers), self.memory), key
        return self._plan

    def _hoistable(self) -> bool:
        return hoists_first_layer(self.layers)

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
                while start < len(self.layers) and _same_every_step(self.layers[start]):
                    x = self.layers[start].layer(x)
                    start += 1
            x = x.unsqueeze(0).expand(self.T, *x.shape)
        elif x.dim() == n + 2:
            if tuple(x.shape[2:]) != self.input_shape:
                raise ValueError(f"expected input [T, B, {', '.join(map(str, self.input_shape))}], got {tuple(x.shape)}")
        else:
            raise ValueError(f"expected [B, ...] or [T, B, ...] with per-sample shape {self.input_shape}, got {tuple(x.shape)}")
        return run_plan(self.plan(), x, start)

    def initial_state(self) -> NetworkState:
        """The state before the first :meth:`step`: every neuron at rest, no dropout mask drawn."""
        return initial_state(self.layers)

    def step(self, x_t: torch.Tensor, state: NetworkState | None = None) -> tuple[torch.Tensor, NetworkState]:
        """One time-step with carried state (streaming, online inference; :mod:`plif.models.stepping`):
        ``x_t [B, *input_shape]`` -> ``(out_t [B, classes], state)``; ``state=None`` starts at rest.
        In eval mode ``T`` steps give :meth:`forward`'s output bit for bit."""
        if tuple(x_t.shape[1:]) != self.input_shape or x_t.dim() != len(self.input_shape) + 1:
            raise ValueError(f"step takes one frame x_t [B, {', '.join(map(str, self.input_shape))}], "
                             f"got {tuple(x_t.shape)}")
        return step(self.layers, x_t, self.initial_state() if state is None else state)

    def set_backend(self, backend: str = "auto") -> "SpikingNetwork":
        """How every neuron runs (:func:`plif.neurons.multi_step`'s ``backend``): not part of the
        network, its state dict or a checkpoint, so a network trained with one runs with another."""
        from ..neurons.dispatch import check_backend

        for m in self.neuron_layers():
            check_backend(backend, surrogate=m.cfg.surrogate)
        for m in self.neuron_layers():
            m.backend = backend
        return self

    def neuron_layers(self) -> list[SpikingNeuron]:
        """The spiking neuron layers, in order."""
        return [m for m in self.layers if isinstance(m, SpikingNeuron)]

    def taus(self) -> list[float]:
        """τ of every PLIF layer, in order (mean over channels where τ is per channel)."""
        return [float(m.tau.mean()) for m in self.neuron_layers() if hasattr(m, "w")]


def _same_every_step(layer: nn.Module) -> bool:
    """Whether ``layer`` maps a static input to a static output, element by element, so it may run
    once before the input is repeated over T (bit-identical): BatchNorm in eval mode with running
    statistics (an affine map per channel).  In training it normalises with the batch's statistics
    over ``T*B``, which must see the repeated input."""
    bn = unwrap(layer)
    return (isinstance(bn, nn.modules.batchnorm._BatchNorm) and not bn.training and bn.running_mean is not None
            and bn.running_var is not None)


def _check_int(name: str, value, minimum: int) -> int:
    # bool is an int subclass and floats like 2.5 used to be truncated silently: both are refused
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    if value > MAX_INT:  # torch sizes are 64-bit and their products must stay so
        raise ValueError(f"{name} must be at most {MAX_INT} (2^31-1), got {value}")
    return int(value)


def _check_shape(input_shape) -> tuple:
    if isinstance(input_shape, (str, bytes)) or not hasattr(input_shape, "__len__"):
        raise TypeError(f"input_shape must be a tuple (C, H, W) or (N,), got {input_shape!r}")
    if len(input_shape) not in (1, 3):
        raise ValueError(f"input_shape must be (C, H, W) or (N,), got {tuple(input_shape)}")
    return tuple(_check_int(f"input_shape[{i}]", v, 1) for i, v in enumerate(input_shape))


def build_network(spec: str, input_shape, T: int = 8, *, neuron: str | None = None, tau0: float = 2.0,
                  pool: str | None = None, bn_per_step: bool = False, per_channel_tau: bool = False,
                  dropout_p: float | None = None, memory: MemoryOptions | None = None,
                  **neuron_kwargs) -> SpikingNetwork:
    """Parse ``spec`` and build the network for per-sample ``input_shape`` (``(C, H, W)`` or ``(N,)``).

    - T: time-steps, a positive integer.
    - neuron: replace every neuron token with this one (``PLIF``, ``LIF``, ``IF``; ablations).
    - tau0: initial τ of PLIF layers, the fixed τ of LIF layers.
    - pool: ``max`` or ``avg`` replaces every spatial pooling (the voting layer is kept).
    - bn_per_step: BatchNorm statistics per time-step (authors' code) instead of over ``T*B``.
    - per_channel_tau: one learnable τ per channel (or per feature after FC) instead of per layer.
    - dropout_p: override the probability of every ``DP``.
    - memory: how training runs the layers (:class:`plif.models.memory.MemoryOptions`; default the
      ``fused`` preset, ``MemoryOptions()`` the composed layers).
    - neuron_kwargs: passed to every neuron (``v_threshold``, ``v_reset``, ``surrogate``, ...).

    Build under ``with torch.device("meta"):`` to get shapes and parameter counts without
    allocating weights (``plif spec`` does).
    """
    if not isinstance(spec, str):
        raise TypeError(f"spec must be a network string like 'c128k3s1-BN-PLIF-FC10', got {spec!r} ({type(spec).__name__})")
    shape = input_shape = _check_shape(input_shape)
    T = _check_int("T", T, 1)
    if pool not in (None, "max", "avg"):
        raise ValueError(f"pool must be 'max' or 'avg', got {pool!r}")
    opts = BuildOptions(neuron=neuron, tau0=tau0, pool=pool, bn_per_step=bn_per_step, per_channel_tau=per_channel_tau,
                        dropout_p=dropout_p, neuron_kwargs=tuple(neuron_kwargs.items()))
    layers: list[nn.Module] = []
    info: list[LayerInfo] = []
    for tok in parse(spec):
        builder = BUILDERS.get(tok.kind)
        try:
            if builder is None:  # a token kind added to the registry without a builder
                raise BuildError(f"no builder for token kind {tok.kind!r}")
            built = builder(tok, shape, opts)
        except BuildError as e:
            raise NotationError(spec, tok.pos, len(tok.text), f"{tok.text}: {e} (input to it: {shape})") from None
        for label, kind, module, out_shape in built.modules:
            params = sum(p.numel() for p in module.parameters())
            neurons = math.prod(out_shape) if isinstance(module, SpikingNeuron) else 0
            layers.append(module)
            info.append(LayerInfo(label, kind, out_shape, params, neurons))
            shape = out_shape
    net = SpikingNetwork(spec, layers, info, input_shape, T, memory)
    return net.to(memory_format=torch.channels_last) if current().channels_last else net  # a GPU switch
