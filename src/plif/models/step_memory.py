"""How much memory one training step of a :class:`~plif.models.SpikingNetwork` needs at least, from
its layer shapes alone (a network on the meta device will do): nothing is allocated and no kernel is
loaded, so ``plif train`` can refuse a ``--T`` and ``--batch-size`` that cannot fit before anything runs.

A training step keeps, for backward, what each layer saves over all ``T`` steps of the batch:
``T * B * features * bytes`` per layer, where the memory mode (:mod:`plif.models.memory`) decides
what is kept and in how many bytes.  The walk mirrors :func:`plif.models.memory.make_plan` (which
runs of layers become one fused step) without making the steps, and counts per step only what that
step is sure to keep:

- the network's input as the first layer sees it: a static image ``[B, ...]`` once, event frames or
  an encoder's spikes ``[T, B, ...]`` (fp32);
- a fused block: its spike input as one byte (``spike_storage``), the conv's output ``y`` unless it
  is recomputed (``recompute_bn``, or the first block's few-tap conv, which may be), once per sample
  where a static input's first conv is hoisted, and a byte per pooled output;
- a composed neuron: ``H`` (fp32, or bf16 with ``h_bf16``); a composed BatchNorm, conv or linear
  layer: its input (bf16 under autocast, one byte where kept as spikes); a max-pool: a byte per
  output (plif's keeps the window's offset);
- a checkpointed block: only its input; a time-chunked first block: nothing beyond its input;
- the weights with their gradients and Adam's two moments (fp32).

Everything else (transients, the allocator's slack, the data pipeline) is left out, so the total is
a lower bound: a step that needs more than it cannot run, and one that needs less may still not.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from torch import nn

from ..layers import PerStepBatchNorm, TimeFolded, TimeInvariantDropout, unwrap
from ..neurons import SpikingNeuron
from .memory import MemoryOptions, fused_run
from .structure import hoists_first_layer, spike_inputs

__all__ = ["StepMemory", "step_memory"]

_FP32, _BF16, _BYTE = 4, 2, 1


@dataclass(frozen=True)
class StepMemory:
    """The least memory of one training step, in bytes: the network's ``input``, the ``activations``
    the layers keep for backward, and the ``weights`` with their gradients and Adam's state."""

    input: int
    activations: int
    weights: int

    @property
    def total(self) -> int:
        return self.input + self.activations + self.weights


def _elems(shape) -> int:
    return math.prod(shape)


def _is(m: nn.Module, cls) -> bool:
    """A ``cls`` layer run over ``T*B`` at once."""
    return isinstance(m, TimeFolded) and isinstance(unwrap(m), cls)


