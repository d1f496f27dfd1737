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

from ..switches import current
from ..layers import TimeInvariantDropout
from ..neurons import SpikingNeuron
from ..values import check_value
from .memory import DEFAULT_MEMORY, MEMORY_PRESETS, MemoryOptions
from .builders import BUILDERS, BuildError, BuildOptions
from .inputs import check_state, check_tensor, is_static, reference_tensor, repeat_over_time, to_time_first
from .plan import LayerPlan
from .names import layer_taus, neurons
from .notation import MAX_INT, NotationError, parse
from .stepping import NetworkState, check_training_step, initial_state, step

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
                 memory: MemoryOptions | None = None, encoder: nn.Module | None = None):
        super().__init__()
        self.spec = spec
        self.encoder = encoder  # plif.encoding: a static input is encoded over T (None: fed at every step)
        self.layers = nn.ModuleList(layers)
        self.info = info
        self.input_shape = tuple(input_shape)
        self.T = int(T)
        self._state_key = None
        self.set_memory(memory or MEMORY_PRESETS[DEFAULT_MEMORY])

    def set_memory(self, memory: MemoryOptions) -> "SpikingNetwork":
        """Choose the activation savings used in training (:mod:`plif.models.memory`); the layers,
        parameters and state dict stay the same."""
        if not isinstance(memory, MemoryOptions):
            raise TypeError(f"memory must be a MemoryOptions, got {memory!r}")
        self.memory = memory
        # the one planner (plif.models.plan), as plif.fuse runs any module's layers: plif.fused_blocks reads it
        self._plif_runs = [LayerPlan([f"layers.{i}" for i in range(len(self.layers))], memory)]
        self.plan()  # made now (a compiled forward uses it as it is) and again after a layer changes
        return self

    def plan(self) -> list:
        """The steps ``forward`` runs (:func:`plif.models.memory.make_plan`), made again whenever a
        layer (or a layer inside one: ``convert_sync_batchnorm``, a swapped ``.layer``) was replaced
        since the last call, so a replaced layer is the one that runs and gets gradients."""
        return self._plif_runs[0].plan(self.layers)

    def _state_shapes(self) -> tuple[list[tuple], list[tuple]]:
        """The per-sample shapes of the potentials and the dropout masks a state of this network holds,
        found again only when a layer was replaced (:meth:`step` asks at every frame of a stream)."""
        key = tuple(self.layers)
        if key != self._state_key:
            kinds = [(isinstance(m, SpikingNeuron), isinstance(m, TimeInvariantDropout)) for m in key]
            self._state_shapes_now = ([i.out_shape for i, (n, _) in zip(self.info, kinds) if n],
                                      [i.out_shape for i, (_, d) in zip(self.info, kinds) if d])
            self._state_key = key
        return self._state_shapes_now

    def forward(self, x: torch.Tensor, *, time_first: bool | None = None) -> torch.Tensor:
        """``x [B, *input_shape]`` (static, repeated over T) or frames ``[T, B, *input_shape]`` ->
        ``[T, B, classes]``.  ``time_first=False`` takes frames batch-first, ``[B, T, *input_shape]``
        (Tonic's and snnTorch's layout); the default refuses frames whose dim 0 is not ``T`` while dim
        1 is, as batch-first by mistake (``time_first=True`` runs them time-first all the same).  So a
        stream longer than ``T`` whose batch size is ``T`` (``[20, 8, ...]`` at ``T = 8``) is refused
        too: pass ``time_first=True`` for it.  What ``x`` must be: :mod:`plif.models.inputs`.

        Example: event frames, time first or batch-first, and their firing rates:

        >>> import torch
        >>> from plif import build_network
        >>> net = build_network("c4k3s1-BN-PLIF-MPk4s4-FC20-PLIF-APk10s10", (2, 16, 16), T=5)
        >>> frames = torch.rand(5, 3, 2, 16, 16)             # [T, B, C, H, W]
        >>> out = net(frames)                                # [T, B, classes]: 20 neurons vote for 2
        >>> out.shape, out.mean(0).shape                     # the prediction: argmax of the rate
        (torch.Size([5, 3, 2]), torch.Size([3, 2]))
        >>> torch.equal(net(frames.transpose(0, 1), time_first=False), out)   # [B, T, ...]
        True
        """
        check_tensor(x, "net(x)", reference_tensor(self))
        x = to_time_first(x, self.input_shape, self.T, time_first)
        if x.dim() == len(self.input_shape) + 2 and x.shape[0] == 0:
            raise ValueError(f"net(x): frames [T, B, ...] need T >= 1 time-steps, got {list(x.shape)}")
        if is_static(x, self.input_shape):  # fed at every step (its first layers run once) or encoded over T
            x = repeat_over_time(x, self.T) if self.encoder is None else self.encoder(x)
        return self._plif_runs[0](x, *self.layers)

    def initial_state(self) -> NetworkState:
        """The state before the first :meth:`step`: every neuron at rest, no dropout mask drawn.

        Example:

        >>> import torch
        >>> from plif import build_network
        >>> net = build_network("FC10-PLIF", (4,), T=3)
        >>> out_t, state = net.step(torch.rand(2, 4), net.initial_state())   # the same as state=None
        >>> out_t.shape
        torch.Size([2, 10])
        """
        return initial_state(self.layers)

    def step(self, x_t: torch.Tensor, state: NetworkState | None = None) -> tuple[torch.Tensor, NetworkState]:
        """One time-step with carried state (streaming, online inference; :mod:`plif.models.stepping`):
        ``x_t [B, *input_shape]`` -> ``(out_t [B, classes], state)``; ``state=None`` starts at rest,
        any other must be this network's, for this batch (:func:`plif.models.inputs.check_state`).
        In eval mode ``T`` steps give :meth:`forward`'s output bit for bit.

        Example: a stream of frames, one at a time, carrying the state:

        >>> import torch
        >>> from plif import build_network
        >>> net = build_network("c4k3s1-BN-PLIF-MPk4s4-FC20-PLIF-APk10s10", (2, 16, 16), T=5).eval()
        >>> frames = torch.rand(5, 3, 2, 16, 16)             # [T, B, C, H, W]
        >>> state = net.initial_state()
        >>> for x_t in frames:                               # x_t [B, C, H, W]
        ...     out_t, state = net.step(x_t, state)          # out_t [B, classes]
        >>> torch.equal(out_t, net(frames)[-1])
        True
        """
        ref = reference_tensor(self)
        check_tensor(x_t, "net.step(x_t)", ref)
        if tuple(x_t.shape[1:]) != self.input_shape or x_t.dim() != len(self.input_shape) + 1:
            raise ValueError(f"net.step(x_t): takes one frame x_t [B, {', '.join(map(str, self.input_shape))}], "
                             f"got {tuple(x_t.shape)}")
        if state is None:
            state = self.initial_state()
        else:
            check_state(state, *self._state_shapes(), x_t, ref)
        check_training_step(self.layers, state.t, self.T)
        return step(self.layers, x_t, state)

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
        """The spiking neuron layers, in order (:func:`plif.models.names.neurons`)."""
        return list(neurons(self).values())

    def taus(self) -> list[float]:
        """τ of every PLIF layer, in order (mean over channels where τ is per channel:
        :func:`plif.models.names.layer_taus`)."""
        return layer_taus(self)


