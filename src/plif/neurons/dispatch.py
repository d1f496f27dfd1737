"""One entry point for multi-step execution, with pluggable implementations (backends).

A backend is ``fn(x, k, v0, cfg) -> (spikes, v_last)`` where ``x [T, B, ...]``, ``k`` a tensor
broadcastable to ``x[0]`` and ``v0`` a full ``[B, ...]`` state.  ``reference`` and ``bptt`` are
always present.  The fused kernels are listed in a static table (:data:`FUSED`) and imported
lazily the first time a backend is asked for, so ``plif.neurons`` never imports ``plif.kernels``
at import time (no cycle).  A fused backend that fails to load keeps its reason
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

import contextlib
import importlib
import os
import warnings
from dataclasses import dataclass
from typing import Callable

import torch

from ..surrogate import get_surrogate
from .bptt import multi_step_bptt
from .functional import NeuronConfig, initial_state, state_dtype
from .reference import multi_step_reference

__all__ = ["BACKENDS", "FUSED", "FusedBackend", "register_backend", "multi_step", "available_backends",
           "backend_status", "load_backends", "select_backend", "auto_order", "reset", "check_backend",
           "load_kernel_module", "kernels_deferred", "load_ahead"]

Backend = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, NeuronConfig], tuple]


@dataclass(frozen=True)
class FusedBackend:
    """Where a fused backend lives: ``module.attr`` is the backend, ``module.supports`` the ``auto``
    predicate, ``module.unavailable`` (optional) returns why it cannot run here (e.g. a failed build)."""

    module: str
    attr: str
    supports: str
    device: str  # the device type it is for: a load failure only matters to auto on that device
    unavailable: str | None = None
    interpreter: str | None = None  # an environment variable that, set to "1", runs it on CPU tensors

    def runs_on(self, kind: str) -> bool:
        """Whether an explicitly named backend can take tensors of device type ``kind`` here."""
        return kind in (self.device, "meta") or (
            kind == "cpu" and self.interpreter is not None and os.environ.get(self.interpreter) == "1")


# In ``auto`` order: the first loaded backend whose predicate accepts the input wins.
FUSED: dict[str, FusedBackend] = {
    "triton": FusedBackend("plif.kernels.triton_neuron", "multi_step_triton", "triton_supports", "cuda",
                            interpreter="TRITON_INTERPRET"),
    "cpu": FusedBackend("plif.kernels.cpu_neuron", "multi_step_cpu", "cpu_supports", "cpu", "cpu_unavailable"),
}

BACKENDS: dict[str, Backend] = {"reference": multi_step_reference, "bptt": multi_step_bptt}
"""Every backend :func:`multi_step` can run by name: ``reference``, ``bptt``, and the fused kernels
that loaded (``triton``, ``cpu``) or were registered; each maps ``(x [T, B, ...], k, v0, cfg)`` to
``(spikes [T, B, ...], V_{T-1} [B, ...])``."""
_SUPPORTS: dict[str, Callable[[torch.Tensor, NeuronConfig], bool]] = {}
_FAILED: dict[str, str] = {}  # fused backend -> why it did not load
_WARNED: set[str] = set()
_loaded = False
_ahead_deferred = 0  # kernels_deferred() depth


def register_backend(name: str, fn: Backend, supports: Callable | None = None) -> None:
    """Add an extra backend (tests, experiments); with ``supports`` ``auto`` may pick it, after the fused ones."""
    load_backends()  # the fused ones first, so they keep their place ahead of this one in ``auto``
    BACKENDS[name] = fn
    if supports is not None:
        _SUPPORTS[name] = supports


def load_kernel_module(module: str, attrs: dict[str, str | None], unavailable: str | None = None):
    """The one loader of plif's kernels (the neuron's here, the fused block's in
    :func:`plif.layers.fused_block.load_kernels`): import ``module``, take each of ``attrs`` (key ->
    attribute name; None stays None) and ask ``module.<unavailable>()`` why it cannot run here (a
    failed build).  ``({key: attribute}, None)``, or ``(None, reason)`` when any of it fails: a
    broken Triton install raises more than ImportError, so every error is kept as the reason, shown."""
    try:
        mod = importlib.import_module(module)
        found = {key: None if attr is None else getattr(mod, attr) for key, attr in attrs.items()}
        reason = getattr(mod, unavailable)() if unavailable else None
    except Exception as e:  # noqa: BLE001
        return None, f"{type(e).__name__}: {e}"
    return (None, reason) if reason else (found, None)


def _load_one(name: str, entry: FusedBackend) -> None:
    found, reason = load_kernel_module(entry.module, {"fn": entry.attr, "supports": entry.supports}, entry.unavailable)
    if reason:
        _FAILED[name] = reason
    else:
        BACKENDS[name] = found["fn"]
        _SUPPORTS[name] = found["supports"]


def load_backends() -> None:
    """Import every fused backend once (idempotent).  Layers call this when they are built so
    that a ``torch.compile`` trace never has to import anything."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    for name, entry in FUSED.items():
        _load_one(name, entry)


