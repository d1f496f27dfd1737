"""SpikingJelly for the interop tests: its modules and model zoo, or a skip naming why it is unavailable.

The zoo's ``sew_resnet``, ``spiking_resnet`` and ``spiking_vgg`` import torchvision only for a URL helper;
:func:`plif.bench.spikingjelly.spikingjelly_model` puts a one-function stand-in in its place where
torchvision is missing.
"""
from __future__ import annotations

import types

import pytest


def sj():
    """SpikingJelly's ``neuron``, ``surrogate``, ``functional``, ``layer`` and zoo modules, or skip with the reason."""
    from plif.bench.spikingjelly import spikingjelly_model, spikingjelly_unavailable

    why = spikingjelly_unavailable()
    if why is not None:
        pytest.skip(f"SpikingJelly unavailable: {why}")
    from spikingjelly.activation_based import functional, layer, neuron, surrogate

    zoo = {name: spikingjelly_model(name) for name in ("parametric_lif_net", "sew_resnet", "spiking_resnet",
                                                        "spiking_vgg")}
    return types.SimpleNamespace(neuron=neuron, surrogate=surrogate, functional=functional, layer=layer,
                                 plif_net=zoo["parametric_lif_net"], sew_resnet=zoo["sew_resnet"],
                                 spiking_resnet=zoo["spiking_resnet"], spiking_vgg=zoo["spiking_vgg"])