def _check_int(name: str, value, minimum: int) -> int:
    # bool is an int subclass and floats like 2.5 used to be truncated silently: both are refused
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    if value > MAX_INT:  # torch sizes are 64-bit and their products must stay so
        raise ValueError(f"{name} must be at most {MAX_INT} (2^31-1), got {value}")
    return int(value)


# the kinds of build_network's options and of the neuron keywords it passes on, checked as plif train checks
# its flags (plif.values.check_value): a NaN threshold gave all-zero output, a NaN alpha NaN gradients, and
# detach_reset="False" (a truthy string) the opposite of what was asked
# (tau0 has its own check, plif.neurons.check_tau, which the layers and plif train share)
_KINDS = {"bn_per_step": (bool, False), "per_channel_tau": (bool, False),
          "dropout_p": (float, True), "v_threshold": (float, False), "v_reset": (float, True), "alpha": (float, True),
          "detach_reset": (bool, False)}


def _check_shape(input_shape) -> tuple:
    if isinstance(input_shape, (str, bytes)) or not hasattr(input_shape, "__len__"):
        raise TypeError(f"input_shape must be a tuple (C, H, W) or (N,), got {input_shape!r}")
    if len(input_shape) not in (1, 3):
        raise ValueError(f"input_shape must be (C, H, W) or (N,), got {tuple(input_shape)}")
    return tuple(_check_int(f"input_shape[{i}]", v, 1) for i, v in enumerate(input_shape))


