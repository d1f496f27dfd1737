"""Neuron dynamics as pure functions: ``(x, state, params) -> (spikes, new_state)``.

Per step, with input ``X_t`` and the potential after reset ``V_{t-1}``:

    charge  H_t = V_{t-1} + k (X_t - (V_{t-1} - V_reset))      (LIF, PLIF; IF: H_t = V_{t-1} + X_t)
    fire    S_t = Θ(H_t - V_th)
    reset   V_t = H_t (1 - S_t) + V_reset S_t                  (hard)
            V_t = H_t - V_th S_t                               (soft, ``v_reset=None``)

``k = 1/τ``: a fixed float for LIF, ``sigmoid(w)`` for PLIF.  With soft reset the leak pulls the
potential towards 0.  Nothing here mutates its arguments.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..surrogate import get_surrogate, heaviside, spike_fn

__all__ = ["NeuronConfig", "charge", "fire", "reset", "neuron_step", "rest_potential", "initial_state", "state_dtype"]


@dataclass(frozen=True)
class NeuronConfig:
    """Everything about a neuron layer except its time constant.

    - leak: False for IF (no leak, ``k`` ignored), True for LIF/PLIF.
    - v_threshold: the firing threshold ``V_th``.
    - v_reset: the hard-reset potential, or ``None`` for soft reset (subtract ``v_threshold``).
    - detach_reset: cut the reset path out of the backward graph (paper default).
    - surrogate, alpha: the surrogate gradient's name (:func:`plif.surrogate.get_surrogate`) and its
      sharpness; ``alpha=None`` becomes that surrogate's default.
    """

    leak: bool = True
    v_threshold: float = 1.0
    v_reset: float | None = 0.0
    detach_reset: bool = True
    surrogate: str = "atan"
    alpha: float | None = None

    def __post_init__(self):
        sg = get_surrogate(self.surrogate)
        if self.alpha is None:
            object.__setattr__(self, "alpha", sg.default_alpha)
        if self.v_reset is not None and self.v_reset >= self.v_threshold:
            raise ValueError(f"v_reset ({self.v_reset}) must be below v_threshold ({self.v_threshold})")

    @property
    def hard_reset(self) -> bool:
        """True unless ``v_reset`` is None (soft reset)."""
        return self.v_reset is not None


def state_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype of the potential and of ``k`` for inputs of ``dtype``: fp32 for bf16/fp16 (autocast), else ``dtype``."""
    return torch.float32 if dtype in (torch.bfloat16, torch.float16) else dtype


def rest_potential(cfg: NeuronConfig) -> float:
    """The potential the leak pulls towards and every sample starts from."""
    return cfg.v_reset if cfg.v_reset is not None else 0.0


def initial_state(x_t: torch.Tensor, cfg: NeuronConfig) -> torch.Tensor:
    """``V_{-1}``: a fresh state shaped like one step of input, at the rest potential, in :func:`state_dtype`."""
    return torch.full_like(x_t, rest_potential(cfg), dtype=state_dtype(x_t.dtype))


def charge(x_t: torch.Tensor, v: torch.Tensor, k, cfg: NeuronConfig) -> torch.Tensor:
    """``H_t`` from ``X_t`` and ``V_{t-1}`` (``x_t``, ``v`` ``[B, ...]``; ``k`` broadcastable to them)."""
    if not cfg.leak:
        return v + x_t
    return v + k * (x_t - (v - rest_potential(cfg)))


def fire(h: torch.Tensor, cfg: NeuronConfig, differentiable: bool = True) -> torch.Tensor:
    """``S_t = Θ(H_t - V_th)``, shaped like ``h``; with ``differentiable`` the surrogate defines the backward."""
    if differentiable:
        return spike_fn(h - cfg.v_threshold, cfg.surrogate, cfg.alpha)
    return heaviside(h - cfg.v_threshold)


def reset(h: torch.Tensor, s: torch.Tensor, cfg: NeuronConfig) -> torch.Tensor:
    """``V_t`` from ``H_t`` and ``S_t``, both ``[B, ...]`` (the caller detaches ``s`` for ``detach_reset``)."""
    if cfg.hard_reset:
        return h * (1 - s) + cfg.v_reset * s
    return h - cfg.v_threshold * s


def neuron_step(x_t: torch.Tensor, v: torch.Tensor | None, k, cfg: NeuronConfig):
    """One time-step: returns ``(S_t, V_t)``; ``v=None`` starts from the rest potential.

    Shapes: ``x_t`` and ``v`` ``[B, ...]``; ``k`` a float or a tensor broadcastable to them.
    """
    if v is None:
        v = initial_state(x_t, cfg)
    h = charge(x_t, v, k, cfg)  # charge
    s = fire(h, cfg)  # fire
    v_next = reset(h, s.detach() if cfg.detach_reset else s, cfg)  # reset
    return s, v_next
