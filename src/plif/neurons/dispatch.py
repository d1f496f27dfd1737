"""One entry point for multi-step execution, with pluggable implementations (backends).

A backend is ``fn(x, k, v0, cfg) -> (spikes, v_last)`` where ``x [T, B, ...]``, ``k`` a tensor
broadcastable to ``x[0]`` and ``v0`` a full ``[B, ...]`` state.  ``reference`` and ``bptt`` are
always present.  The fused kernels are the neuron kernels of :data:`plif.kernel_table.KERNELS`,
imported by its loader the first time a backend is asked for, so ``plif.neurons`` never imports
``plif.kernels`` at import time (no cycle).  A fused backend that fails to load keeps its reason
(:func:`backend_status`), is named in the error when it is asked for by name, and triggers one
warning when ``auto`` has to fall back to ``bptt`` because of it.  A custom surrogate
(:func:`plif.surrogate.register_surrogate`) runs in the fused kernels when it declares one of their
closed forms; otherwise ``auto`` runs it on ``bptt`` with one notice per surrogate, and naming a
fused backend for it is an error.  Nothing is swallowed silently.

bf16 and fp16 inputs (autocast) keep an fp32 potential and ``k`` on every backend
(:func:`~plif.neurons.functional.state_dtype`): the fused kernels read the input as it is and keep
fp32 state; ``bptt`` and ``reference`` run on an fp32 copy, and their spikes and ``V_{T-1}`` come
back in the input's dtype, as the kernels' do.
"""
from __future__ import annotations

import warnings
from typing import Callable

import torch

from .. import kernel_table
from ..kernel_table import Kernel
from ..surrogate import get_surrogate
from .bptt import multi_step_bptt
from .functional import NeuronConfig, initial_state, state_dtype
from .reference import multi_step_reference

__all__ = ["BACKENDS", "register_backend", "multi_step", "available_backends", "backend_status", "load_backends",
           "select_backend", "auto_order", "check_backend"]

Backend = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, NeuronConfig], tuple]

_FUSED: dict[str, Kernel] = kernel_table.KERNELS["neuron"]  # the fused neuron kernels, in auto order (the table's own)

BACKENDS: dict[str, Backend] = {"reference": multi_step_reference, "bptt": multi_step_bptt}
"""Every backend :func:`multi_step` can run by name: ``reference``, ``bptt``, and the fused kernels
that loaded (``triton``, ``cpu``) or were registered; each maps ``(x [T, B, ...], k, v0, cfg)`` to
``(spikes [T, B, ...], V_{T-1} [B, ...])``."""
_SUPPORTS: dict[str, Callable[[torch.Tensor, NeuronConfig], bool]] = {}
_UNLOADED: dict[str, str] = {}  # fused kernel -> its device, for those that did not load (the table says why)
_WARNED: set[str] = set()
_filled = False  # BACKENDS, _SUPPORTS and _UNLOADED hold the table's neuron kernels


def register_backend(name: str, fn: Backend, supports: Callable | None = None) -> None:
    """Add an extra backend (tests, experiments); with ``supports`` ``auto`` may pick it, after the fused ones."""
    load_backends()  # the fused ones first, so they keep their place ahead of this one in ``auto``
    BACKENDS[name] = fn
    if supports is not None:
        _SUPPORTS[name] = supports


def load_backends() -> None:
    """Load the fused neuron kernels of :data:`plif.kernel_table.KERNELS` once (idempotent) and make
    those that loaded backends.  Layers call this when they are built so that a ``torch.compile``
    trace never has to import anything."""
    global _filled
    if _filled:
        return
    _filled = True
    for name in _FUSED:
        found = kernel_table.functions("neuron", name)
        if found is not None:
            BACKENDS[name] = found["fn"]
            _SUPPORTS[name] = found["supports"]
        else:
            _UNLOADED[name] = _FUSED[name].device


def _forget() -> None:
    """Back to the PyTorch backends only, no extra ones, no warnings remembered (the table's reset)."""
    global _filled
    BACKENDS.clear()
    BACKENDS.update(reference=multi_step_reference, bptt=multi_step_bptt)
    _SUPPORTS.clear()
    _UNLOADED.clear()
    _WARNED.clear()
    _filled = False


kernel_table.on_reset(_forget)


def auto_order() -> list[str]:
    """The backends ``auto`` may pick, in the order it tries them."""
    load_backends()
    return list(_SUPPORTS)


def available_backends() -> list[str]:
    """Names that :func:`multi_step` accepts here (the fused ones only when they loaded)."""
    load_backends()
    return list(BACKENDS)


def backend_status() -> dict[str, str]:
    """Every backend with ``"ok"`` or ``"unavailable: <reason>"`` (the fused ones as
    :func:`plif.kernel_table.status` has them)."""
    load_backends()
    status = {name: "ok" for name in BACKENDS}
    status.update({name: f"unavailable: {why}" for name in _FUSED if (why := kernel_table.failure("neuron", name))})
    return status


def _warn_once(name: str, message: str) -> None:
    if name not in _WARNED:
        _WARNED.add(name)
        warnings.warn(message, RuntimeWarning, stacklevel=3)


