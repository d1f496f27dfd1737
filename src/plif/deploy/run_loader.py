"""Load a trained network from a run folder (``config.json`` + ``checkpoints/<name>.pt``).

The training package's loader owns the run-folder format; this adds clear errors for a missing
or malformed ``config.json`` and returns the network in eval mode.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..models import SpikingNetwork

__all__ = ["load_run", "config_of"]


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


def load_run(run_dir: str | Path, which: str = "best") -> tuple[SpikingNetwork, dict]:
    """``(network in eval mode with the checkpoint's weights, config dict)``.

    ``which``: a checkpoint name (see ``plif.train.checkpoint.CHECKPOINTS``; ``best`` prefers the
    validation-selected one) or a path to a ``.pt`` file.  A corrupted checkpoint or one whose
    tensors do not match the network raises ``ValueError`` naming the file.
    """
    from ..train.checkpoint import load_run_model

    config_of(run_dir)  # clear errors for a missing or malformed config first
    net, config = load_run_model(run_dir, which=which)
    return net.eval(), config