def build_network(spec: str, input_shape, T: int = 8, *, neuron: str | None = None, tau0: float = 2.0,
                  pool: str | None = None, bn_per_step: bool = False, per_channel_tau: bool = False,
                  dropout_p: float | None = None, memory: MemoryOptions | None = None, encoder=None,
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
    - encoder: how a static ``[B, ...]`` input becomes ``[T, B, ...]``: None or ``"direct"`` (fed
      at every step, the paper's), ``"poisson"``, ``"latency"``, an encoder of :mod:`plif.encoding`
      or the dict a run stores (:func:`plif.encoding.make_encoder`); frames ``[T, B, ...]`` are fed
      as they are.  It holds no parameters: the state dict is the same.
    - neuron_kwargs: passed to every neuron (``v_threshold``, ``v_reset``, ``surrogate``, ...).

    Build under ``with torch.device("meta"):`` to get shapes and parameter counts without
    allocating weights (``plif spec`` does).

    Example: the paper's notation; a static image is fed at every one of the T steps:

    >>> import torch
    >>> from plif import build_network
    >>> net = build_network("{c8k3s1-BN-PLIF-MPk2s2}*2-FC100-PLIF-APk10s10", (1, 28, 28), T=4)
    >>> net(torch.rand(2, 1, 28, 28)).shape              # [T, B, classes]: 100 neurons vote for 10
    torch.Size([4, 2, 10])
    >>> net.taus()                                       # tau0 of each PLIF layer, before training
    [2.0, 2.0, 2.0]
    >>> paper_net = "{c128k3s1-BN-PLIF-MPk2s2}*2-DP-FC2048-PLIF-DP-FC100-PLIF-APk10s10"   # Fashion-MNIST's
    >>> with torch.device("meta"):                       # shapes and sizes without weights
    ...     paper = build_network(paper_net, (1, 28, 28))
    >>> sum(p.numel() for p in paper.parameters())
    13198980
    >>> build_network("c8k3s1-XX", (1, 28, 28))
    Traceback (most recent call last):
    ...
    plif.models.notation.NotationError: unknown token 'XX' (valid: ...) at position 7:
      c8k3s1-XX
             ^^
    """
    if not isinstance(spec, str):
        raise TypeError(f"spec must be a network string like 'c128k3s1-BN-PLIF-FC10', got {spec!r} ({type(spec).__name__})")
    shape = input_shape = _check_shape(input_shape)
    T = _check_int("T", T, 1)
    from ..encoding import make_encoder

    encoder = make_encoder(encoder, T, channels=input_shape[0])
    if pool not in (None, "max", "avg"):
        raise ValueError(f"pool must be 'max' or 'avg', got {pool!r}")
    given = {"bn_per_step": bn_per_step, "per_channel_tau": per_channel_tau, "dropout_p": dropout_p,
             **neuron_kwargs}
    for name, value in given.items():
        if name in _KINDS:
            check_value(name, value, *_KINDS[name])
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
            count = math.prod(out_shape) if isinstance(module, SpikingNeuron) else 0
            layers.append(module)
            info.append(LayerInfo(label, kind, out_shape, params, count))
            shape = out_shape
    net = SpikingNetwork(spec, layers, info, input_shape, T, memory, encoder)
    return net.to(memory_format=torch.channels_last) if current().channels_last else net  # a GPU switch
