"""Run folders: their format and lock, checkpoints, and a trained network loaded back.

One package that ``plif.train`` writes through and ``plif.deploy``, ``plif.experiments`` and the
CLI read through; it knows networks (:mod:`plif.models`) but nothing of training.
"""
from .checkpoint import check_finite, load_checkpoint, save_checkpoint
from .folder import CHECKPOINTS, RunFolder, RunFolderBusy, read_json_file, read_metrics
from .load import load_run

__all__ = ["RunFolder", "RunFolderBusy", "CHECKPOINTS", "read_metrics", "read_json_file", "load_run",
           "load_checkpoint", "save_checkpoint", "check_finite"]
