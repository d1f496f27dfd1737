"""Checkpoints: written atomically, read back with errors naming the file, refused when not finite.

A checkpoint is a ``torch.save`` dict: ``model`` (state_dict), ``epoch`` (1-based epoch that
produced it), ``config`` (the resolved config dict) and, for ``last.pt``, everything a resume
needs (optimiser, scheduler, a copy of the metrics; see :mod:`plif.train.resume`).
"""
from __future__ import annotations

import io
from pathlib import Path

import torch

from ..atomic import atomic_write_bytes

__all__ = ["save_checkpoint", "load_checkpoint", "check_finite", "nonfinite_count"]


def save_checkpoint(path: Path, state: dict) -> Path:
    """Serialise ``state`` in memory, then write it with one atomic rename."""
    buf = io.BytesIO()
    torch.save(state, buf)
    return atomic_write_bytes(path, buf.getvalue())


def load_checkpoint(path: Path, map_location="cpu") -> dict:
    """Load a checkpoint dict; a missing, truncated or foreign file gets an error naming it."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint not found: {path}")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as e:  # torch raises several types for corrupt archives
        first = (str(e).strip().splitlines() or [""])[0][:200]  # torch's messages run to many lines
        raise ValueError(f"{path}: not a readable plif checkpoint ({type(e).__name__}: {first})") from None
    if not isinstance(state, dict) or "model" not in state or "config" not in state:
        raise ValueError(f"{path}: not a plif checkpoint (expected a dict with 'model' and 'config')")
    return state


def nonfinite_count(state: dict) -> int:
    """How many values of a state dict's floating tensors are NaN or infinite."""
    return sum(int((~torch.isfinite(v)).sum()) for v in state.values()
               if isinstance(v, torch.Tensor) and v.is_floating_point())


def check_finite(state: dict, path) -> None:
    """Refuse weights holding NaN or infinity (a diverged run's), naming the file and the count."""
    model = state.get("model", {})
    bad = nonfinite_count(model)
    if bad:
        total = sum(v.numel() for v in model.values() if isinstance(v, torch.Tensor) and v.is_floating_point())
        raise ValueError(f"{path}: {bad} of {total} weights are NaN or infinite (the run diverged); "
                         "refusing to use this checkpoint")
