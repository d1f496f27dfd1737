"""The per-step leak an importer forms from a NIR ``τ``: one function that the file checker
(:mod:`.nir_check`), the importers (:mod:`.nir_import`, :mod:`.nir_sinabs`) and the exporter
(:mod:`.nir_export`, which chooses ``τ`` through it) share, so none of them imports another for it."""
from __future__ import annotations

import numpy as np
import torch

__all__ = ["rate_from_tau"]


def rate_from_tau(tau, dt: float) -> torch.Tensor:
    """``k = float32(dt) * float32(1/τ)`` in float32, the per-step leak an importer forms from ``τ``
    (Norse's ``dt * tau_mem_inv`` with ``tau_mem_inv = 1/τ`` in float32; this package's importer).
    The exporter chooses ``τ`` through this same function, so the two can never drift apart."""
    return float(dt) * (1.0 / torch.as_tensor(np.asarray(tau, dtype=np.float32)))
