"""Checkpoints written atomically, and loading a trained network back from a run folder.

A checkpoint is a ``torch.save`` dict: ``model`` (state_dict), ``epoch`` (1-based epoch that
produced it), ``config`` (the resolved config dict) and, for ``last.pt``, everything a resume
needs (optimiser, scheduler, best-so-far trackers).
"""
from __future__ import annotations

import io
import json
from pathlib import Path

import torch

from ..atomic import atomic_write_bytes

__all__ = ["save_checkpoint", "load_checkpoint", "load_run_model", "CHECKPOINTS"]

# which -> file name under <run>/checkpoints
CHECKPOINTS = {"last": "last.pt", "best_test": "best_test.pt", "best_val": "best_val.pt"}


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
        raise ValueError(f"{path}: not a readable plif checkpoint ({type(e).__name__}: {e})") from None
    if not isinstance(state, dict) or "model" not in state or "config" not in state:
        raise ValueError(f"{path}: not a plif checkpoint (expected a dict with 'model' and 'config')")
    return state


def load_run_model(run_dir, which: str = "best", map_location="cpu"):
    """Rebuild the network of a run and load its weights: returns ``(SpikingNetwork, config dict)``.

    which: ``best`` (the validation-selected checkpoint of protocol B if the run has one, else the
    best-test one of protocol A), ``best_test``, ``best_val``, ``last``, or a path to a ``.pt`` file
    holding weights for this run's network.
    """
    from ..models import build_network

    run_dir = Path(run_dir)
    cfg_path = run_dir / "config.json"
    if not cfg_path.is_file():
        raise FileNotFoundError(f"{run_dir} is not a plif run folder (no config.json)")
    if which == "best":
        which = "best_val" if (run_dir / "checkpoints" / CHECKPOINTS["best_val"]).is_file() else "best_test"
    if str(which).endswith(".pt"):
        path = Path(which)
    elif which in CHECKPOINTS:
        path = run_dir / "checkpoints" / CHECKPOINTS[which]
    else:
        raise ValueError(f"unknown checkpoint {which!r}; valid: best, {', '.join(CHECKPOINTS)} or a .pt path")
    state = load_checkpoint(path, map_location)
    config = json.loads(cfg_path.read_text())
    net = build_network(config["network"], config["input_shape"], config["T"], **config["network_kwargs"])
    try:
        net.load_state_dict(state["model"], strict=True)
    except RuntimeError as e:
        raise ValueError(f"{path}: checkpoint does not match the network {config['network']!r} "
                         f"for input {tuple(config['input_shape'])}: {str(e).splitlines()[0]}") from None
    return net, config
