"""Every fused kernel plif has, in one table, with its one loader, load state and status.

:data:`KERNELS` lists the neuron kernels (``fn(x, k, v0, cfg) -> (spikes, V_{T-1})``, run by
:func:`plif.neurons.multi_step`) and the conv block's (:mod:`plif.layers.fused_block`), by kind and
name: the module each lives in, the functions it provides, the device it is for and the predicate
saying what it takes.  Names only: a module is imported the first time its kind is asked for
(:func:`load`), never at import, so the neuron layers, which sit below :mod:`plif.kernels`, can read
the table.  A module that fails to import, or whose ``unavailable()`` gives a reason (a failed
build), keeps that reason: :func:`status` lists every kernel with ``"ok"`` or ``"unavailable:
<reason>"``; ``plif doctor`` prints it, and the Triton kernels' first-use check
(:mod:`plif.kernels.self_check`) records a checked kernel that did not load.

Kernels load where a layer is built (:func:`load_ahead`), so that a ``torch.compile`` trace never
imports or builds anything; within :func:`deferred` they wait for their first use.
"""
from __future__ import annotations

import contextlib
import importlib
import os
from dataclasses import dataclass, field
from typing import Callable

__all__ = ["Kernel", "KERNELS", "KINDS", "import_kernel", "load", "functions", "failure", "status", "deferred",
           "load_ahead", "reset", "on_reset"]


@dataclass(frozen=True)
class Kernel:
    """Where one kernel lives: ``module`` and, in it, ``functions`` (role -> attribute name; None:
    the module has none), ``supports`` (the predicate: a neuron kernel's ``(x, cfg) -> bool``, a
    block's ``(device, dtype) -> bool``) and ``unavailable`` (optional: ``() -> str | None``, why it
    cannot run here).  ``device``: the device type it is for (a load failure only matters to
    ``auto`` there); ``interpreter``: an environment variable that, set to "1", runs it on CPU
    tensors; ``reads_repeated`` (blocks): forward and backward read a ``y`` repeated over time as a
    stride-0 view."""

    module: str
    device: str
    functions: dict[str, str | None] = field(hash=False)
    supports: str
    unavailable: str | None = None
    interpreter: str | None = None
    reads_repeated: bool = False

    def runs_on(self, kind: str) -> bool:
        """Whether this kernel, named explicitly, can take tensors of device type ``kind`` here."""
        return kind in (self.device, "meta") or (
            kind == "cpu" and self.interpreter is not None and os.environ.get(self.interpreter) == "1")


_BLOCK_CPU = {"forward": "block_forward_cpu", "backward": "block_backward_cpu", "input_grad": "bn_input_grad_cpu",
              "input_grad_into": "bn_input_grad_cpu_", "stats": "batch_stats_cpu",
              "backward_into": "block_backward_cpu_", "backward_summed": "block_backward_summed_cpu"}
_BLOCK_TRITON = {"forward": "block_forward_triton", "backward": "block_backward_triton",
                 "input_grad": "bn_input_grad_triton", "input_grad_into": None, "stats": "block_stats_triton",
                 "backward_into": None, "backward_summed": None}

KERNELS: dict[str, dict[str, Kernel]] = {
    # in auto order: the first loaded neuron kernel whose predicate accepts the input wins
    "neuron": {
        "triton": Kernel("plif.kernels.triton_neuron", "cuda", {"fn": "multi_step_triton"}, "triton_supports",
                         interpreter="TRITON_INTERPRET"),
        "cpu": Kernel("plif.kernels.cpu_neuron", "cpu", {"fn": "multi_step_cpu"}, "cpu_supports", "cpu_unavailable"),
    },
    # the block's roles are plif.layers.fused_block.BlockKernels' fields
    "block": {
        "cpu": Kernel("plif.kernels.cpu_block", "cpu", _BLOCK_CPU, "cpu_block_supports", "unavailable",
                      reads_repeated=True),
        "triton": Kernel("plif.kernels.triton_block", "cuda", _BLOCK_TRITON, "block_triton_supports",
                         interpreter="TRITON_INTERPRET"),
    },
}
KINDS = tuple(KERNELS)

