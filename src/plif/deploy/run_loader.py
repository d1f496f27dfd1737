"""Load a trained network from a run folder (``config.json`` + ``checkpoints/<name>.pt``).

:mod:`plif.train.run_folder` owns the run-folder format (and its clear errors for a missing or
malformed ``config.json``); this returns the network in eval mode.
"""
from __future__ import annotations

from pathlib import Path

from ..models import SpikingNetwork

__all__ = ["load_run"]


def load_run(run_dir: str | Path, which: str = "best") -> tuple[SpikingNetwork, dict]:
    """``(network in eval mode with the checkpoint's weights, config dict)``.

    ``which``: a checkpoint name (see ``plif.train.checkpoint.CHECKPOINTS``; ``best`` prefers the
    validation-selected one) or a path to a ``.pt`` file.  A corrupted checkpoint or one whose
    tensors do not match the network raises ``ValueError`` naming the file; so does a missing or
    malformed ``config.json`` (read first, by ``load_run_model``).
    """
    from ..train.checkpoint import load_run_model

    net, config = load_run_model(run_dir, which=which)
    return net.eval(), config
