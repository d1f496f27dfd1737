"""A run's session as one record: what the set-up (:func:`plif.train.session.open_session`) produces
and the epochs (:mod:`plif.train.epochs`) use; :func:`plif.train.resume.restore` hands back what it
loads instead of writing into it."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..runs.folder import RunFolder
from .config import TrainConfig
from .distributed import DistInfo
from .graph import GraphTrainer

__all__ = ["Session"]


@dataclass
class Session:
    """What the set-up steps produce and the epochs use."""

    cfg: TrainConfig
    cfg_dict: dict
    folder: RunFolder
    device: torch.device
    dist: DistInfo
    main: bool
    resume: bool
    model: torch.nn.Module = None
    net: torch.nn.Module = None
    optimizer: torch.optim.Optimizer = None
    scheduler: object = None
    data: object = None
    start_epoch: int = 0
    start_step: int = 0  # a mid-epoch checkpoint: steps of epoch start_epoch + 1 already done
    rank_state: dict | None = None  # ... and this rank's RNG states and partial totals then
    metrics: list = None
    tb: object = None
    trainer: GraphTrainer | None = None  # --cuda-graph: the captured step and evaluation
    undo: object = None  # a fresh run's clean-up while it has finished no epoch: no stub folder stays
    restarted: bool = False  # a group torchrun started again (--max-restarts)
