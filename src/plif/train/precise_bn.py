"""Precise BN: BatchNorm's running statistics re-estimated from the training samples after an epoch
too short for its running averages to forget what they held before.

BatchNorm keeps exponential averages (momentum 0.1): after k steps a share ``0.9**k`` of the values
they started the epoch with is still in them, 43 % after the 8 steps of a 512-sample epoch at
batch 64, whose run then tests at chance (10.0 % on real Fashion-MNIST, against 42-49 % with the
statistics re-estimated; REPRODUCTION.md).  An epoch of fewer than :func:`steps_to_forget` steps
(44 at momentum 0.1) therefore ends with one forward pass over the training split, without
augmentation, with every BatchNorm in training mode and a cumulative average (dropout off, no
gradients), before the epoch is evaluated and saved.  Longer epochs, every normal run, are left
as they are.  Only the running statistics change, never a weight, so training is unaffected and a
resumed run stays bit-exact.
"""
from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["steps_to_forget", "precise_bn_note", "reestimate_bn"]

FORGOTTEN = 0.01  # the share of the old running values an epoch may leave in them


def _batchnorms(model: nn.Module) -> list[nn.modules.batchnorm._BatchNorm]:
    return [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.track_running_stats]


def steps_to_forget(momentum: float) -> int:
    """Steps after which exponential averages of this momentum keep at most :data:`FORGOTTEN` of their start."""
    return math.ceil(math.log(FORGOTTEN) / math.log(1 - momentum)) if 0 < momentum < 1 else 1


def _steps_needed(model: nn.Module) -> int:
    return max((steps_to_forget(m.momentum) for m in _batchnorms(model) if m.momentum is not None), default=0)


def precise_bn_note(model: nn.Module, steps_per_epoch: int) -> str | None:
    """The line a run logs once when its epochs need precise BN, else None: when an epoch of
    ``steps_per_epoch`` steps leaves more than :data:`FORGOTTEN` of some BatchNorm's previous running
    statistics in them."""
    need = _steps_needed(model)
    if steps_per_epoch >= need:
        return None
    return (f"precise BN: {steps_per_epoch} steps an epoch are too few for BatchNorm's running averages (they need "
            f"{need} to forget the previous epoch's); they are re-estimated on the training split after each epoch, before it is evaluated and saved")


@torch.no_grad()
def reestimate_bn(model: nn.Module, batches, all_reduce=None, world: int = 1) -> None:
    """Set every BatchNorm's running mean and variance to their average over ``batches`` (inputs
    ``x`` of ``(x, y)``), the rest of the network in eval mode.  all_reduce: sums a tensor over the
    ``world`` processes, each of which passed its own share (torchrun): they end with the mean."""
    bns = _batchnorms(model)
    was_training, momenta = model.training, [m.momentum for m in bns]
    model.eval()  # dropout off; the memory-saving paths of training need gradients and stay off too
    try:
        for m in bns:
            m.reset_running_stats()
            m.momentum = None  # a cumulative average over the batches
            m.train()
        for x, _ in batches:
            model(x)
    finally:
        for m, momentum in zip(bns, momenta):
            m.momentum = momentum
        model.train(was_training)
    if all_reduce is not None and world > 1:
        for m in bns:
            both = all_reduce(torch.cat([m.running_mean, m.running_var])) / world
            m.running_mean.copy_(both[:m.running_mean.numel()])
            m.running_var.copy_(both[m.running_mean.numel():])
