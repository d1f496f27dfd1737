"""The operations of any model, counted through forward hooks while it runs: :class:`OpCounter`.

While open, every synapse of the model (:data:`plif.deploy.op_counts.SYNAPSES`, inside a time wrapper or
not) and every Spikformer attention layer adds what each call costs (:mod:`plif.deploy.op_counts`) to
device tensors; nothing is read on the host until :meth:`OpCounter.rows` (one read for every layer).

A synapse's input that is the same at every step, a stride-0 view ``[T, B, ...]`` along time (a static
image fed at each step: :func:`plif.models.inputs.repeat_over_time`, what a network's first convolution
runs once on), costs its MACs once, not T times.  A hook on a time wrapper makes a network of the
paper's notation feed its first convolution so, as a model does (:func:`plif.models.memory.hoist_static`
runs a hooked wrapper on the repeated input), and a hooked layer runs as written
(:mod:`plif.layers.hooks`): every call is counted where it happens.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ..layers import unwrap
from ..layers.attention import SpikingSelfAttention
from ..layers.repeated import repeated_input
from .op_counts import SYNAPSES, dense_macs, is_binary, ssa_products, synops

__all__ = ["OpCounter", "OpRow", "read"]


@dataclass
class OpRow:
    """What one layer cost over the calls counted: ``synops`` (accumulates of spike input), ``macs`` (of
    real-valued input), ``ann_macs`` (the same layer in an ANN, once a sample), ``spike_input`` (every
    call's input was spikes; None before any call)."""

    name: str
    kind: str
    synops: float = 0.0
    macs: float = 0.0
    ann_macs: float = 0.0
    spike_input: bool | None = None


class _Sums:
    """One row's device accumulators (float64) and its shape-made integers."""

    def __init__(self, name: str, kind: str):
        self.name, self.kind = name, kind
        self.synops = self.macs = self.binary = None
        self.ann = 0.0

    def add(self, binary: torch.Tensor, accumulates: torch.Tensor, macs: float, ann: float) -> None:
        zero = torch.zeros((), dtype=torch.float64, device=accumulates.device)
        syn, mac = torch.where(binary, accumulates, zero), torch.where(binary, zero, zero + macs)
        self.synops = syn if self.synops is None else self.synops + syn
        self.macs = mac if self.macs is None else self.macs + mac
        self.binary = binary if self.binary is None else self.binary & binary
        self.ann += ann


def _repeated(x) -> int | None:
    """T where ``x [T, B, ...]`` is one sample repeated over time (the one rule,
    :func:`~plif.layers.repeated.repeated_input`), else None."""
    if torch.is_tensor(x) and x.dim() > 2 and repeated_input(x) is not None:
        return int(x.shape[0])
    return None


class OpCounter:
    """Count the operations of ``model``'s synapses and attention products while open (module docstring);
    ``neurons`` (``{name: neuron}``): note the order they run in and their size, :attr:`order`, :attr:`sizes`.

    ``steps``: the time-steps of the input now running (the ANN counts a layer's MACs once per sample:
    its calls over T steps, divided by T); set it before each batch."""

    def __init__(self, model: nn.Module, neurons: dict[str, nn.Module] | None = None):
        self.model, self.steps, self.neurons = model, 1, neurons or {}
        self.order: dict[str, int] = {}  # every row and neuron by the call that ran it first
        self.sizes: dict[str, int] = {}  # each neuron's outputs per sample and step
        self._sums: dict[str, _Sums] = {}
        self._static: dict[int, int] = {}
        self._handles: list = []

    def _row(self, name: str, kind: str) -> _Sums:
        self.order.setdefault(name, len(self.order))
        if name not in self._sums:
            self._sums[name] = _Sums(name, kind)
        return self._sums[name]

    def __enter__(self):
        if self._handles:
            raise RuntimeError("OpCounter is already open")
        # the neurons' first: a product counted on a neuron's output comes after the neuron in the order
        self._handles = [m.register_forward_hook(self._neuron_hook(name)) for name, m in self.neurons.items()]
        wrapped = {}
        for name, m in self.model.named_modules():
            inner = unwrap(m)
            if inner is not m and isinstance(inner, SYNAPSES):  # shown by the wrapper's name
                wrapped[id(inner)] = name
                self._handles.append(m.register_forward_pre_hook(self._wrapper_hook(inner)))
        for name, m in self.model.named_modules():
            if isinstance(m, SYNAPSES):
                self._handles.append(m.register_forward_hook(self._synapse_hook(wrapped.get(id(m), name))))
            elif isinstance(m, SpikingSelfAttention):
                self._handles.append(m.qkv_lif.register_forward_hook(self._ssa_hook(f"{name}.products", m.num_heads)))
        return self

    def __exit__(self, *exc) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []

    def _wrapper_hook(self, inner: nn.Module):
        def hook(_wrapper, args):
            steps = _repeated(args[0]) if args else None
            if steps is None:
                self._static.pop(id(inner), None)
            else:
                self._static[id(inner)] = steps
        return hook

    def _synapse_hook(self, name: str):
        def hook(m, args, out):
            x = args[0]
            once = self._static.pop(id(m), None) or (_repeated(x) if isinstance(m, nn.Linear) else None)
            dense = dense_macs(m, out)
            row = self._row(name, "fc" if isinstance(m, nn.Linear) else "conv")
            row.add(is_binary(x), synops(m, x), dense / once if once else dense, dense / self.steps)
        return hook

    def _neuron_hook(self, name: str):
        def hook(_neuron, _args, out):
            s = out[0] if isinstance(out, tuple) else out  # [T, B, ...]
            self.order.setdefault(name, len(self.order))
            self.sizes[name] = s[0, 0].numel() if s.dim() > 1 else 1
        return hook

    def _ssa_hook(self, name: str, heads: int):
        def hook(_neuron, _args, out):
            qkv = out[0] if isinstance(out, tuple) else out
            adds, dense = ssa_products(qkv, heads)
            self._row(name, "attention").add(is_binary(qkv), adds, dense, dense / self.steps)
        return hook

    def pending(self) -> list[torch.Tensor]:
        """Every count still on the device, in the order :meth:`rows` takes their values."""
        return [t for s in self._sums.values() for t in (s.synops, s.macs, s.binary)]

    def rows(self, values: list[float] | None = None) -> list[OpRow]:
        """What each layer cost, in the order the layers first ran; ``values``: those of :meth:`pending`
        read already (:func:`read`, with a caller's other counts), else read now (one host read)."""
        sums = list(self._sums.values())
        flat = read(self.pending()) if values is None else values
        return [OpRow(s.name, s.kind, flat[3 * i], flat[3 * i + 1], s.ann, bool(flat[3 * i + 2]))
                for i, s in enumerate(sums)]


def read(tensors: list[torch.Tensor]) -> list[float]:
    """The values of device scalars, in one host read."""
    if not tensors:
        return []
    device = tensors[0].device
    return torch.stack([t.to(device, torch.float64) for t in tensors]).tolist()
