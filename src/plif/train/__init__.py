"""The paper's training protocol: config, data on the device, the loop, resumable runs (written through :mod:`plif.runs`)."""
from .config import PRESETS, TrainConfig, resolve_config
from .run import train

__all__ = ["TrainConfig", "PRESETS", "resolve_config", "train"]
