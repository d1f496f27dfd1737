"""Fused multi-step neuron kernels, registered as :func:`plif.neurons.multi_step` backends.

- ``triton``: GPU kernels (:mod:`.triton_neuron`), registered only when Triton imports.
- ``cpu``: a compiled C++/OpenMP loop (:mod:`.cpu_neuron`), built on first use; when the build
  fails ``auto`` simply keeps using ``bptt``.

Importing this package never needs a GPU, Triton or a compiler.
"""
from __future__ import annotations

from ..neurons.dispatch import register_backend
from .cpu_neuron import cpu_supports, multi_step_cpu

__all__ = ["multi_step_cpu", "cpu_supports", "TRITON_ERROR"]

TRITON_ERROR: str | None = None

register_backend("cpu", multi_step_cpu, supports=cpu_supports, priority=-1)

try:
    from .triton_neuron import multi_step_triton, triton_supports
except Exception as e:  # noqa: BLE001  (a broken Triton install raises more than ImportError; the GPU path is optional)
    TRITON_ERROR = f"{type(e).__name__}: {e}"
else:
    register_backend("triton", multi_step_triton, supports=triton_supports, priority=0)
    __all__ += ["multi_step_triton", "triton_supports"]
