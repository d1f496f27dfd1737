"""Load a trained network from a run folder (``config.json`` + ``checkpoints/<name>.pt``).

Named checkpoints (``best``, ``best_test``, ``best_val``, ``last``) go through the training
package's loader, which owns the run-folder format; an explicit ``.pt`` path (e.g. a checkpoint
copied out of a run) is read here against the run's config.
"""
from __future__ import annotations

import json
from pathlib import Path

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
    return build_network(config["network"], tuple(config["input_shape"]), int(config["T"]),
                         **(config.get("network_kwargs") or {}))


def load_run(run_dir: str | Path, which: str = "best") -> tuple[SpikingNetwork, dict]:
    """``(network in eval mode with the checkpoint's weights, config dict)``.

    ``which``: a checkpoint name (see ``plif.train.checkpoint.CHECKPOINTS``; ``best`` prefers the
    validation-selected one) or a path to a ``.pt`` file.  A corrupted checkpoint or one whose
    tensors do not match the network raises ``ValueError`` naming the file.
    """
    from ..train.checkpoint import load_checkpoint, load_run_model

    config = config_of(run_dir)  # clear errors for a missing or malformed config first
    if not which.endswith(".pt"):
        net, config = load_run_model(run_dir, which=which)
        return net.eval(), config
    path = Path(which)
    state = load_checkpoint(path)
    net = network_from_config(config)
    try:
        net.load_state_dict(state["model"], strict=True)
    except RuntimeError as e:
        raise ValueError(f"{path}: checkpoint does not match the network {config['network']!r} "
                         f"for input {tuple(config['input_shape'])}: {str(e).splitlines()[0]}") from None
    return net.eval(), config
