"""The fused Triton kernels check themselves on first use: once per process, kernel family and dtype.

The Triton block (:mod:`.triton_block`) and neuron (:mod:`.triton_neuron`) kernels are compiled by
Triton for the GPU they run on, a compiler and a chip the CPU tests never see.  So the first time
either is chosen for a dtype on a device, it runs one small case of its check grid
(:data:`BLOCK_CASE` through :func:`.block_check.run_block_case`, :data:`NEURON_CASE` through
:func:`.check.run_case`) against the PyTorch reference; if it differs, it is not used in this
process (the block runs the composed layers, the neuron ``auto`` the next backend: ``bptt`` on CUDA),
and one warning says so.  The result of every check is kept (:func:`results`), and ``plif train``
records them in the run's ``config.json`` under ``"kernel_checks"`` (:func:`record`), which
:func:`run_checks` fills before the run starts, outside any ``torch.compile`` trace or CUDA graph
capture.  A first use inside a trace or a capture cannot run a check (it synchronises); it uses the
kernel and records ``"equal": null``.  A checked kernel that did not load
(:func:`plif.kernel_table.status`) is recorded once per device by :func:`run_checks`, with its reason.

Only Triton kernels are checked: the CPU kernels are compiled once per machine and checked by the
suite on it.  Cost of one check on the CPU through Triton's interpreter (``TRITON_INTERPRET=1``, a 2-core
AMD EPYC shared with other jobs): docs/usage.md ("plif doctor").

The hooks: :func:`passes` is called where the kernels are chosen:
:func:`plif.layers.fused_block.block_kernels` and :func:`plif.neurons.dispatch.select_backend`.
"""
from __future__ import annotations

import os
import time
import warnings

import torch

from .. import kernel_table

__all__ = ["passes", "results", "record", "run_checks", "reset", "block_g_y_tol", "BLOCK_CASE", "NEURON_CASE",
           "FAMILIES"]

FAMILIES = ("block", "neuron")
CHECKED = "triton"  # the kernels that check themselves, by backend name
# BatchNorm's input gradient as Triton states it (tests/kernels/test_triton_block.py): within 1e-5 of the
# reference's largest value in fp32, one half rounding for a half y; everything else as block_check says
G_Y_TOL = {torch.bfloat16: 1e-2, torch.float16: 1e-2}


def _cases():
    from .block_check import BlockCase
    from .check import Case

    # PLIF with a τ per channel, soft-free hard reset with a gradient through it, v0 and ∂V_{T-1} given,
    # the 2x2 pool: the most code paths of one launch; odd sides, two batches, three steps
    return (BlockCase((3, 2, 3, 6, 7), "PLIF", "channel", True, False, "atan", pool=True, v0=True, need_state=True),
            Case((4, 2, 3, 5, 7), "PLIF", "channel", True, False, "atan"))


BLOCK_CASE, NEURON_CASE = None, None  # filled on first use (importing the grids imports the neuron layers)
_RESULTS: dict[tuple[str, str, str], dict] = {}


def block_g_y_tol(backend: str, dtype: torch.dtype) -> float:
    """How close the block's ``∂y`` must be to the reference's for ``backend`` (0: identical, the CPU kernel)."""
    return G_Y_TOL.get(dtype, 1e-5) if backend == CHECKED else 0.0


def _device_name(device) -> str:
    d = torch.device(device)
    if d.type == "cuda" and d.index is None:
        d = torch.device("cuda", torch.cuda.current_device())
    return str(d)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _cannot_check_now(device) -> bool:
    """Inside a ``torch.compile`` trace or a CUDA graph capture a check cannot run (it synchronises)."""
    return torch.compiler.is_compiling() or (torch.device(device).type == "cuda"
                                             and torch.cuda.is_current_stream_capturing())


