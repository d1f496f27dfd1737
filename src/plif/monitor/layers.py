"""Which layers a monitor watches: the one answer every monitor of :mod:`plif.monitor` asks.

By default every plif neuron of the model (:func:`spiking_layers`), named by its qualified module name
(``layers.2``, ``block.0.neuron``: :mod:`plif.models.names`, the one owner of the names); with
``layers=[names]`` the modules so named (any qualified name of ``model.named_modules()``; a neuron's old
name ``<index>_<token>``, ``2_PLIF``, reads as ``layers.2``, and the monitor keeps the name it was given).
What cannot be watched is refused in one line: not a model, SpikingJelly's ``(net, NodeClass)``
spelling, a SpikingJelly model not yet converted, a model without a plif neuron.
"""
from __future__ import annotations

from torch import nn

__all__ = ["spiking_layers", "watched_layers", "Hooked"]


def spiking_layers(model: nn.Module) -> dict[str, nn.Module]:
    """``{qualified name: neuron}`` of every plif neuron of ``model``, in module order
    (:func:`plif.models.names.neurons`)."""
    from ..models.names import neurons

    return neurons(model)


def _what(value) -> str:
    return f"the class {value.__name__}" if isinstance(value, type) else f"a {type(value).__name__}"


def check_model(model, who: str) -> None:
    """``model`` is a module instance, else a one-line ``TypeError`` naming ``who``."""
    if not isinstance(model, nn.Module):
        got = "None" if model is None else _what(model)
        raise TypeError(f"{who} takes the model to watch (a torch.nn.Module) first, got {got}")


def refuse_extra(who: str, extra: tuple, keywords: str) -> None:
    """SpikingJelly's ``Monitor(net, NodeClass)`` and any other positional argument after the model, in
    one line: every argument after the model is keyword-only (``keywords``: the ones ``who`` takes)."""
    if not extra:
        return
    first = extra[0]
    if isinstance(first, type) or (isinstance(first, tuple) and first and all(isinstance(c, type) for c in first)):
        raise TypeError(f"{who}(model, {getattr(first, '__name__', 'classes')}): SpikingJelly's instance argument; "
                        f"plif's {who}(model) watches every plif neuron of the model, {who}(model, layers=[names]) "
                        f"the modules so named")
    raise TypeError(f"{who} takes the model, then keywords only ({keywords}); got {_what(first)} as argument 2")


def _names(layers, who: str) -> list[str]:
    if isinstance(layers, str):
        return [layers]
    try:
        names = list(layers)
    except TypeError:
        names = None
    if isinstance(layers, (type, nn.Module)) or names is None or not all(isinstance(n, str) for n in names):
        raise TypeError(f"{who} layers= takes qualified module names (a list of str, e.g. ['layers.2'] or "
                        f"['block.0.neuron']), got {_what(layers)}")
    if not names:
        raise ValueError(f"{who} layers= is empty: leave it out to watch every plif neuron")
    return names


def watched_layers(model, layers, who: str, neurons_only: bool = False) -> dict[str, nn.Module]:
    """``{name: module}`` that monitor ``who`` watches on ``model`` (module docstring); ``neurons_only``:
    each must be a plif neuron (a potential, a firing rate)."""
    from ..models.factories import unconverted
    from ..models.names import stored_name
    from ..neurons import SpikingNeuron

    check_model(model, who)
    spiking = spiking_layers(model)
    if layers is None:
        if not spiking:
            why = unconverted(model, f"{who}: the model")
            raise ValueError(why or f"{who}: the model holds no plif neuron (IF, LIF, PLIF): nothing to watch"
                             + ("" if neurons_only else "; name the modules to watch with layers=[qualified names]"))
        return spiking
    modules = dict(model.named_modules())
    found = {}
    for name in _names(layers, who):
        module = modules.get(name) if name else None
        if module is None:  # a neuron's name as runs before stored it (2_PLIF)
            module = spiking.get(stored_name(name))
        if module is None:
            known = ", ".join(list(spiking)[:4]) or "none"
            raise ValueError(f"{who} layers: {name!r} is not a module of the model (its plif neurons: {known}; or "
                             f"any name of model.named_modules())")
        if neurons_only and not isinstance(module, SpikingNeuron):
            raise ValueError(f"{who} layers: {name!r} is a {type(module).__name__}, not a plif neuron (IF, LIF, PLIF)")
        found[name] = module
    return found


class Hooked:
    """A monitor's life: hooks on ``self.layers`` while open (``with monitor:``), off after.  Subclasses
    say how one layer is hooked (:meth:`_hook`, returning its handle)."""

    _handles: list

    def _hook(self, name: str, module: nn.Module):
        raise NotImplementedError

    def __enter__(self):
        if self._handles:
            raise RuntimeError(f"{type(self).__name__} is already open")
        self._handles = [self._hook(name, module) for name, module in self.layers.items()]
        return self

    def __exit__(self, *exc) -> None:
        self.remove()

    def remove(self) -> None:
        """Take the hooks off (the model runs fused again); what was recorded stays readable."""
        for h in self._handles:
            h.remove()
        self._handles = []
