"""Monitors of any model holding plif neurons, through hooks on its layers, by qualified name.

- :class:`FiringRateMonitor`: per-layer spike counts and firing rates (:mod:`.rates`);
- :class:`OutputMonitor`, :class:`InputMonitor`, :class:`GradOutputMonitor`: each call's output
  (spikes), input and output gradient per layer (:mod:`.records`);
- :class:`PotentialMonitor`: the membrane potential ``V [T, B, ...]`` of each neuron (:mod:`.potential`);
- :func:`spiking_layers`: the layers they watch by default, and their names (:mod:`.layers`).

Each is a context manager that records while open; what it records stays on the device until read
(no host synchronisation per step).  Every argument after the model is a keyword, and SpikingJelly's
``Monitor(net, NodeClass)`` is refused in one line naming plif's spelling, as are SpikingJelly's
``AttributeMonitor`` and ``GradInputMonitor`` (:mod:`.spikingjelly`); a model without plif neurons is
refused (an unconverted SpikingJelly model with the pointer to ``plif.from_spikingjelly``).

Example:

>>> import torch
>>> from plif import build_network
>>> from plif.monitor import OutputMonitor, PotentialMonitor
>>> net = build_network("FC10-PLIF", (4,), T=3)
>>> with OutputMonitor(net) as spikes, PotentialMonitor(net) as v:
...     out = net(torch.rand(2, 4))
>>> spikes.names, v["layers.1"][0].shape
(['layers.1'], torch.Size([3, 2, 10]))
"""
from .layers import spiking_layers
from .potential import PotentialMonitor
from .rates import FiringRateMonitor
from .records import GradOutputMonitor, InputMonitor, OutputMonitor, Recorder
from .spikingjelly import AttributeMonitor, GradInputMonitor

__all__ = ["FiringRateMonitor", "OutputMonitor", "InputMonitor", "GradOutputMonitor", "PotentialMonitor",
           "Recorder", "spiking_layers"]
