"""A run's state as two records, in the manner of torchtune's recipes, which separate their set-up
from their training loop:

- :class:`Session`: what is decided once, before the first epoch (the config, device, processes,
  run folder, model, optimiser and schedule, data, logger, graph trainer), frozen, built in one
  place (:func:`plif.train.session.open_session`);
- :class:`Progress`: what changes per epoch (the epochs finished and their rows, the best
  accuracies, where a mid-epoch checkpoint left off, why the run stopped), a new record after each
  epoch, which the loop (:func:`plif.train.epochs.run_epochs`) hands back.

:func:`plif.train.resume.restore` loads ``last.pt`` into the model, optimiser and schedule before
the session is built and returns the run's :class:`Progress` so far.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

import torch

from ..data.pipeline import DataOptions, TrainData
from ..runs.folder import RunFolder
from .config import TrainConfig
from .distributed import DistInfo
from .graph import GraphTrainer

__all__ = ["Session", "Progress"]


@dataclass(frozen=True)
class Session:
    """What the set-up decides once and the epochs use."""

    cfg: TrainConfig  # resolved (a resume's: the cosine period may follow new --epochs)
    cfg_dict: dict  # config.json, and the copy in each checkpoint
    folder: RunFolder
    device: torch.device
    dist: DistInfo
    resumed: bool  # continued from last.pt
    restarted: bool  # a group torchrun started again (--max-restarts)
    model: torch.nn.Module
    net: torch.nn.Module  # what the loop runs: the model inside SyncBN / DDP / torch.compile as configured
    optimizer: torch.optim.Optimizer
    scheduler: object
    data_options: DataOptions  # what was asked of the data layer (the dataset's record resolved once)
    data: TrainData
    tb: object | None = None  # --log tensorboard: rank 0's writer
    trainer: GraphTrainer | None = None  # --cuda-graph: the captured step and evaluation
    undo: Callable[[], None] | None = None  # a fresh run's clean-up while it has finished no epoch: no stub folder

    @property
    def main(self) -> bool:
        """The process that writes the run folder and logs (rank 0)."""
        return self.dist.is_main


@dataclass(frozen=True)
class Progress:
    """Where a run stands after its last finished epoch: what the loop returns, one record per epoch."""

    metrics: tuple[dict, ...] = ()  # the rows of epochs 1..epoch (metrics.jsonl)
    step: int = 0  # a mid-epoch checkpoint: steps of epoch ``epoch + 1`` already done
    rank_state: dict | None = None  # ... and this rank's RNG states and partial totals then
    stopped: str | None = None  # why the run stopped before its last epoch ("time limit", "SIGTERM", ...)

    @property
    def epoch(self) -> int:
        """Epochs finished."""
        return len(self.metrics)

    def best(self, key: str) -> float:
        """The best ``key`` (``"test_acc"``, ``"val_acc"``) of the finished epochs; -1 before any."""
        return max((m[key] for m in self.metrics if key in m), default=-1.0)

    def after(self, row: dict) -> "Progress":
        """The progress once the epoch of ``row`` is finished (and any mid-epoch start consumed)."""
        return Progress((*self.metrics, row))

    def stop(self, reason: str | None) -> "Progress":
        return dataclasses.replace(self, stopped=reason)