_FUNCTIONS: dict[tuple[str, str], dict[str, Callable | None]] = {}  # (kind, name) -> role -> function
_FAILED: dict[tuple[str, str], str] = {}  # (kind, name) -> why it did not load
_TRIED: set[str] = set()  # the kinds loaded
_RESET: list[Callable[[], None]] = []
_deferred = 0  # deferred() depth


def import_kernel(module: str, attrs: dict[str, str | None], unavailable: str | None = None):
    """Import ``module``, take each of ``attrs`` (key -> attribute name; None stays None) and ask
    ``module.<unavailable>()`` why it cannot run here.  ``({key: attribute}, None)``, or ``(None,
    reason)`` when any of it fails: a broken Triton install raises more than ImportError, so every
    error is kept as the reason, shown."""
    try:
        mod = importlib.import_module(module)
        found = {key: None if attr is None else getattr(mod, attr) for key, attr in attrs.items()}
        reason = getattr(mod, unavailable)() if unavailable else None
    except Exception as e:  # noqa: BLE001
        return None, f"{type(e).__name__}: {e}"
    return (None, reason) if reason else (found, None)


def load(kind: str | None = None) -> None:
    """Import every kernel of ``kind`` (None: of every kind) once; idempotent.  A kernel that fails
    keeps its reason (:func:`failure`)."""
    for k in KINDS if kind is None else (kind,):
        if k in _TRIED:
            continue
        _TRIED.add(k)
        for name, entry in KERNELS[k].items():
            found, reason = import_kernel(entry.module, {**entry.functions, "supports": entry.supports},
                                          entry.unavailable)
            if reason:
                _FAILED[k, name] = reason
            else:
                _FUNCTIONS[k, name] = found


def functions(kind: str, name: str) -> dict[str, Callable | None] | None:
    """The loaded functions of kernel ``name`` of ``kind`` (its roles and ``supports``), loading the
    kind first; None when it did not load (:func:`failure` says why) or is not in the table."""
    load(kind)
    return _FUNCTIONS.get((kind, name))


def failure(kind: str, name: str) -> str | None:
    """Why kernel ``name`` of ``kind`` did not load, or None (it loaded, or its kind was not loaded yet)."""
    return _FAILED.get((kind, name))


def status() -> list[dict]:
    """Every kernel of the table, loaded now: ``kind``, ``name``, ``device``, ``module`` and ``state``
    (``"ok"`` or ``"unavailable: <reason>"``)."""
    load()
    return [{"kind": kind, "name": name, "device": entry.device, "module": entry.module,
             "state": f"unavailable: {_FAILED[kind, name]}" if (kind, name) in _FAILED else "ok"}
            for kind, table in KERNELS.items() for name, entry in table.items()]


@contextlib.contextmanager
def deferred():
    """Within, layers being built do not load the kernels ahead of their first use (:func:`load_ahead`):
    the first load compiles the CPU library (15-40 s, minutes on a busy machine).  plif builds a
    ``--model`` factory's network so, so that a factory that raises is reported before any build; it
    loads them right after, still outside any torch.compile trace."""
    global _deferred
    _deferred += 1
    try:
        yield
    finally:
        _deferred -= 1


def load_ahead(load_now: Callable[[], None]) -> None:
    """``load_now()`` (the neuron dispatch's or the block's loading) where a layer is built, so that a
    ``torch.compile`` trace never has to import or build anything; left to the first use within
    :func:`deferred`."""
    if not _deferred:
        load_now()


def on_reset(forget: Callable[[], None]) -> None:
    """``forget()`` is called by :func:`reset`: a user of the table drops what it made from it."""
    _RESET.append(forget)


def reset() -> None:
    """Back to before anything loaded (tests): every kernel loads again on its next use, and each
    user of the table (:func:`on_reset`) forgets what it made from it."""
    _FUNCTIONS.clear()
    _FAILED.clear()
    _TRIED.clear()
    for forget in _RESET:
        forget()
