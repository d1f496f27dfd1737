"""One entry point for multi-step execution, with pluggable implementations (backends).

A backend is ``fn(x, k, v0, cfg) -> (spikes, v_last)`` where ``x [T, B, ...]``, ``k`` a tensor
broadcastable to ``x[0]`` and ``v0`` a full ``[B, ...]`` state.  ``reference`` and ``bptt`` are
always present; fused kernels register themselves (``plif.kernels``) and ``auto`` picks the
fastest that supports the input.
"""
from __future__ import annotations

from typing import Callable

import torch

from .bptt import multi_step_bptt
from .functional import NeuronConfig, initial_state
from .reference import multi_step_reference

__all__ = ["BACKENDS", "register_backend", "multi_step", "available_backends", "select_backend"]

Backend = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, NeuronConfig], tuple]

BACKENDS: dict[str, Backend] = {"reference": multi_step_reference, "bptt": multi_step_bptt}
# Predicates deciding whether an optional backend can take an input; consulted by "auto" in order.
_AUTO_ORDER: list[tuple[str, Callable[[torch.Tensor, NeuronConfig], bool]]] = []
_kernels_loaded = False


def register_backend(name: str, fn: Backend, supports: Callable | None = None, priority: int = 0):
    """Add a backend; with ``supports`` it also becomes a candidate for ``backend="auto"``."""
    BACKENDS[name] = fn
    if supports is not None:
        _AUTO_ORDER.insert(priority if priority >= 0 else len(_AUTO_ORDER), (name, supports))


def _load_kernels():
    global _kernels_loaded
    if not _kernels_loaded:
        _kernels_loaded = True
        try:
            import plif.kernels  # noqa: F401  (registers the fused backends)
        except ImportError:
            pass


def available_backends() -> list[str]:
    _load_kernels()
    return list(BACKENDS)


def select_backend(x: torch.Tensor, cfg: NeuronConfig) -> str:
    """The backend ``auto`` uses for this input: the first fused kernel that supports it, else ``bptt``."""
    _load_kernels()
    for name, supports in _AUTO_ORDER:
        if supports(x, cfg):
            return name
    return "bptt"


def multi_step(x: torch.Tensor, k=None, v0: torch.Tensor | None = None,
               cfg: NeuronConfig = NeuronConfig(), backend: str = "auto"):
    """Run a neuron layer over all time-steps of ``x [T, B, ...]``.

    Returns ``(spikes [T, B, ...], V_{T-1} [B, ...])``.  ``k`` (float or tensor broadcastable to
    ``x[0]``) is ``1/τ``; ``v0=None`` starts every neuron at the rest potential.
    """
    if x.dim() < 2:
        raise ValueError(f"multi-step input must be [T, B, ...], got shape {tuple(x.shape)}")
    if not torch.is_tensor(k):
        k = torch.full((), 1.0 if k is None else float(k), dtype=x.dtype, device=x.device)
    if v0 is None:
        v0 = initial_state(x[0], cfg)
    elif v0.shape != x.shape[1:]:
        v0 = v0.expand(x.shape[1:]).contiguous()
    name = select_backend(x, cfg) if backend == "auto" else backend
    if name not in BACKENDS:
        _load_kernels()
    try:
        fn = BACKENDS[name]
    except KeyError:
        raise ValueError(f"unknown backend {name!r}; available: {', '.join(available_backends())}") from None
    return fn(x, k, v0, cfg)
