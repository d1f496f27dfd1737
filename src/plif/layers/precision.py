"""What bf16 (``plif train --amp bf16``, ``torch.autocast(dtype=torch.bfloat16)``) means in plif.

The one statement, the same on every path (the fused block, the composed layers, the one-byte
spike layers, the neuron kernels, ``--memory exact|low``, evaluation):

- **bf16**: the inputs of every convolution and linear layer (spikes are exact in bf16), the bf16
  copies of their weights, and their outputs ``y`` (fp32 accumulation, rounded once to bf16);
  what a fused block keeps for backward (``y``, or the spikes as one byte) and ``∂y``.
- **fp32**: BatchNorm's statistics, running statistics *and its output* ``z`` (normalised from the
  bf16 ``y`` in fp32: the fused block forms ``z = y·scale + shift`` in fp32, and the composed
  ``BatchNorm`` runs with autocast off on ``y`` widened to fp32, :func:`norm_in_fp32`), the
  neuron's potential ``V`` and ``H`` (``plif.neurons.functional.state_dtype``, except ``--memory
  all``'s bf16 ``H``), ``k = sigmoid(w)``, the surrogate gradient, the loss, the weights and
  their gradients, and the optimiser.
- A neuron emits spikes in its input's dtype (bf16 after a linear layer, fp32 after a composed
  BatchNorm; the fused block writes them in ``y``'s dtype): the values 0/1 are the same, and the
  next layer's autocast cast makes them bf16 either way.

So the fused block and the composed layers compute the same ``z`` from the same bf16 ``y`` up to
fp32 rounding, as they do in fp32: a spike may differ only where ``H`` is within rounding of the
threshold, and gradients agree to rounding (``tests/layers/test_bf16_paths.py``).  Where bf16 is
used by default, see :func:`native_bf16`.
"""
from __future__ import annotations

import contextlib
import functools
import os

import torch
from torch import nn

__all__ = ["norm_in_fp32", "native_bf16", "resolve_amp", "run_precision", "precision_autocast"]

_NORMS = (nn.modules.batchnorm._BatchNorm,)


def norm_in_fp32(layer: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """``layer(x)``; for a BatchNorm under autocast, run with autocast off on ``x`` in fp32, so its
    output is fp32 (CPU autocast would return it in bf16, CUDA autocast already keeps fp32)."""
    kind = x.device.type
    if (not isinstance(layer, _NORMS) or x.dtype == torch.float64 or not torch.amp.is_autocast_available(kind)
            or not torch.is_autocast_enabled(kind)):  # a device without autocast (meta: shapes only) has none on
        return layer(x)
    with torch.autocast(kind, enabled=False):
        return layer(x.float())


# oneDNN's ISA cap, by the names it reads in that order (the first set wins), and the caps at which it
# runs bf16 products natively
_ISA_CAPS = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")
_BF16_ISAS = {"AVX512_CORE_BF16", "AVX512_CORE_FP16", "AVX512_CORE_AMX", "AVX512_CORE_AMX_FP16", "ALL"}


@functools.lru_cache(maxsize=None)
def _cpu_flags(cpuinfo: str) -> frozenset:
    try:
        with open(cpuinfo) as f:
            return frozenset(next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), []))
    except OSError:
        return frozenset()


def native_bf16(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """Whether this CPU computes bf16 products natively (AVX512-BF16 or AMX-BF16), asked at run time
    of the kernel's CPU flags, and oneDNN allowed to use them: ``ONEDNN_MAX_CPU_ISA`` (or its older
    name ``DNNL_MAX_CPU_ISA``, which oneDNN reads where the first is unset) set below
    ``AVX512_CORE_BF16`` (e.g. ``AVX2``) caps it, so that counts as no.  Without them oneDNN
    emulates bf16, slower than fp32 (docs/speed.md)."""
    isa = next((v for v in map(os.environ.get, _ISA_CAPS) if v and v.strip()), "").strip().upper()
    if isa and isa not in _BF16_ISAS:
        return False
    flags = _cpu_flags(cpuinfo)
    return "avx512_bf16" in flags or "amx_bf16" in flags


def resolve_amp(amp: str | None, device_type: str) -> str | None:
    """``--amp`` as a run records it, ``"bf16"`` or None (fp32): ``"none"`` is None; ``"auto"`` is bf16
    on a CPU with native bf16 (:func:`native_bf16`), fp32 everywhere else (CUDA's fp32 runs TF32,
    its own choice; a CPU that would emulate bf16 never gets it)."""
    if amp == "auto":
        return "bf16" if device_type == "cpu" and native_bf16() else None
    return None if amp == "none" else amp


def _native_bf16_on(device_type: str) -> tuple[bool, str]:
    """Whether ``device_type`` computes bf16 natively, and where not, why (for a line that says it)."""
    if device_type == "cpu":
        return native_bf16(), "this CPU has no native bf16 (AVX512-BF16 or AMX, or ONEDNN_MAX_CPU_ISA caps it): " \
                              "oneDNN would emulate it, slower than fp32"
    if device_type == "cuda":
        return torch.cuda.is_bf16_supported(including_emulation=False), "this GPU has no native bf16"
    return False, f"bf16 autocast is validated on CUDA and the CPU only, not on {device_type}"


def run_precision(amp: str | None, device_type: str) -> tuple[str | None, str]:
    """``(amp, line)``: the precision a run that trained with ``amp`` (config.json's ``"bf16"`` or None,
    fp32) is evaluated in on ``device_type`` (``plif eval``, ``plif stats``), and one line saying it.
    The run's bf16 where the device computes bf16 natively; fp32 elsewhere, the line saying why (its
    accuracy may then differ from the run's by bf16 rounding).  ``"none"`` and ``"auto"`` (a config
    written by hand) mean what they mean to ``--amp`` (:func:`resolve_amp`)."""
    amp = resolve_amp(amp, device_type) if amp in ("none", "auto") else amp
    if amp is None:
        return None, "precision: fp32, as the run trained"
    if amp != "bf16":
        raise ValueError(f"amp {amp!r}: a run records 'bf16' or null (fp32)")
    native, why = _native_bf16_on(device_type)
    if native:
        return "bf16", "precision: bf16 autocast, as the run trained (plif.layers.precision)"
    return None, f"precision: fp32, not the run's bf16: {why} (accuracy may differ from the run's by bf16 rounding)"


def precision_autocast(amp: str | None, device_type: str):
    """The context to evaluate in for :func:`run_precision`'s ``amp``: bf16 autocast, or nothing (fp32)."""
    if amp is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device_type, dtype=torch.bfloat16)
