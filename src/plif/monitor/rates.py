"""Per-layer firing rates of any model, counted through forward hooks on its spiking layers.

:class:`FiringRateMonitor` is a context manager: while it is open, every
:class:`plif.neurons.SpikingNeuron` of the model (found by ``model.modules()``, so any model that
holds plif neurons, at any depth) adds its output's spike count and size to device tensors; nothing
is read on the host until :meth:`FiringRateMonitor.rates` is asked (one read for all layers), so a
pass over many batches synchronises once.  :class:`plif.monitor.OutputMonitor` records the outputs
themselves; this one keeps only the two counts per layer.

Layer names (:mod:`plif.monitor.layers`): the qualified module names of the neurons (``layers.2``,
``block.0.neuron``: :mod:`plif.models.names`), as TensorBoard's ``firing_rate/layers.2`` and
metrics.jsonl's ``firing_rates`` name them.

Attach it only around the passes that measure (an evaluation, ``plif stats``), not around training
steps: a forward hook on a neuron makes the fused conv block run its composed layers instead
(:func:`plif.layers.fused_block.fusable_now`: a hook must see what the composed layers compute), so
a monitored training step is slower, and a compiled or CUDA-graph-replayed module runs no hooks at
all (nothing is counted).

Example:

>>> import torch
>>> from plif import build_network
>>> from plif.monitor import FiringRateMonitor
>>> net = build_network("c4k3s1-BN-PLIF-MPk2s2-FC10-PLIF", (1, 8, 8), T=4).eval()
>>> with FiringRateMonitor(net) as mon:
...     out = net(torch.rand(3, 1, 8, 8))
>>> sorted(mon.rates())
['layers.2', 'layers.6']
>>> mon.rates()["layers.6"] == out.mean().item()     # the last layer's rate is its outputs' mean
True
"""
from __future__ import annotations

import torch
from torch import nn

from .layers import Hooked, refuse_extra, watched_layers

__all__ = ["FiringRateMonitor"]


class FiringRateMonitor(Hooked):
    """Count the spikes of every spiking layer of ``model`` while open (module docstring).

    ``spikes[name]`` / ``counts[name]``: the spike sum (a device tensor, or None before the layer ran)
    and the values seen.  Every argument after the model is a keyword:

    - layers: the neurons to count, by name (:mod:`plif.monitor.layers`); None: every plif neuron.
    - all_reduce: a function summing a tensor over processes (torchrun), called in :meth:`rates`, so
      the rates are those of every process's share together; every process must then call it.

    Refused in one line: no model, SpikingJelly's ``(net, NodeClass)``, a model without plif neurons."""

    def __init__(self, model: nn.Module, *instance, layers=None, all_reduce=None):
        refuse_extra("FiringRateMonitor", instance, "layers=, all_reduce=")
        if all_reduce is not None and (isinstance(all_reduce, type) or not callable(all_reduce)):
            raise TypeError(f"FiringRateMonitor all_reduce= takes a function summing a tensor over processes, "
                            f"got {all_reduce!r}")
        self.layers = watched_layers(model, layers, "FiringRateMonitor", neurons_only=True)
        self.model, self.all_reduce = model, all_reduce
        self.spikes: dict[str, torch.Tensor | None] = {}
        self.counts: dict[str, int] = {}
        self._handles: list = []
        self.reset()

    def reset(self) -> None:
        """Forget what was counted."""
        self.spikes = dict.fromkeys(self.layers)
        self.counts = dict.fromkeys(self.layers, 0)

    def _hook(self, name: str, module: nn.Module):
        def hook(_module, _inputs, out):
            s = (out[0] if isinstance(out, tuple) else out).detach()
            total = s.sum(dtype=torch.float32 if s.device.type == "mps" else torch.float64)  # exact counts
            self.spikes[name] = total if self.spikes[name] is None else self.spikes[name] + total
            self.counts[name] += s.numel()
        return module.register_forward_hook(hook)

    def spike_totals(self) -> dict[str, float]:
        """``{name: spikes counted}`` (one host read for every layer)."""
        return dict(zip(self.layers, self._totals()[0]))

    def rates(self) -> dict[str, float]:
        """``{name: spikes / values seen}`` per layer (NaN for a layer that never ran)."""
        spikes, counts = self._totals()
        return {k: s / n if n else float("nan") for k, s, n in zip(self.layers, spikes, counts)}

    def _totals(self) -> tuple[list[float], list[float]]:
        device = next(self.model.parameters(), torch.empty(0)).device
        sums = [torch.zeros((), device=device) if s is None else s.to(device) for s in self.spikes.values()]
        spikes = torch.stack([t.double() for t in sums]).tolist() if sums else []
        counts = [float(n) for n in self.counts.values()]
        if self.all_reduce is not None:  # float64: exact to 2^53
            total = self.all_reduce(torch.tensor(spikes + counts, dtype=torch.float64, device=device)).tolist()
            spikes, counts = total[:len(spikes)], total[len(spikes):]
        return spikes, counts