def _check(family: str, device: str, dtype: torch.dtype) -> dict:
    """Run ``family``'s small case on ``device`` in ``dtype``; the result as ``results()`` lists it."""
    global BLOCK_CASE, NEURON_CASE
    from dataclasses import replace

    if BLOCK_CASE is None:
        BLOCK_CASE, NEURON_CASE = _cases()
    start = time.perf_counter()
    with torch.enable_grad(), torch.autocast(torch.device(device).type, enabled=False):
        if family == "block":
            from .block_check import load_backend, run_block_case

            forward, backward, input_grad, _ = load_backend(CHECKED)
            r = run_block_case(replace(BLOCK_CASE, dtype=_dtype_name(dtype)), forward, backward, input_grad, device,
                               g_y_tol=block_g_y_tol(CHECKED, dtype))
        else:
            from .check import run_case

            r = run_case(replace(NEURON_CASE, dtype=_dtype_name(dtype)), CHECKED, device)
    seconds = time.perf_counter() - start
    differs = sorted(k for k, v in r.items() if (v is False and k != "ok")
                     or (isinstance(v, float) and k != "tol" and v > r["tol"]))
    return {"kernel": f"{CHECKED} {family}", "device": device, "dtype": _dtype_name(dtype), "case": r["case"],
            "equal": bool(r["ok"]), "differs": differs, "seconds": round(seconds, 4),
            "runs": CHECKED if r["ok"] else ("composed layers" if family == "block" else "next backend (bptt on CUDA)")}


def passes(family: str, name: str, device, dtype: torch.dtype) -> bool:
    """Whether kernel ``name`` of ``family`` (``"block"`` or ``"neuron"``) may run on ``device`` in
    ``dtype``: always for a kernel that is not checked; for a Triton kernel, its first-use check's
    verdict (run now, the first time, with one warning when it differs)."""
    if name != CHECKED or (torch.device(device).type == "cuda" and not torch.cuda.is_available()):
        return True  # not a checked kernel, or a question about a device this machine lacks: nothing runs there
    key = (family, _device_name(device), _dtype_name(dtype))
    r = _RESULTS.get(key)
    if r is None:
        if _cannot_check_now(device):
            _RESULTS[key] = {"kernel": f"{CHECKED} {family}", "device": key[1], "dtype": key[2], "equal": None,
                             "runs": CHECKED, "note": "first used inside a compiled graph or a CUDA graph capture: "
                                                      "not checked"}
            return True
        try:
            r = _check(family, key[1], dtype)
        except Exception as e:  # noqa: BLE001  (a kernel that fails to compile or launch here is a failed check)
            r = {"kernel": f"{CHECKED} {family}", "device": key[1], "dtype": key[2], "equal": False,
                 "differs": [f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"],
                 "runs": "composed layers" if family == "block" else "next backend (bptt on CUDA)"}
        _RESULTS[key] = r
        if not r["equal"]:
            warnings.warn(f"plif: the fused {CHECKED} {family} kernel differs from the reference on {key[1]} in "
                          f"{key[2]} (first-use check, {r.get('case', 'one small case')}: {', '.join(r['differs'])}); "
                          f"this process runs the {r['runs']} instead", RuntimeWarning, stacklevel=3)
    return r["equal"] is not False


def results() -> list[dict]:
    """Every check this process ran (or could not run), in order."""
    return list(_RESULTS.values())


def run_checks(device, dtypes) -> list[dict]:
    """Check each Triton kernel family that loads here for each of ``dtypes`` on ``device`` now (before
    a run compiles or captures its step); nothing where Triton does not run (a device other than CUDA,
    the CPU unless under ``TRITON_INTERPRET=1``).  Returns the results."""
    kind = torch.device(device).type
    if not (kind == "cuda" or (kind == "cpu" and os.environ.get("TRITON_INTERPRET") == "1")):
        return []
    for family in FAMILIES:
        if kernel_table.functions(family, CHECKED) is not None:
            for dtype in dtypes:
                passes(family, CHECKED, device, dtype)
        else:
            _RESULTS.setdefault((family, _device_name(device), "not loaded"), _not_loaded(family, device))
    return results()


def _not_loaded(family: str, device) -> dict:
    """The record of a checked kernel that did not load (:func:`plif.kernel_table.failure` says why)."""
    return {"kernel": f"{CHECKED} {family}", "device": _device_name(device), "dtype": None, "equal": None,
            "runs": "block reference" if family == "block" else "next backend (bptt on CUDA)",
            "note": f"did not load: {kernel_table.failure(family, CHECKED)}"}


def record() -> dict:
    """``{"kernel_checks": [...]}`` for a run's ``config.json`` when a check ran, else ``{}``."""
    return {"kernel_checks": results()} if _RESULTS else {}


def reset() -> None:
    """Forget every verdict (tests): the next use checks again."""
    _RESULTS.clear()


def _install() -> None:
    from ..neurons.dispatch import set_first_use_check

    set_first_use_check(passes)


_install()  # imported with the Triton kernels: the neuron dispatch asks passes() from then on
