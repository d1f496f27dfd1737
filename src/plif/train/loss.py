"""The losses of ``plif train --loss``: pure functions of the output ``[T, B, C]`` and the labels ``[B]``.

- ``mse`` (the paper's, the default): MSE between the voting layer's firing rate and the one-hot
  label.  The paper (Sec. 3.7, Training Framework) writes the MSE of every time-step's output against
  the label; the authors' code, and plif, take it on the rate (the mean over T), which is what the
  prediction (argmax of the rate) uses too.
- ``ce``: cross-entropy of the mean over T of the output, taken as logits (SEW ResNet, Fang et al.,
  NeurIPS 2021, trains so: its network returns the mean over T of its last layer).
- ``tet``: Temporal Efficient Training (Deng et al., *Temporal Efficient Training of Spiking
  Neural Network via Gradient Re-weighting*, ICLR 2022): the cross-entropy of every
  time-step's output, averaged over T, plus an MSE regulariser pulling every output towards a
  constant ``phi``: ``(1 - lambda) * mean_t CE(O(t), y) + lambda * mean_t MSE(O(t), phi)``, as its
  authors' code (``TET_loss``, defaults ``lamb=1e-3``, ``means=1.0``) computes it.

Each returns ``(loss, rate)``: the batch's mean loss and the mean over T of the output ``[B, C]``,
whose argmax is the prediction whatever the loss.  The ``per_sample_*`` forms return each sample's
loss ``[B]`` instead (their batch mean is the loss), for evaluation that masks padded samples out.
:class:`Loss` holds a run's choice (``--loss``, ``--label-smoothing``, ``--tet-lambda``, ``--tet-phi``).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

__all__ = ["LOSSES", "Loss", "firing_rate", "rate_mse_loss", "per_sample_rate_mse", "mean_ce_loss",
           "per_sample_mean_ce", "tet_loss", "per_sample_tet"]

LOSSES = ("mse", "ce", "tet")
"""The names ``--loss`` takes; ``mse`` is the paper's."""


def firing_rate(out: torch.Tensor) -> torch.Tensor:
    """``out [T, B, C]`` spikes -> firing rate ``[B, C]``; half-precision spikes (autocast) are
    averaged in fp32, so the rate is exact."""
    return out.mean(0, dtype=torch.float32) if out.dtype in (torch.bfloat16, torch.float16) else out.mean(0)


def rate_mse_loss(out: torch.Tensor, y: torch.Tensor, num_classes: int):
    """``out [T, B, C]`` spikes -> (MSE between firing rate and one-hot ``y``, firing rate ``[B, C]``)."""
    rate = firing_rate(out)
    return F.mse_loss(rate, F.one_hot(y, num_classes).to(rate.dtype)), rate


def per_sample_rate_mse(out: torch.Tensor, y: torch.Tensor, num_classes: int):
    """``out [T, B, C]`` -> (each sample's MSE ``[B]``, firing rate ``[B, C]``), for evaluation
    that masks padded samples out; its batch mean is :func:`rate_mse_loss`."""
    rate = firing_rate(out)
    return (rate - F.one_hot(y, num_classes).to(rate.dtype)).square().mean(1), rate


def per_sample_mean_ce(out: torch.Tensor, y: torch.Tensor, label_smoothing: float = 0.0):
    """``out [T, B, C]`` -> (cross-entropy of the mean over T ``[B]``, that mean ``[B, C]``)."""
    rate = firing_rate(out)
    return F.cross_entropy(rate, y, reduction="none", label_smoothing=label_smoothing), rate


def mean_ce_loss(out: torch.Tensor, y: torch.Tensor, label_smoothing: float = 0.0):
    """``out [T, B, C]`` -> (cross-entropy of the mean over T, batch mean; that mean ``[B, C]``)."""
    per_sample, rate = per_sample_mean_ce(out, y, label_smoothing)
    return per_sample.mean(), rate


def per_sample_tet(out: torch.Tensor, y: torch.Tensor, label_smoothing: float = 0.0, lamb: float = 1e-3,
                   phi: float = 1.0):
    """``out [T, B, C]`` -> (each sample's TET loss ``[B]``, the mean over T ``[B, C]``):
    ``(1 - lamb) * mean_t CE(out[t], y) + lamb * mean_{t,c} (out[t, :, c] - phi)^2``."""
    out32 = out.float() if out.dtype in (torch.bfloat16, torch.float16) else out
    T, B = out32.shape[:2]
    ce = F.cross_entropy(out32.flatten(0, 1), y.repeat(T), reduction="none", label_smoothing=label_smoothing)
    per_sample = (1 - lamb) * ce.view(T, B).mean(0)  # L_TET: every step's cross-entropy
    if lamb:
        per_sample = per_sample + lamb * (out32 - phi).square().mean((0, 2))  # L_MSE: outputs towards phi
    return per_sample, firing_rate(out)


def tet_loss(out: torch.Tensor, y: torch.Tensor, label_smoothing: float = 0.0, lamb: float = 1e-3, phi: float = 1.0):
    """``out [T, B, C]`` -> (TET loss, batch mean; the mean over T ``[B, C]``); see :func:`per_sample_tet`."""
    per_sample, rate = per_sample_tet(out, y, label_smoothing, lamb, phi)
    return per_sample.mean(), rate


@dataclass(frozen=True)
class Loss:
    """A run's loss: ``loss(out [T, B, C], y [B], num_classes) -> (loss, rate [B, C])``, and
    :meth:`per_sample` its ``[B]`` form.  The default is the paper's MSE, computed as before."""

    name: str = "mse"
    label_smoothing: float = 0.0
    tet_lambda: float = 1e-3
    tet_phi: float = 1.0

    def __post_init__(self):
        if self.name not in LOSSES:
            raise ValueError(f"loss {self.name!r}: unknown; valid: {', '.join(LOSSES)}")

    def __call__(self, out: torch.Tensor, y: torch.Tensor, num_classes: int):
        if self.name == "mse":
            return rate_mse_loss(out, y, num_classes)
        if self.name == "ce":
            return mean_ce_loss(out, y, self.label_smoothing)
        return tet_loss(out, y, self.label_smoothing, self.tet_lambda, self.tet_phi)

    def per_sample(self, out: torch.Tensor, y: torch.Tensor, num_classes: int):
        if self.name == "mse":
            return per_sample_rate_mse(out, y, num_classes)
        if self.name == "ce":
            return per_sample_mean_ce(out, y, self.label_smoothing)
        return per_sample_tet(out, y, self.label_smoothing, self.tet_lambda, self.tet_phi)
