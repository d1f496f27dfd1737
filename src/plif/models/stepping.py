"""A :class:`~plif.models.SpikingNetwork` run one time-step at a time with carried state: streaming
input and online inference.

    state = net.initial_state()
    for x_t in frames:                      # x_t [B, *input_shape]
        out_t, state = net.step(x_t, state)  # out_t [B, classes]

The state is what the multi-step forward keeps from one step to the next: each neuron layer's
potential ``V_t`` and each dropout layer's keep mask, which is drawn at the first step and reused at
every later one (the multi-step forward draws it once per sample, in the same layer order, so a
seeded generator gives the same masks).  Every other layer runs on the frame with a time dimension
of one, through the same module the multi-step forward runs; in eval mode stepping through ``T``
frames gives that forward's output bit for bit (on the CPU, where a layer computes each sample the
same way in a batch of ``B`` as in one of ``T*B``; a GPU convolution library may choose another
algorithm for the smaller batch), and beyond ``T`` it keeps going (a stream).

In training the same holds for dropout and for BatchNorm with statistics per time-step
(``bn_per_step=True``: each step normalises its own frame, as in the multi-step forward), for the
``T`` steps of a training batch: a training step past ``T`` through a per-step BatchNorm is refused.  A
BatchNorm whose statistics run over all ``T*B`` inputs of a batch (the default in training, or one
without running statistics) needs every step at once: stepping refuses it, naming the layer.
Stepping ignores the training memory plan (:mod:`plif.models.memory`), which changes what backward
keeps, never the output.  Under bf16 autocast the potential carried between steps is rounded to bf16
(the neurons return ``V`` in the input's dtype), so only fp32 and fp64 step bit for bit.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ..layers import PerStepBatchNorm, TimeFolded, TimeInvariantDropout
from ..neurons import SpikingNeuron

__all__ = ["NetworkState", "initial_state", "step", "check_training_step"]


@dataclass(frozen=True)
class NetworkState:
    """What a network carries between steps.

    t: steps taken.  potentials: ``V_{t-1} [B, ...]`` per neuron layer, in layer order (``None``
    before the first step: the rest potential).  masks: the scaled keep mask ``[B, ...]`` per dropout
    layer (``None`` before the first step, and in eval mode or with ``p = 0``)."""

    t: int
    potentials: tuple
    masks: tuple

    def detach(self) -> "NetworkState":
        """The same state cut from the autograd graph (truncated backpropagation through time)."""
        return NetworkState(self.t, tuple(None if v is None else v.detach() for v in self.potentials), self.masks)

    def to(self, *args, **kwargs) -> "NetworkState":
        """The same state with every tensor moved or cast as ``Tensor.to(*args, **kwargs)`` does it
        (``state.to("cuda")``, ``state.to(torch.float64)``, ``state.to(x)``); autograd follows the copy."""
        try:  # the arguments are checked on an empty tensor first, so a bad one is refused even with no potential yet
            torch.empty(0).to(*args, **kwargs)
        except (RuntimeError, TypeError, AssertionError) as e:
            given = ", ".join([*map(repr, args), *(f"{k}={v!r}" for k, v in kwargs.items())])
            reason = (str(e).strip().splitlines() or [type(e).__name__])[0][:160]
            raise (TypeError if isinstance(e, TypeError) else ValueError)(
                f"NetworkState.to({given}): takes what Tensor.to takes (a device such as 'cpu' or 'cuda:0', a dtype "
                f"such as torch.float64, or a tensor); torch says: {reason}") from None

        def move(vs):
            return tuple(None if v is None else v.to(*args, **kwargs) for v in vs)

        return NetworkState(self.t, move(self.potentials), move(self.masks))


def initial_state(layers) -> NetworkState:
    """The state before the first step of ``layers``: every neuron at rest, no dropout mask drawn."""
    neurons = sum(isinstance(m, SpikingNeuron) for m in layers)
    dropouts = sum(isinstance(m, TimeInvariantDropout) for m in layers)
    return NetworkState(0, (None,) * neurons, (None,) * dropouts)


def _batch_statistics(layer: nn.Module) -> bool:
    """Whether ``layer`` is a BatchNorm normalising with the statistics of all ``T*B`` inputs (as
    ``_BatchNorm.forward`` decides it); a per-step BatchNorm normalises each step alone."""
    if isinstance(layer, PerStepBatchNorm) or not isinstance(layer, TimeFolded):
        return False
    bn = layer.layer
    return isinstance(bn, nn.modules.batchnorm._BatchNorm) and (
        bn.training or (bn.running_mean is None and bn.running_var is None))


def check_training_step(layers, t: int, T: int) -> None:
    """Refuse a training step past ``T`` (``t``: the steps taken) through a per-step BatchNorm in
    training: it would update its running statistics more often than a training batch of ``T`` steps
    does, and normalise step ``t + 1`` with statistics no multi-step batch has."""
    if t < T:
        return
    for i, m in enumerate(layers):
        if isinstance(m, PerStepBatchNorm) and m.layer.training:
            raise ValueError(f"net.step(): step {t + 1} is past T = {T} in training, through a per-step BatchNorm "
                             f"(layer {i}) that a training batch runs T times; start the next batch with "
                             "net.initial_state(), or step in eval mode (a stream goes on past T)")


def step(layers, x_t: torch.Tensor, state: NetworkState) -> tuple[torch.Tensor, NetworkState]:
    """One time-step through ``layers``: ``x_t [B, ...]`` -> ``(out_t [B, ...], next state)``.

    Pure: ``state`` is not changed; the returned one holds the new potentials (and, after the first
    training step, the dropout masks).  ``state`` is taken as it is: :meth:`SpikingNetwork.step`
    checks it against the network first (:func:`plif.models.inputs.check_state`)."""
    potentials, masks = list(state.potentials), list(state.masks)
    n = d = 0
    x = x_t.unsqueeze(0)  # [1, B, ...]: every layer takes time first
    for i, m in enumerate(layers):
        if isinstance(m, SpikingNeuron):
            x, potentials[n] = m(x, v0=potentials[n], return_state=True)
            n += 1
        elif isinstance(m, TimeInvariantDropout):
            if m.training and masks[d] is None:
                masks[d] = m.mask(x)  # None when p = 0
            if m.training and masks[d] is not None:
                x = x * masks[d]
            d += 1
        else:
            if _batch_statistics(m):
                raise ValueError(f"step(): layer {i} ({type(m.layer).__name__}) normalises over all T*B inputs of a "
                                 "batch in training, which needs every step at once; step in eval mode, or build "
                                 "the network with bn_per_step=True")
            x = m(x)
    return x[0], NetworkState(state.t + 1, tuple(potentials), tuple(masks))
