"""The optimiser and learning-rate schedule of a run (``--optimizer``, ``--momentum``, ``--nesterov``,
``--weight-decay``, ``--warmup-epochs``).

The paper's is Adam without weight decay and cosine annealing (its supplement, Hyper-Parameters):
fused where torch has it, capturable for CUDA graphs, built exactly as before when nothing else is
asked.  SGD (with momentum, optionally Nesterov's) is what SEW ResNet (Fang et al., NeurIPS 2021)
trains with.  A linear warm-up takes the first epochs of the cosine period (:class:`WarmupCosineLR`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

__all__ = ["OPTIMIZERS", "Recipe", "adam", "graph_adam", "sgd", "fused_adam_supported", "build_optimizer",
           "build_schedule", "warmup_cosine_factor", "WarmupCosineLR"]

OPTIMIZERS = ("adam", "sgd")
"""The names ``--optimizer`` takes; ``adam`` is the paper's."""


@dataclass(frozen=True)
class Recipe:
    """The optimiser settings of a run (:meth:`plif.train.TrainConfig.recipe`); the defaults are the paper's."""

    optimizer: str = "adam"
    lr: float = 1e-3
    momentum: float = 0.9  # SGD's only
    nesterov: bool = False  # SGD's only
    weight_decay: float = 0.0
    warmup_epochs: int = 0
    t_max: int = 64


def fused_adam_supported(device_type: str, version: str | None = None) -> bool:
    """Fused Adam exists for CUDA since torch 2.0 and for the CPU only since 2.4."""
    version = version or torch.__version__
    major, minor = (int(v) for v in version.split("+")[0].split(".")[:2])
    return (major, minor) >= ((2, 4) if device_type == "cpu" else (2, 0))


def adam(params, lr: float, capturable: bool = False, weight_decay: float = 0.0) -> torch.optim.Adam:
    """The paper's optimiser (Adam, no weight decay) in its fused form: one kernel over all
    parameters instead of ~10 ops per tensor, which is a tenth of a CPU step on the paper's network.
    Where this torch has no fused Adam for the parameters' device, the multi-tensor form is used.
    ``weight_decay``: torch's L2 term added to the gradient (``--weight-decay``; 0 is the paper's)."""
    params = list(params)
    device_type = params[0].device.type if params else "cpu"
    extra = {"weight_decay": weight_decay} if weight_decay else {}  # the paper's: torch's default, untouched
    if fused_adam_supported(device_type):
        return torch.optim.Adam(params, lr=lr, fused=True, capturable=capturable, **extra)
    return torch.optim.Adam(params, lr=lr, foreach=True, capturable=capturable, **extra)


def graph_adam(params, lr: float, device: torch.device, weight_decay: float = 0.0) -> torch.optim.Adam:
    """``--cuda-graph``'s Adam: fused, with the learning rate in a device tensor (the cosine
    schedule fills it between epochs, so a captured step never changes), capturable on CUDA."""
    extra = {"weight_decay": weight_decay} if weight_decay else {}
    return torch.optim.Adam(params, lr=torch.tensor(float(lr), device=device), fused=True,
                            capturable=device.type == "cuda", **extra)


def sgd(params, lr, momentum: float = 0.9, nesterov: bool = False, weight_decay: float = 0.0) -> torch.optim.SGD:
    """SGD with momentum (``dampening`` 0, so a momentum buffer starting at 0 equals a fresh one), fused:
    one kernel over all parameters.  ``lr`` a float, or a device tensor for ``--cuda-graph`` (the
    schedule fills it in place and the captured step reads it)."""
    return torch.optim.SGD(list(params), lr=lr, momentum=momentum, nesterov=nesterov, weight_decay=weight_decay,
                           fused=True)


def build_optimizer(params, recipe: Recipe, device: torch.device, graph: bool = False) -> torch.optim.Optimizer:
    """The optimiser ``recipe`` names; ``graph``: the learning rate in a device tensor (``--cuda-graph``)."""
    if recipe.optimizer == "adam":
        if graph:
            return graph_adam(params, recipe.lr, device, recipe.weight_decay)
        return adam(params, recipe.lr, weight_decay=recipe.weight_decay)
    if recipe.optimizer == "sgd":
        lr = torch.tensor(float(recipe.lr), device=device) if graph else recipe.lr
        return sgd(params, lr, recipe.momentum, recipe.nesterov, recipe.weight_decay)
    raise ValueError(f"--optimizer {recipe.optimizer!r}: unknown; valid: {', '.join(OPTIMIZERS)}")


def warmup_cosine_factor(epoch: int, warmup: int, period: int) -> float:
    """The factor of the base learning rate in epoch ``epoch`` (from 0): ``(epoch + 1) / (warmup + 1)``
    in the ``warmup`` first epochs, then cosine annealing from 1 over the rest of the ``period``:
    ``(1 + cos(pi * (epoch - warmup) / (period - warmup))) / 2``.  ``warmup`` 0 is torch's
    ``CosineAnnealingLR`` with ``T_max = period`` (``eta_min`` 0)."""
    if epoch < warmup:
        return (epoch + 1) / (warmup + 1)
    return (1 + math.cos(math.pi * (epoch - warmup) / (period - warmup))) / 2


class WarmupCosineLR(torch.optim.lr_scheduler.LRScheduler):
    """``--warmup-epochs``: :func:`warmup_cosine_factor` per epoch, in closed form (its state is the
    epoch, ``warmup`` and ``T_max``, so a resume, and a resume that stretches the period, goes on
    exactly).  A learning rate held in a device tensor (``--cuda-graph``) is filled in place."""

    def __init__(self, optimizer: torch.optim.Optimizer, warmup: int, T_max: int, last_epoch: int = -1):
        if not 0 < warmup < T_max:
            raise ValueError(f"--warmup-epochs {warmup}: must be at least 1 and below the cosine period {T_max}")
        self.warmup, self.T_max, self.eta_min = warmup, T_max, 0.0
        super().__init__(optimizer, last_epoch)

    def lr_at(self, base_lr: float, epoch: int) -> float:
        """The learning rate of epoch ``epoch`` for a group whose base rate is ``base_lr``."""
        return base_lr * warmup_cosine_factor(epoch, self.warmup, self.T_max)

    def get_lr(self) -> list[float]:
        return [self.lr_at(base, self.last_epoch) for base in self.base_lrs]


def build_schedule(optimizer: torch.optim.Optimizer, recipe: Recipe):
    """Cosine annealing over ``t_max`` epochs (the paper's: torch's ``CosineAnnealingLR``), after
    ``warmup_epochs`` of linear warm-up where asked (:class:`WarmupCosineLR`)."""
    if recipe.warmup_epochs:
        return WarmupCosineLR(optimizer, recipe.warmup_epochs, recipe.t_max)
    return torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=recipe.t_max)
