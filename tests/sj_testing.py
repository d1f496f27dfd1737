"""SpikingJelly's model zoo for the interop tests, importable without torchvision.

SpikingJelly 2.0's ``model.sew_resnet``, ``spiking_resnet`` and ``spiking_vgg`` import torchvision only for
``load_state_dict_from_url`` (pretrained weights, never used here); torchvision does not install beside
the pinned torch, so where it is missing a one-function stand-in module is put into ``sys.modules``
(``torch.hub.load_state_dict_from_url``, the function torchvision re-exports).
"""
from __future__ import annotations

import importlib
import sys
import types

import pytest


def _stand_in_torchvision() -> None:
    try:
        importlib.import_module("torchvision.models.utils")
        return
    except Exception:  # noqa: BLE001  (absent, or present and broken: the stand-in serves either way)
        pass
    import torch.hub

    for name in ("torchvision", "torchvision.models", "torchvision.models.utils"):
        sys.modules.setdefault(name, types.ModuleType(name))
    sys.modules["torchvision.models.utils"].load_state_dict_from_url = torch.hub.load_state_dict_from_url


def sj():
    """``(neuron, surrogate, functional, layer, model modules...)`` of SpikingJelly, or skip with the reason."""
    from plif.bench.spikingjelly import spikingjelly_unavailable

    why = spikingjelly_unavailable()
    if why is not None:
        pytest.skip(f"SpikingJelly unavailable: {why}")
    _stand_in_torchvision()
    from spikingjelly.activation_based import functional, layer, neuron, surrogate
    from spikingjelly.activation_based.model import parametric_lif_net, sew_resnet, spiking_resnet, spiking_vgg

    return types.SimpleNamespace(neuron=neuron, surrogate=surrogate, functional=functional, layer=layer,
                                 plif_net=parametric_lif_net, sew_resnet=sew_resnet, spiking_resnet=spiking_resnet,
                                 spiking_vgg=spiking_vgg)
