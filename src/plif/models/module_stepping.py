"""Any module run one time-step at a time with carried state: :func:`step` (``plif.step``).

    state = None
    for x_t in frames:                               # x_t [B, ...]
        out_t, state = plif.step(model, x_t, state)  # out_t [B, ...]

The model's own forward runs on the frame with a time dimension of one (``[1, B, ...]``), so its
shortcuts, pooling and any Python in it run as written; while it runs, each of plif's neurons starts
from the potential it ended the last step with (kept in the returned :class:`ModuleState`, by the
neuron's qualified name), and each time-invariant dropout in training reuses the mask it drew at the
first step.  In eval mode stepping through ``T`` frames gives the whole-``T`` forward's output bit for
bit on the CPU (a layer computes each sample the same way in a batch of ``B`` as in one of ``T*B``),
and beyond ``T`` it keeps going.  A notation network (:class:`~plif.models.SpikingNetwork`) steps
through its own :meth:`~plif.models.SpikingNetwork.step`.

Refused, in one line naming the module: a BatchNorm normalising over all ``T*B`` inputs in training
(it needs every step at once; step in eval mode), a neuron called more than once per forward (which
call would carry the state?), a fused model in training (its fused blocks run the neurons in their
kernels: step in eval mode or ``plif.fuse(model, "none")`` first), and an output without the time
dimension first (a forward that reduces over time, ``x.mean(0)``, cannot be given step by step).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from ..layers import PerStepBatchNorm, TimeInvariantDropout
from ..neurons import SpikingNeuron

__all__ = ["ModuleState", "step"]


@dataclass(frozen=True)
class ModuleState:
    """What a module carries between steps: ``t`` steps taken; ``potentials``: ``V_{t-1} [B, ...]`` by
    each neuron's qualified name (absent before its first step: the rest potential); ``masks``: the
    keep mask ``[B, ...]`` by each time-invariant dropout's name, drawn at the first training step."""

    t: int = 0
    potentials: dict = field(default_factory=dict)
    masks: dict = field(default_factory=dict)

    def detach(self) -> "ModuleState":
        """The same state cut from the autograd graph (truncated backpropagation through time)."""
        return ModuleState(self.t, {k: v.detach() for k, v in self.potentials.items()}, dict(self.masks))


def _refusals(model: nn.Module) -> None:
    from .fusion import fused_blocks

    per_step = {id(m.layer) for m in model.modules() if isinstance(m, PerStepBatchNorm)}
    for name, m in model.named_modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm) and id(m) not in per_step and (
                m.training or m.running_mean is None):
            raise ValueError(f"plif.step: {name or 'the model'} ({type(m).__name__}) normalises over all T*B inputs "
                             "of a batch in training, which needs every step at once; step in eval mode")
    if model.training and fused_blocks(model):
        raise ValueError("plif.step: the model is fused and in training mode, where its fused blocks run the neurons "
                         "inside their kernels; step it in eval mode, or call plif.fuse(model, 'none') first")


def step(model: nn.Module, x_t: torch.Tensor, state: ModuleState | None = None):
    """One time-step of ``model``: ``x_t [B, ...]`` -> ``(out_t [B, ...], next state)``; ``state``
    ``None`` starts at rest.  Pure in the state (the one given is not changed).  Where and how:
    :mod:`plif.models.module_stepping`."""
    from .network import SpikingNetwork

    if not isinstance(model, nn.Module):
        raise TypeError(f"plif.step takes an nn.Module, got {type(model).__name__}")
    if not isinstance(x_t, torch.Tensor):
        raise TypeError(f"plif.step: x_t must be a torch.Tensor [B, ...] (one time-step), got {type(x_t).__name__}")
    if isinstance(model, SpikingNetwork):
        return model.step(x_t, state)
    if state is None:
        state = ModuleState()
    elif not isinstance(state, ModuleState):
        raise TypeError(f"plif.step: state must be the ModuleState a previous plif.step returned (or None), got "
                        f"{type(state).__name__}")
    elif isinstance(state.t, bool) or not isinstance(state.t, int) or state.t < 0:
        raise ValueError(f"plif.step: state.t must be the number of steps taken (an integer >= 0), got {state.t!r}")
    _refusals(model)
    potentials, masks, calls = dict(state.potentials), dict(state.masks), {}
    patched = []

    def neuron_forward(name, m):
        def forward(x, v0=None, return_state=False):
            calls[name] = calls.get(name, 0) + 1
            if calls[name] > 1:
                raise ValueError(f"plif.step: neuron {name} is called more than once per forward; which call "
                                 "would carry its state to the next step is not defined")
            spikes, potentials[name] = type(m).forward(m, x, v0=potentials.get(name), return_state=True)
            return spikes
        return forward

    def dropout_forward(name, m):
        def forward(x):
            if not m.training:
                return x
            if name not in masks:
                masks[name] = m.mask(x)  # None when p = 0
            return x if masks[name] is None else x * masks[name]
        return forward

    for name, m in model.named_modules():
        if isinstance(m, SpikingNeuron):
            patched.append((m, neuron_forward(name, m)))
        elif isinstance(m, TimeInvariantDropout):
            patched.append((m, dropout_forward(name, m)))
    try:
        for m, forward in patched:
            m.forward = forward
        out = model(x_t.unsqueeze(0))
    finally:
        for m, _ in patched:
            m.__dict__.pop("forward", None)
    if not isinstance(out, torch.Tensor) or out.dim() < 2 or tuple(out.shape[:2]) != (1, x_t.shape[0]):
        shape = list(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise ValueError(f"plif.step: the model's output for one step is {shape}, not [1, B={x_t.shape[0]}, ...]: "
                         "a forward that reduces over time (or puts the batch first) cannot be given step by step")
    return out[0], ModuleState(state.t + 1, potentials, masks)