@contextlib.contextmanager
def kernels_deferred():
    """Within, layers being built do not load the fused kernels ahead of their first use
    (:func:`load_ahead`): the first load compiles the CPU library (15-40 s, minutes on a busy machine).
    plif builds a ``--model`` factory's network so, so that a factory that raises is reported before
    any build; it loads them right after (:func:`load_backends`), still outside any torch.compile trace."""
    global _ahead_deferred
    _ahead_deferred += 1
    try:
        yield
    finally:
        _ahead_deferred -= 1


def load_ahead(load: Callable[[], None]) -> None:
    """``load()`` (:func:`load_backends`, a block's kernels) where a layer is built, so that a
    ``torch.compile`` trace never has to import or build anything; left to the first use within
    :func:`kernels_deferred`.  A backend named explicitly is loaded by :func:`check_backend` anyway."""
    if not _ahead_deferred:
        load()


def reset() -> None:
    """Back to the table before anything loaded: only the PyTorch backends, no extra ones, no
    failures or warnings remembered; the fused backends load again on next use (tests)."""
    global _loaded
    BACKENDS.clear()
    BACKENDS.update(reference=multi_step_reference, bptt=multi_step_bptt)
    _SUPPORTS.clear()
    _FAILED.clear()
    _WARNED.clear()
    _loaded = False


def auto_order() -> list[str]:
    """The backends ``auto`` may pick, in the order it tries them."""
    load_backends()
    return list(_SUPPORTS)


def available_backends() -> list[str]:
    """Names that :func:`multi_step` accepts here (the fused ones only when they loaded)."""
    load_backends()
    return list(BACKENDS)


def backend_status() -> dict[str, str]:
    """Every backend with ``"ok"`` or ``"unavailable: <reason>"``."""
    load_backends()
    status = {name: "ok" for name in BACKENDS}
    status.update({name: f"unavailable: {why}" for name, why in _FAILED.items()})
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
    for name, why in _FAILED.items():
        if FUSED[name].device == x.device.type:
            _warn_once(name, f"plif: the fused {name!r} neuron backend failed to load ({why}); "
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
    if name in _FAILED:
        raise RuntimeError(f"{option} {name!r}: the kernel failed to load here: {_FAILED[name]}")
    if name not in BACKENDS:
        raise ValueError(f"{option} {name!r}: unknown; available: auto, {', '.join(BACKENDS)}")
    fused = FUSED.get(name)
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
    if state_dtype(x.dtype) != x.dtype and name not in FUSED:  # the PyTorch loops: fp32 state, as in the kernels
        spikes, v_last = fn(x.float(), k.float(), v0.float(), cfg)
        return spikes.to(x.dtype), v_last.to(x.dtype)
    return fn(x, k, v0, cfg)
