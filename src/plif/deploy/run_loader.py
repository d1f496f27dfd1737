"""Load a trained network from a run folder (``config.json`` + ``checkpoints/<name>.pt``).

The training package owns the run-folder format; while its loader
(``plif.train.checkpoint.load_run_model``) is not available this module reads the documented
contract itself, so deployment works on any run folder either way.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch

from ..models import SpikingNetwork, build_network

__all__ = ["load_run", "config_of", "network_from_config"]


def config_of(run_dir: str | Path) -> dict:
    """Read ``<run>/config.json``; errors name the file and, for bad JSON, the line and column."""
    path = Path(run_dir) / "config.json"
    if not path.is_file():
        raise FileNotFoundError(f"{run_dir} is not a run folder: {path} is missing")
    try:
        config = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: invalid JSON at line {e.lineno} column {e.colno} (byte {e.pos}): {e.msg}") from None
    for key in ("network", "input_shape", "T"):
        if key not in config:
            raise ValueError(f"{path}: missing key {key!r} (a run config needs network, input_shape and T)")
    return config


def network_from_config(config: dict) -> SpikingNetwork:
    """Build the (untrained) network a run config describes."""
    kwargs = dict(config.get("network_kwargs") or {})
    kwargs.update(config.get("neuron_kwargs") or {})
    return build_network(config["network"], tuple(config["input_shape"]), int(config["T"]), **kwargs)


def _checkpoint_path(run_dir: Path, which: str) -> Path:
    if which.endswith(".pt") or "/" in which:
        path = Path(which) if Path(which).is_absolute() else run_dir / which
    else:
        path = run_dir / "checkpoints" / f"{which}.pt"
    if not path.is_file():
        found = sorted(p.stem for p in (run_dir / "checkpoints").glob("*.pt")) if (run_dir / "checkpoints").is_dir() else []
        raise FileNotFoundError(f"checkpoint {path} not found (available: {', '.join(found) or 'none'})")
    return path


def load_run(run_dir: str | Path, which: str = "best") -> tuple[SpikingNetwork, dict]:
    """``(network in eval mode with the checkpoint's weights, config dict)``.

    ``which`` is a checkpoint name under ``checkpoints/`` (``best``, ``last``, ...) or a path
    to a ``.pt`` file.  A corrupted file or one whose tensors do not match the network raises
    ``ValueError`` naming the file.
    """
    try:
        from ..train.checkpoint import load_run_model
    except ImportError:
        load_run_model = None
    if load_run_model is not None and not which.endswith(".pt"):
        net, config = load_run_model(run_dir, which=which)
        return net.eval(), config
    run_dir = Path(run_dir)
    config = config_of(run_dir)
    path = _checkpoint_path(run_dir, which)
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises many types for damaged zip/pickle data
        raise ValueError(f"{path}: not a readable checkpoint ({type(e).__name__}: {e})") from None
    if not isinstance(ckpt, dict) or "model" not in ckpt:
        raise ValueError(f"{path}: expected a dict with a 'model' state_dict")
    net = network_from_config(config)
    try:
        net.load_state_dict(ckpt["model"], strict=True)
    except RuntimeError as e:
        raise ValueError(f"{path}: checkpoint does not match the network {config['network']!r} "
                         f"for input {tuple(config['input_shape'])}: {e}") from None
    return net.eval(), config
