"""Monitors that record tensors per layer: outputs (spikes), inputs and output gradients.

A monitor is a context manager: while it is open, a hook on each watched layer (every plif neuron, or
``layers=[names]``: :mod:`plif.monitor.layers`) appends what that call saw to ``records[name]``, one
tensor per call, detached and left on its device: nothing is copied to the host, so recording costs
no synchronisation; :meth:`Recorder.cpu` makes the copies when you read them.  The records grow with
every call: open a monitor around the passes you look at, or :meth:`Recorder.clear` between them.

SpikingJelly's ``OutputMonitor(net, Node)``, ``InputMonitor(net, Node)`` and ``GradOutputMonitor(net,
Node)`` are ``OutputMonitor(net)``, ``InputMonitor(net)`` and ``GradOutputMonitor(net)`` here: the plif
neurons are the default, ``layers=`` names other modules, and every argument after the model is a
keyword; ``monitor[name]`` is the list of that layer's records, as there.

As for :class:`plif.monitor.FiringRateMonitor`, a hook makes a fused conv block run its composed
layers (:func:`plif.layers.fused_block.fusable_now`), and a compiled or CUDA-graph-replayed module runs
no hooks (nothing is recorded).

Example:

>>> import torch
>>> from plif import build_network
>>> from plif.monitor import GradOutputMonitor, InputMonitor, OutputMonitor
>>> net = build_network("c4k3s1-BN-PLIF-MPk2s2-FC10-PLIF", (1, 8, 8), T=4)
>>> x = torch.rand(3, 1, 8, 8)
>>> with OutputMonitor(net) as spikes, InputMonitor(net) as inputs, GradOutputMonitor(net) as grads:
...     out = net(x)
...     out.sum().backward()
>>> spikes.names
['layers.2', 'layers.6']
>>> torch.equal(spikes["layers.6"][0], out)        # one record per call: [T, B, ...]
True
>>> inputs["layers.2"][0].shape, grads["layers.6"][0].shape
(torch.Size([4, 3, 4, 8, 8]), torch.Size([4, 3, 10]))
>>> with OutputMonitor(net, layers=["layers.0"]) as conv:   # any module by its qualified name
...     _ = net(x)
>>> conv["layers.0"][0].shape
torch.Size([4, 3, 4, 8, 8])
"""
from __future__ import annotations

import torch
from torch import nn

from .layers import Hooked, refuse_extra, watched_layers

__all__ = ["Recorder", "OutputMonitor", "InputMonitor", "GradOutputMonitor"]


def _first(value):
    """The tensor of a hook's inputs or outputs: a neuron's ``(spikes, v)`` or ``(x, v0)`` gives its first."""
    return value[0] if isinstance(value, tuple) and value else value


class Recorder(Hooked):
    """The monitors' base: ``records[name]`` lists what each call of layer ``name`` gave, while open.

    ``model``, then keywords only: ``layers`` (None: every plif neuron).  Subclasses say what a hook
    records (:meth:`_hook`); ``neurons_only``: the layers must be plif neurons."""

    neurons_only = False

    def __init__(self, model: nn.Module, *instance, layers=None, **unknown):
        who = type(self).__name__
        refuse_extra(who, instance, "layers=")
        if unknown:
            name = next(iter(unknown))
            spelling = ("plif keeps the tensors themselves (detached, on their device): apply the function to "
                        "monitor[name] when you read it") if name.startswith("function_on") else ""
            if name == "instance":
                refuse_extra(who, (unknown[name],), "layers=")
            raise TypeError(f"{who} got an unexpected keyword argument {name!r}"
                            + (f" (SpikingJelly's; {spelling})" if spelling else "; it takes layers="))
        self.model = model
        self.layers = watched_layers(model, layers, who, neurons_only=self.neurons_only)
        self.records: dict[str, list[torch.Tensor]] = {name: [] for name in self.layers}
        self._handles: list = []
        self._opened = False

    @property
    def names(self) -> list[str]:
        """The watched layers' names, in model order."""
        return list(self.layers)

    def _record(self, name: str, value) -> None:
        self.records[name].append(value.detach() if torch.is_tensor(value) else value)

    def __enter__(self):
        super().__enter__()
        self._opened = True
        return self

    def clear(self) -> None:
        """Forget what was recorded (SpikingJelly's ``clear_recorded_data``)."""
        for records in self.records.values():
            records.clear()

    def __getitem__(self, name: str) -> list[torch.Tensor]:
        """The records of layer ``name``, one tensor per call, on the device it ran on."""
        if not self._opened:
            raise RuntimeError(f"{type(self).__name__} has recorded nothing: it records while open "
                               f"(with {type(self).__name__}(model) as monitor: model(x))")
        if name not in self.records:
            from ..models.names import stored_name

            name = stored_name(name) if stored_name(name) in self.records else name  # an old name: 2_PLIF
        if name not in self.records:
            raise KeyError(f"{type(self).__name__}: {name!r} is not watched; watched: {', '.join(self.records)}")
        return self.records[name]

    def cpu(self) -> dict[str, list[torch.Tensor]]:
        """``{name: [record on the CPU, ...]}``: the host copies, made now."""
        return {name: [t.cpu() if torch.is_tensor(t) else t for t in records] for name, records in self.records.items()}


class OutputMonitor(Recorder):
    """Record each watched layer's output: a plif neuron's spikes ``[T, B, ...]`` (module docstring)."""

    def _hook(self, name, module):
        return module.register_forward_hook(lambda _m, _inputs, out: self._record(name, _first(out)))


class InputMonitor(Recorder):
    """Record each watched layer's input, ``x [T, B, ...]`` for a plif neuron (module docstring)."""

    def _hook(self, name, module):
        return module.register_forward_pre_hook(lambda _m, inputs: self._record(name, _first(inputs)))


class GradOutputMonitor(Recorder):
    """Record ``∂loss/∂output`` of each watched layer, shaped as its output, when a backward pass
    reaches it (records come in backward order; a pass without gradients records nothing)."""

    def _hook(self, name, module):
        def hook(_m, _inputs, out):
            out = _first(out)
            if torch.is_tensor(out) and out.requires_grad:
                out.register_hook(lambda grad: self._record(name, grad))
        return module.register_forward_hook(hook)
