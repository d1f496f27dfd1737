"""One walk over a network's structure: which layers receive spikes (in evaluation and in training
mode), and whether the first layer may run once for a static input.

Pure functions of the layer list, so the network's forward and its training memory plan
(:mod:`.memory`), deployment (spike-only layers, statistics, NIR export) and the benchmarks ask
the same question the same way; what a layer is under its time wrapper is
:func:`plif.layers.unwrap`.  A spiking layer's output is binary and stays binary through flatten,
identity and max pooling (the max of spikes is their OR); in eval mode also through dropout (the
identity), while in training dropout scales what it keeps by ``1/(1-p)``.  Convolution, linear,
average pooling, BatchNorm and voting make real values.
"""
from __future__ import annotations

from torch import nn

from ..layers import TimeFolded, TimeInvariantDropout, unwrap
from ..neurons import SpikingNeuron

__all__ = ["keeps_binary", "spike_inputs", "spike_fed_layers", "hoists_first_layer"]


def keeps_binary(layer: nn.Module, training: bool = False) -> bool:
    """Whether a binary input stays binary through ``layer`` (in eval mode, or in training mode)."""
    if isinstance(layer, TimeInvariantDropout):
        return not training
    return isinstance(layer, TimeFolded) and isinstance(unwrap(layer), (nn.Flatten, nn.MaxPool2d, nn.Identity))


def spike_inputs(layers, training: bool = False) -> list[bool]:
    """For each layer, whether its input is a spike tensor (the network's input is not), in eval
    mode or, with ``training``, in training mode."""
    out, binary = [], False
    for layer in layers:
        out.append(binary)
        binary = isinstance(layer, SpikingNeuron) or (binary and keeps_binary(layer, training))
    return out


def spike_fed_layers(net) -> list[int]:
    """Indices of the layers of ``net`` whose input is a spike tensor (eval mode)."""
    return [i for i, fed in enumerate(spike_inputs(net.layers)) if fed]


def hoists_first_layer(layers) -> bool:
    """Whether a static input (the same at every step) may go through the first layer once, before
    it is repeated over T: true when that layer is a time-folded convolution or linear layer."""
    first = layers[0] if len(layers) else None
    return isinstance(first, TimeFolded) and isinstance(unwrap(first), (nn.Conv2d, nn.Linear))
