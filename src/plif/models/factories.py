"""Named model factories for ``plif train --model NAME``: networks written as ``nn.Module`` code
rather than in the paper's notation (e.g. the residual zoo entries).

``MODEL_FACTORIES`` maps a name to a factory, or to ``"package.module:FACTORY"`` imported only when
that name is asked for (so the table costs no import).  A factory takes those of ``input_shape``,
``num_classes`` and ``T`` it names and returns an ``nn.Module`` mapping ``[T, B, ...]`` to
``[T, B, num_classes]``.  Add an entry with :func:`register_model` or by writing into the dict.
"""
from __future__ import annotations

from typing import Callable

__all__ = ["MODEL_FACTORIES", "register_model"]

MODEL_FACTORIES: dict[str, "Callable | str"] = {}
"""name -> factory (a callable, or ``"package.module:FACTORY"``), what ``--model NAME`` trains."""

# plif's residual zoo (plif.models.residual.RESIDUAL_ZOO): each factory named as its entry, "_" for "-"
MODEL_FACTORIES.update({name: f"plif.models.residual:{name.replace('-', '_')}" for name in (
    "sew-resnet18", "sew-resnet18-and", "sew-resnet18-iand", "sew-resnet34", "sew-resnet34-and", "sew-resnet34-iand",
    "spiking-resnet18", "spiking-resnet34", "sew-7b-net", "sew-wide-7b-net")})


def register_model(name: str, factory: "Callable | str | None" = None):
    """Register ``factory`` under ``name`` (usable as a decorator: ``@register_model("sew-resnet18")``).
    A name taken already is refused (one name, one network)."""
    def add(f):
        if name in MODEL_FACTORIES and MODEL_FACTORIES[name] is not f:
            raise ValueError(f"model name {name!r} is registered already ({MODEL_FACTORIES[name]!r})")
        MODEL_FACTORIES[name] = f
        return f

    return add if factory is None else add(factory)