def step_memory(net, batch: int, memory: MemoryOptions, amp: str | None = None, static: bool = False) -> StepMemory:
    """The least memory (:class:`StepMemory`) one training step of ``net`` (a
    :class:`~plif.models.SpikingNetwork`, on any device, the meta device included) needs for a batch
    of ``batch`` samples of ``net.T`` steps, run with the memory options ``memory`` and ``amp``
    (``"bf16"``: autocast, or None: fp32).  ``static``: the input is a static image ``[B, ...]``
    (fed at every step, unless ``net.encoder`` encodes it over T), else frames ``[T, B, ...]``.
    The rules: this module's docstring."""
    static = static and net.encoder is None  # an encoder's spikes are [T, B, ...]
    layers, info, T, B = list(net.layers), list(net.info), net.T, batch
    dsize = _BF16 if amp == "bf16" else _FP32
    hoisted = static and hoists_first_layer(layers)  # a static image's first conv runs once on [B, ...]
    shapes = [tuple(net.input_shape)] + [i.out_shape for i in info]  # shapes[i]: layer i's input, per sample
    fed = spike_inputs(layers, training=True)
    TB = T * B

    def kept_input(j: int, nbytes: int) -> int:  # layer j's input; the network's own is counted apart
        return 0 if j == 0 else _elems(shapes[j]) * TB * nbytes

    kept = 0
    for first, end, kind in _steps(layers, memory, fed):
        m = layers[first]
        if kind == "checkpointed":  # keeps only its input
            kept += kept_input(first, dsize)
        elif kind == "fused":
            if fed[first] and memory.spike_storage:
                kept += kept_input(first, _BYTE)
            few_tap = first == 0 and not hoisted  # the first conv's output may be made again in backward
            if not memory.recompute_bn and not few_tap:
                kept += _elems(shapes[first + 1]) * (B if first == 0 else TB) * dsize
            if end - first == 4:
                kept += _elems(shapes[end]) * TB * _BYTE
        elif kind == "spikes-linear":  # the linear after dropout keeps the spikes as one byte (and the mask [B, ...])
            kept += kept_input(first, _BYTE)
        elif kind == "conv-bn":  # the conv's output is made again from its input
            kept += kept_input(first, _BYTE if fed[first] else dsize)
        elif kind == "layer" and isinstance(m, SpikingNeuron):
            kept += _elems(shapes[first + 1]) * TB * (_BF16 if memory.h_bf16 else _FP32)
        elif kind == "layer" and _is(m, nn.MaxPool2d):  # plif's max-pool keeps a window offset per output
            kept += _elems(shapes[first + 1]) * TB * _BYTE
        elif kind == "layer" and (_is(m, (nn.Conv2d, nn.Linear, nn.modules.batchnorm._BatchNorm))
                                  or isinstance(m, PerStepBatchNorm)):
            kept += kept_input(first, _BYTE if fed[first] and memory.spike_storage else dsize)
    weights = 4 * _FP32 * sum(p.numel() for p in net.parameters())
    network_input = _elems(shapes[0]) * (B if static else TB) * _FP32
    return StepMemory(network_input, kept, weights)


def _steps(layers, memory: MemoryOptions, fed) -> list[tuple[int, int, str]]:
    """``[(first layer, end layer, kind)]``: the steps :func:`plif.models.memory.make_plan` makes, by
    kind (``chunked``, ``fused``, ``spikes-linear``, ``conv-bn``, ``checkpointed``, ``layer``),
    found by the same rules without making them (making a fused step loads its kernels)."""
    steps, n = [], len(layers)
    i = fused_run(layers, 0) if memory.chunk_first_block else 0
    if i:
        steps.append((0, i, "chunked"))
    while i < n:
        m, nxt = layers[i], layers[i + 1] if i + 1 < n else None
        run = fused_run(layers, i) if memory.fused_block else 0
        used, kind = (run, "fused") if run else (1, "layer")
        if run or isinstance(m, SpikingNeuron) or _is(m, (nn.MaxPool2d, nn.Flatten)):
            pass
        elif isinstance(m, TimeInvariantDropout) and fed[i] and memory.spike_storage:
            j = i + 1 + (1 if nxt is not None and _is(nxt, nn.Flatten) else 0)
            if j < n and _is(layers[j], nn.Linear) and layers[j].layer.bias is None:
                used, kind = j - i + 1, "spikes-linear"
        elif _is(m, nn.Conv2d) and m.layer.bias is None and memory.recompute_bn and nxt is not None and (
                _is(nxt, nn.BatchNorm2d) and nxt.layer.track_running_stats):
            used, kind = 2, "conv-bn"
        steps.append((i, i + used, kind))
        i += used
    return _checkpointed(steps, layers) if memory.checkpoint_blocks else steps


def _checkpointed(steps, layers) -> list[tuple[int, int, str]]:
    """The steps of each block (up to a step that begins with a spatial pooling, before the first
    flatten, linear layer or dropout-linear step) as one checkpointed step, as
    :func:`plif.models.memory.make_plan` joins them (a chunked first block stays as it is)."""
    out, pending = [], []
    for first, end, kind in steps:
        m = layers[first]
        if pending is not None and (_is(m, (nn.Flatten, nn.Linear)) or kind == "spikes-linear"):
            out.extend(pending)
            pending = None
        if pending is None or kind == "chunked":
            out.append((first, end, kind))
            continue
        pending.append((first, end, kind))
        if _is(m, (nn.MaxPool2d, nn.AvgPool2d)):
            out.append((pending[0][0], end, "checkpointed"))
            pending = []
    return out + (pending or [])
