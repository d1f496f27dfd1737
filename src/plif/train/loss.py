"""The loss: MSE between the voting layer's firing rate and the one-hot label.

The paper (Sec. 3.7, Training Framework) writes the MSE of every time-step's output against the
label; the authors' code, and plif, take it on the rate (the mean over T), which is what the
prediction (argmax of the rate) uses too.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["firing_rate", "rate_mse_loss", "per_sample_rate_mse"]


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