def _first_use_checked(name: str, x: torch.Tensor) -> bool:
    """A Triton kernel checks itself on first use: :mod:`plif.kernels.self_check` puts its check here
    when the Triton kernels load (the neuron layer sits below the kernels and imports none of them)."""
    check = _FIRST_USE_CHECK
    return True if check is None else check("neuron", name, x.device, x.dtype)


_FIRST_USE_CHECK: Callable | None = None


def set_first_use_check(check: Callable | None) -> None:
    """``check(family, name, device, dtype) -> bool``: whether backend ``name`` may run there (None: all may)."""
    global _FIRST_USE_CHECK
    _FIRST_USE_CHECK = check


def select_backend(x: torch.Tensor, cfg: NeuronConfig) -> str:
    """The backend ``auto`` uses for this input: the first fused kernel that supports it, else ``bptt``.

    Warns once when a fused backend meant for ``x``'s device failed to load, and once per custom
    surrogate without a closed form of the kernels (those run on ``bptt``)."""
    load_backends()
    if not get_surrogate(cfg.surrogate).fused:
        _warn_once(f"surrogate {cfg.surrogate}",
                   f"plif: surrogate {cfg.surrogate!r} declares no closed form of the fused kernels; backend='auto' "
                   f"runs it on 'bptt' (same gradients, slower; register_surrogate's closed_form puts it in the kernels)")
        return "bptt"
    for name, supports in _SUPPORTS.items():
        if supports(x, cfg) and _first_use_checked(name, x):
            return name
    for name, device in _UNLOADED.items():
        if device == x.device.type:
            _warn_once(name, f"plif: the fused {name!r} neuron backend failed to load "
                             f"({kernel_table.failure('neuron', name)}); "
                             f"backend='auto' falls back to 'bptt', which is several times slower")
    return "bptt"


def check_backend(name: str, device: torch.device | str | None = None, surrogate: str | None = None,
                  option: str = "backend") -> None:
    """Refuse a backend that :func:`multi_step` could not run, before anything runs (the one check of a
    backend name: layers, networks and the training config call it; ``option`` names it in the message).

    ``auto`` is always valid.  Otherwise the name must be a backend here (``RuntimeError`` with the
    reason for a fused kernel that failed to load), a fused kernel must be meant for ``device``'s type,
    and it must have ``surrogate`` among its closed forms."""
    if name == "auto":
        return
    if name not in BACKENDS:
        load_backends()
    if name in _UNLOADED:
        raise RuntimeError(f"{option} {name!r}: the kernel failed to load here: {kernel_table.failure('neuron', name)}")
    if name not in BACKENDS:
        raise ValueError(f"{option} {name!r}: unknown; available: auto, {', '.join(BACKENDS)}")
    fused = _FUSED.get(name)
    if fused is None:
        return
    kind = torch.device(device).type if device is not None else None
    if kind is not None and not fused.runs_on(kind):
        raise ValueError(f"{option} {name!r}: a {fused.device} kernel, but this runs on {kind}; use {option} auto")
    if surrogate is not None and not get_surrogate(surrogate).fused:
        raise ValueError(f"{option} {name!r}: the fused kernels have only their closed-form surrogates; "
                         f"surrogate {surrogate!r} runs on bptt, reference or auto")


def multi_step(x: torch.Tensor, k=None, v0: torch.Tensor | None = None,
               cfg: NeuronConfig = NeuronConfig(), backend: str = "auto"):
    """Run a neuron layer over all time-steps of ``x [T, B, ...]``.

    Returns ``(spikes [T, B, ...], V_{T-1} [B, ...])``.  ``k`` (float or tensor broadcastable to
    ``x[0]``) is ``1/τ``; ``v0=None`` starts every neuron at the rest potential.

    Example: a LIF layer with τ = 2 as a function; every backend computes the same spikes:

    >>> import torch
    >>> from plif.neurons import NeuronConfig, multi_step
    >>> x = torch.rand(8, 2, 16) * 2                     # [T, B, N]
    >>> spikes, v_last = multi_step(x, k=0.5)            # backend "auto": a fused kernel where one runs
    >>> spikes.shape, v_last.shape
    (torch.Size([8, 2, 16]), torch.Size([2, 16]))
    >>> torch.equal(spikes, multi_step(x, k=0.5, backend="reference")[0])   # the loop that is the spec
    True
    >>> soft, _ = multi_step(x, k=0.5, cfg=NeuronConfig(v_reset=None))      # soft reset: subtract V_th
    """
    if x.dim() < 2:
        raise ValueError(f"multi-step input must be [T, B, ...], got shape {tuple(x.shape)}")
    if not torch.is_tensor(k):
        k = torch.full((), 1.0 if k is None else float(k), dtype=state_dtype(x.dtype), device=x.device)
    if v0 is None:
        v0 = initial_state(x[0], cfg)
    elif v0.shape != x.shape[1:]:
        v0 = v0.expand(x.shape[1:]).contiguous()
    if backend == "auto":
        name = select_backend(x, cfg)
    else:
        check_backend(backend, x.device, cfg.surrogate)
        name = backend
    fn = BACKENDS[name]
    if state_dtype(x.dtype) != x.dtype and name not in _FUSED:  # the PyTorch loops: fp32 state, as in the kernels
        spikes, v_last = fn(x.float(), k.float(), v0.float(), cfg)
        return spikes.to(x.dtype), v_last.to(x.dtype)
    return fn(x, k, v0, cfg)
