"""Run folders: their format and lock, checkpoints, a run's stored config, and a trained network loaded back.

One package that ``plif.train`` writes through and ``plif.deploy``, ``plif.experiments`` and the
CLI read through; it knows networks (:mod:`plif.models`) but nothing of training.
"""
from .checkpoint import check_finite, load_checkpoint, save_checkpoint
from .config import TRUST_ENV, read_config_json, read_run_config, stored_surrogate, trusted_modules
from .folder import CHECKPOINTS, RunFolder, RunFolderBusy, read_json_file, read_metrics
from .load import load_run, run_test_split

__all__ = ["RunFolder", "RunFolderBusy", "CHECKPOINTS", "read_metrics", "read_json_file", "read_run_config",
           "read_config_json", "stored_surrogate", "trusted_modules", "TRUST_ENV", "load_run", "run_test_split",
           "load_checkpoint", "save_checkpoint", "check_finite"]
