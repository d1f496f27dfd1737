"""The one planner: how a run of layers over ``[T, B, ...]`` runs, for every network plif trains.

A notation network's layers (:class:`~plif.models.SpikingNetwork`) and each run of layers
:func:`plif.fuse` finds in a module (a Sequential's children, a chain of an FX graph) run through a
:class:`LayerPlan`: the steps of :func:`~plif.models.memory.make_plan`, made again when a layer was
replaced; the layers as written while one of them has a hook (a hook sees what they compute); and
an input repeated over time (:func:`~plif.layers.repeated.repeated_input`, a static image fed at
each step) through the first convolution once, hooks or not, unless that convolution's time wrapper
has a forward hook (:func:`~plif.models.memory.hoist_static`).
"""
from __future__ import annotations

import torch
from torch import nn

from ..layers.fused_block import FusedBlock
from ..layers.hooks import hook_kind
from ..layers.repeated import repeated_input
from ..layers.time_chunked import TimeChunkedBlock
from .memory import MemoryOptions, hoist_static, make_plan, run_plan
from .structure import hoists_first_layer

__all__ = ["LayerPlan", "hooked"]


def hooked(layers) -> str:
    """The kind of hook one of ``layers`` (or a module inside) has, ``""`` if none (:func:`hook_kind`)."""
    return hook_kind(m for layer in layers for m in layer.modules())


class LayerPlan:
    """The plan of a run of layers (their qualified ``names``), made again when one of them was
    replaced; called with the live layers, as ``plan(x, *layers)``.  ``spikes_in``: the first
    layer's input is spikes (a run inside a model)."""

    def __init__(self, names, opts: MemoryOptions, spikes_in: bool = False):
        self.names, self.opts, self.spikes_in = tuple(names), opts, bool(spikes_in)
        self._key = self._plan = None

    def plan(self, layers) -> list:
        """``[(first, end, step)]`` (:func:`~plif.models.memory.make_plan`) for the live ``layers``."""
        if torch.compiler.is_compiling() and self._key is not None:
            return self._plan  # made eagerly (when built or fused, or the last eager call)
        key = tuple(m for layer in layers for m in layer.modules())
        if key != self._key:
            self._plan, self._key = make_plan(list(layers), self.opts, self.spikes_in), key
        return self._plan

    def fused(self, layers) -> list[tuple[int, int]]:
        """``(first, end)`` of each fused run of the plan."""
        return [(a, b) for a, b, step in self.plan(layers) if isinstance(step, (FusedBlock, TimeChunkedBlock))]

    def __call__(self, x: torch.Tensor, *layers: nn.Module) -> torch.Tensor:
        start = 0
        if hoists_first_layer(layers) and (once := repeated_input(x)) is not None:
            x, start = hoist_static(layers, once, x.shape[0])  # a static input: its first layers run once
        if hooked(layers):  # a forward or backward hook sees what the layers as written compute
            for m in layers[start:]:
                x = m(x)
            return x
        return run_plan(self.plan(layers), x, start)

    def __getstate__(self):  # a copy makes its plan from its own layers
        return {**self.__dict__, "_key": None, "_plan": None}
