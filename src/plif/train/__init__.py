"""The paper's training protocol: config, data on the device, the loop, checkpoints, run folders."""
from .checkpoint import load_checkpoint, load_run_model, save_checkpoint
from .config import PRESETS, TrainConfig, resolve_config
from .run import read_metrics, train

__all__ = ["TrainConfig", "PRESETS", "resolve_config", "train", "read_metrics", "load_run_model",
           "load_checkpoint", "save_checkpoint"]
