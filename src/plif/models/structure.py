"""One walk over a network's structure: which layers receive spikes (in evaluation and in training
mode), whether the first layer may run once for a static input, and the network string as built.

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
from .notation import parse

__all__ = ["keeps_binary", "spike_inputs", "spike_fed_layers", "hoists_first_layer", "same_every_step", "spec_as_built"]


def keeps_binary(layer: nn.Module, training: bool = False) -> bool:
    """Whether a binary input stays binary through ``layer`` (in eval mode, or in training mode)."""
    if isinstance(layer, TimeInvariantDropout):
        return not training
    return isinstance(layer, TimeFolded) and isinstance(unwrap(layer), (nn.Flatten, nn.MaxPool2d, nn.Identity))


def spike_inputs(layers, training: bool = False, spikes_in: bool = False) -> list[bool]:
    """For each layer, whether its input is a spike tensor, in eval mode or, with ``training``, in
    training mode; ``spikes_in``: whether the first layer's input is (a network's input is not)."""
    out, binary = [], bool(spikes_in)
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


def same_every_step(layer: nn.Module) -> bool:
    """Whether ``layer`` maps a static input to a static output, element by element, so it may run
    once before the input is repeated over T (bit-identical): BatchNorm in eval mode with running
    statistics (an affine map per channel).  In training it normalises with the batch's statistics
    over ``T*B``, which must see the repeated input."""
    bn = unwrap(layer)
    return (isinstance(bn, nn.modules.batchnorm._BatchNorm) and not bn.training and bn.running_mean is not None
            and bn.running_var is not None)


def spec_as_built(spec: str, input_shape, neuron: str | None = None, pool: str | None = None) -> str:
    """``spec`` with :func:`~plif.models.build_network`'s ``neuron`` and ``pool`` overrides written
    into it, as the network is built: every neuron token becomes ``neuron``, every spatial pooling
    ``MP``/``AP`` as ``pool`` says, and the voting layer (pooling of features: after an ``FC``, or
    of a ``(N,)`` input) stays.  Groups and repeats stay as written, unless one repeated token is
    built two ways: then the tokens are written out one by one."""
    features = len(input_shape) == 1
    built = []  # (token, its text as built)
    for tok in parse(spec):
        text = tok.text
        if tok.kind == "neuron" and neuron:
            text = neuron.upper()
        elif tok.kind == "pool" and pool and not features:
            text = ("MP" if pool == "max" else "AP") + tok.text[2:]
        features = features or tok.kind == "fc"
        built.append((tok, text))
    at = {tok.pos: (tok.text, text) for tok, text in built}
    if len(at) != len({(tok.pos, text) for tok, text in built}):
        return "-".join(text for _, text in built)
    for pos in sorted(at, reverse=True):
        written, text = at[pos]
        spec = spec[:pos] + text + spec[pos + len(written):]
    return spec
