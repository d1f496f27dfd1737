"""Checkpoints written atomically, and loading a trained network back from a run folder.

A checkpoint is a ``torch.save`` dict: ``model`` (state_dict), ``epoch`` (1-based epoch that
produced it), ``config`` (the resolved config dict) and, for ``last.pt``, everything a resume
needs (optimiser, scheduler, best-so-far trackers).
"""
from __future__ import annotations

import io
from pathlib import Path

import torch

from ..atomic import atomic_write_bytes
from .run_folder import CHECKPOINTS, RunFolder

__all__ = ["save_checkpoint", "load_checkpoint", "load_run_model", "CHECKPOINTS", "check_finite"]


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


def check_finite(state: dict, path) -> None:
    """Refuse weights holding NaN or infinity (a diverged run's), naming the file and the count."""
    from .loop import nonfinite_count

    model = state.get("model", {})
    bad = nonfinite_count(model)
    if bad:
        total = sum(v.numel() for v in model.values() if isinstance(v, torch.Tensor) and v.is_floating_point())
        raise ValueError(f"{path}: {bad} of {total} weights are NaN or infinite (the run diverged); "
                         "refusing to use this checkpoint")


def load_run_model(run_dir, which: str = "best", map_location="cpu", backend: str = "auto"):
    """Rebuild the network of a run and load its weights: returns ``(SpikingNetwork, config dict)``.

    - which: ``best`` (the validation-selected checkpoint of protocol B if the run has one, else the
      best-test one of protocol A), ``best_test``, ``best_val``, ``last``, or a path to a ``.pt`` file
      holding weights for this run's network.
    - backend: how the neurons run here; the backend the run was trained with is not used (a run
      trained with ``triton`` on a GPU loads on a CPU-only machine).

    A folder that is not a run, a malformed ``config.json`` and a checkpoint with non-finite
    weights raise errors naming the file.
    """
    from ..models import build_network

    folder = RunFolder(run_dir)
    config = folder.read_config()
    if which == "best":
        which = "best_val" if folder.checkpoint("best_val").is_file() else "best_test"
    if str(which).endswith(".pt"):
        path = Path(which)
    elif which in CHECKPOINTS:
        path = folder.checkpoint(which)
    else:
        raise ValueError(f"unknown checkpoint {which!r}; valid: best, {', '.join(CHECKPOINTS)} or a .pt path")
    if not path.is_file() and not str(which).endswith(".pt"):
        raise FileNotFoundError(f"{run_dir}: no {path.name} under checkpoints/ (the run finished no epoch?)")
    state = load_checkpoint(path, map_location)
    check_finite(state, path)
    if not isinstance(config.get("network_kwargs"), dict):
        raise ValueError(f"{folder.config}: network_kwargs must be an object, got {config.get('network_kwargs')!r}")
    kwargs = {k: v for k, v in config["network_kwargs"].items() if k != "backend"}  # runs before it was left out
    net = build_network(config["network"], config["input_shape"], config["T"], **kwargs).set_backend(backend)
    try:
        net.load_state_dict(state["model"], strict=True)
    except RuntimeError as e:
        raise ValueError(f"{path}: checkpoint does not match the network {config['network']!r} "
                         f"for input {tuple(config['input_shape'])}: {str(e).splitlines()[0]}") from None
    return net, config
