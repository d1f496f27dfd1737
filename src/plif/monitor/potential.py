"""The membrane potential of plif neurons over every time-step: :class:`PotentialMonitor`.

A plif neuron keeps no ``.v``: it starts every forward from rest, and its fused kernels keep no
potential but the last.  While a :class:`PotentialMonitor` is open, each watched neuron's call is run
again on the reference loop (:meth:`plif.neurons.SpikingNeuron.potentials`, the spec every backend
is tested against) with the same input and starting state, its potentials ``V [T, B, ...]`` are
recorded (``V[t]``: after step ``t``'s reset, SpikingJelly's ``v_seq``), and the network goes on with
the reference loop's spikes, so the recorded potentials are exactly those behind the spikes the
layers downstream see, and gradients flow through the reference loop.  The neuron thus runs twice
per call (the fused kernel, then the loop): open it around the passes you look at.

SpikingJelly's ``AttributeMonitor('v_seq', False, net, Node)`` with ``store_v_seq=True`` neurons (or
``'v'``, the last step's) is ``PotentialMonitor(net)`` here (``[-1]`` of a record is ``V_{T-1}``).

Example: a LIF layer with τ = 2 on a constant 1.5 charges to 0.75, then 1.125, fires and resets to 0:

>>> import torch
>>> from torch import nn
>>> from plif import LIF
>>> from plif.monitor import PotentialMonitor
>>> net = nn.Sequential(LIF(tau=2.0))
>>> with PotentialMonitor(net) as mon:
...     spikes = net(torch.full((4, 1, 1), 1.5))
>>> mon["0"][0].flatten().tolist(), spikes.flatten().tolist()
([0.75, 0.0, 0.75, 0.0], [0.0, 1.0, 0.0, 1.0])
"""
from __future__ import annotations

from .records import Recorder

__all__ = ["PotentialMonitor"]


class PotentialMonitor(Recorder):
    """Record ``V [T, B, ...]`` of each watched plif neuron per call (module docstring); ``layers``:
    the neurons to watch, by name (None: every plif neuron)."""

    neurons_only = True

    def _hook(self, name, module):
        def hook(neuron, args, kwargs, out):
            v0 = args[1] if len(args) > 1 else kwargs.get("v0")
            spikes, v = neuron.potentials(args[0] if args else kwargs["x"], v0)
            self._record(name, v)
            return (spikes, v[-1].to(out[1].dtype)) if isinstance(out, tuple) else spikes
        # first among the hooks: every other monitor sees the spikes the network goes on with
        return module.register_forward_hook(hook, with_kwargs=True, prepend=True)
