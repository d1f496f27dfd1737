"""The way back: ``plif.to_spikingjelly(model, sj_model)`` loads a converted model's weights into SpikingJelly.

A model made by :func:`plif.from_spikingjelly` keeps the SpikingJelly model's tree, but its time
wrappers add a level to the names (``conv_fc.0.weight`` is ``conv_fc.0.layer.weight``), so its
``state_dict`` does not load into the source model.  :func:`to_spikingjelly` asks the converter
itself which SpikingJelly tensor each of plif's is: it converts ``sj_model`` once more with
``share=True`` (each plif parameter and buffer *is* a SpikingJelly one there), matches the names by
identity, and copies ``model``'s values into ``sj_model`` (parameters, BatchNorm's running statistics,
PLIF's ``w``).  One owner of the mapping, whatever the converter learns to take.

Exactness (tests/interop/test_to_spikingjelly.py): a converted model trained in plif and loaded back
computes the same outputs in SpikingJelly (float64, ``functional.reset_net`` before each sample).
"""
from __future__ import annotations

import torch
from torch import nn

from .spikingjelly import ConversionError, from_spikingjelly

__all__ = ["to_spikingjelly", "spikingjelly_names"]


def spikingjelly_names(sj_model: nn.Module, memory: str = "fused") -> dict[str, str]:
    """``{plif state-dict key: SpikingJelly state-dict key}`` of the model that
    ``plif.from_spikingjelly(sj_model, memory=memory)`` makes."""
    twin = from_spikingjelly(sj_model, share=True, memory=memory)
    by_id = {id(t): k for k, t in sj_model.state_dict(keep_vars=True).items()}
    names = {}
    for key, t in twin.state_dict(keep_vars=True).items():
        if id(t) not in by_id:
            raise ConversionError(f"{key}: plif's converted model holds a tensor SpikingJelly's has not")
        names[key] = by_id[id(t)]
    return names


def to_spikingjelly(model: nn.Module, sj_model: nn.Module) -> nn.Module:
    """Load the weights of ``model`` (made by ``plif.from_spikingjelly`` from a model built as
    ``sj_model`` is, then trained in plif) into ``sj_model``, in place; returns ``sj_model``.

    Every parameter and buffer is copied (``sj_model`` keeps its own tensors, devices and dtypes);
    the two must hold the same tensors under the converter's names, with the same shapes, else
    :class:`ConversionError` names the first keys that differ and nothing is loaded.  SpikingJelly's
    neurons carry their state between calls: ``functional.reset_net(sj_model)`` before each sample, as
    plif starts each from rest.

    Example (needs SpikingJelly):

        sj = FashionMNISTNet(spiking_neuron=neuron.ParametricLIFNode, surrogate_function=surrogate.ATan())
        functional.set_step_mode(sj, "m")
        net = plif.from_spikingjelly(sj)         # train it with plif (plif train --model file.py:make)
        plif.to_spikingjelly(net, sj)            # sj now holds the trained weights
    """
    for who, m in (("model", model), ("sj_model", sj_model)):
        if not isinstance(m, nn.Module):
            raise TypeError(f"to_spikingjelly {who} takes a torch.nn.Module, got {type(m).__name__}")
    names = spikingjelly_names(sj_model)
    ours = model.state_dict()
    missing, unexpected = sorted(set(names) - set(ours)), sorted(set(ours) - set(names))
    if missing or unexpected:
        few = ", ".join([*(f"missing {k}" for k in missing[:2]), *(f"unexpected {k}" for k in unexpected[:2])])
        raise ConversionError(f"to_spikingjelly: model is not plif.from_spikingjelly(sj_model)'s: {few} "
                              f"({len(missing)} missing, {len(unexpected)} unexpected keys)")
    theirs = sj_model.state_dict()
    if left := sorted(set(theirs) - set(names.values())):
        raise ConversionError(f"to_spikingjelly: sj_model's {left[0]} has no plif counterpart ({len(left)} keys)")
    for key, sj_key in names.items():
        if tuple(ours[key].shape) != tuple(theirs[sj_key].shape):
            raise ConversionError(f"to_spikingjelly: {key} is {list(ours[key].shape)} in model, {sj_key} "
                                  f"{list(theirs[sj_key].shape)} in sj_model")
    with torch.no_grad():
        sj_model.load_state_dict({names[k]: t for k, t in ours.items()}, strict=True)
    return sj_model
