"""The one owner of a model's neurons and their names: every plif neuron of any model (a network in the
paper's notation, the residual zoo, a converted SpikingJelly model, a network written by hand) is named
by its qualified module name, ``layers.2`` or ``block.0.neuron``, in module order.  The monitors,
``plif stats``, the firing rates and τ of ``metrics.jsonl`` and TensorBoard, and ``plif plot encoder``
all ask here.

Runs written before named a notation network's neurons ``<index>_<token>`` (``2_PLIF``: the layer's
position in the network and its token); such a name still reads: :func:`stored_name` maps it to the
qualified name, ``layers.2`` (the notation's layers are ``layers.<index>``, the keys of its state dict).

Example:

>>> from plif import build_network
>>> from plif.models.names import neurons, stored_name
>>> net = build_network("c4k3s1-BN-PLIF-MPk2s2-FC10-PLIF", (1, 8, 8), T=4)
>>> list(neurons(net))
['layers.2', 'layers.6']
>>> stored_name("6_PLIF"), stored_name("layers.6")
('layers.6', 'layers.6')
"""
from __future__ import annotations

import re

from torch import nn

from ..neurons import SpikingNeuron

__all__ = ["neurons", "plif_neurons", "stored_name", "stored_names", "tau_names", "layer_taus"]

_OLD = re.compile(r"(\d+)_([A-Z][A-Za-z0-9]*)")
"""A name of the old form, ``<index>_<token>``: a neuron token is upper case (``PLIF``, ``LIF``, ``IF``)."""


def neurons(model: nn.Module) -> dict[str, SpikingNeuron]:
    """``{qualified name: neuron}`` of every plif neuron (:class:`plif.neurons.SpikingNeuron`) of ``model``,
    in module order."""
    return {name: m for name, m in model.named_modules() if isinstance(m, SpikingNeuron)}


def plif_neurons(model: nn.Module) -> dict[str, SpikingNeuron]:
    """The neurons of :func:`neurons` with a learnable τ (PLIF), in the same order."""
    return {name: m for name, m in neurons(model).items() if hasattr(m, "w")}


def stored_name(name: str) -> str:
    """The qualified name of a neuron named ``name`` in a run folder: ``<index>_<token>`` (``2_PLIF``, how
    runs before named a notation network's neurons) is ``layers.<index>``; any other name is itself."""
    old = _OLD.fullmatch(name)
    return f"layers.{old.group(1)}" if old else name


def stored_names(values: dict) -> dict:
    """``values`` keyed by neuron names as a run folder stores them (``metrics.jsonl``'s ``firing_rates``),
    keyed by qualified names (:func:`stored_name`), in the same order."""
    return {stored_name(k): v for k, v in values.items()}


def tau_names(model: nn.Module) -> list[str]:
    """The names of the PLIF neurons, in the order of :func:`layer_taus` (``metrics.jsonl``'s ``taus``)."""
    return list(plif_neurons(model))


def layer_taus(model: nn.Module) -> list[float]:
    """τ of every PLIF neuron of ``model`` (the mean over channels where τ is per channel), in module order."""
    return [float(m.tau.mean()) for m in plif_neurons(model).values()]
