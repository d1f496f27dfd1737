"""One walk over a network's structure: what each layer is under its time-folding wrapper, which
layers receive spikes, and whether the first layer may run once for a static input.

Pure functions of the layer list, so the network's forward, deployment (spike-only layers,
statistics, NIR export) and the benchmarks ask the same question the same way.  Binary is judged
in eval mode: a spiking layer's output is binary and stays binary through dropout (identity in
eval), flatten, identity and max pooling (the max of spikes is their OR); convolution, linear,
average pooling, BatchNorm and voting make real values.  (The training memory plan of
:mod:`.memory` tracks binary in training mode, where dropout scales its input, so it keeps its own.)
"""
from __future__ import annotations

from torch import nn

from ..layers import TimeFolded, TimeInvariantDropout
from ..neurons import SpikingNeuron

__all__ = ["inner", "keeps_binary", "spike_inputs", "spike_fed_layers", "hoists_first_layer"]


def inner(layer: nn.Module) -> nn.Module:
    """The layer itself, under its :class:`TimeFolded` wrapper if it has one."""
    return layer.layer if isinstance(layer, TimeFolded) else layer


def keeps_binary(layer: nn.Module) -> bool:
    """Whether a binary input stays binary through ``layer`` (in eval mode)."""
    if isinstance(layer, TimeInvariantDropout):
        return True
    return isinstance(layer, TimeFolded) and isinstance(layer.layer, (nn.Flatten, nn.MaxPool2d, nn.Identity))


def spike_inputs(layers) -> list[bool]:
    """For each layer, whether its input is a spike tensor (the network's input is not)."""
    out, binary = [], False
    for layer in layers:
        out.append(binary)
        binary = isinstance(layer, SpikingNeuron) or (binary and keeps_binary(layer))
    return out


def spike_fed_layers(net) -> list[int]:
    """Indices of the layers of ``net`` whose input is a spike tensor."""
    return [i for i, fed in enumerate(spike_inputs(net.layers)) if fed]


def hoists_first_layer(layers) -> bool:
    """Whether a static input (the same at every step) may go through the first layer once, before
    it is repeated over T: true when that layer is a time-folded convolution or linear layer."""
    first = layers[0] if len(layers) else None
    return isinstance(first, TimeFolded) and isinstance(first.layer, (nn.Conv2d, nn.Linear))
