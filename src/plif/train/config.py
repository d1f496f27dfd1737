"""Training configuration: one frozen dataclass, presets, and the resolution of defaults.

``paper`` is SPEC §3 exactly (the zoo network, its T, batch 16, Adam 1e-3, cosine T_max=64 per
epoch, 1024 epochs).  ``cpu`` is the main job: a narrower network of the same form (32 instead of
128 channels, FC512, T = 4) for 2 epochs, which reached 89.3% test accuracy on Fashion-MNIST in
3 minutes on a 2-core CPU (REPRODUCTION.md).
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field

from ..models import get_entry

__all__ = ["TrainConfig", "PRESETS", "resolve_config", "config_diff", "STATIC", "EVENT"]

STATIC = ("mnist", "fashion-mnist", "cifar10")
EVENT = ("nmnist", "cifar10-dvs", "dvs128-gesture")
NEURON_NAMES = ("plif", "lif", "if")


@dataclass(frozen=True)
class TrainConfig:
    """Every setting of a run; ``None`` means "the preset's value" until :func:`resolve_config`."""

    dataset: str = "fashion-mnist"
    preset: str = "cpu"
    network: str | None = None
    T: int | None = None
    epochs: int | None = None
    batch_size: int | None = None
    lr: float | None = None
    t_max: int | None = None
    neuron: str = "plif"
    tau0: float = 2.0
    pool: str | None = None
    per_channel_tau: bool = False
    authors_code: bool = False
    bn_per_step: bool = False
    surrogate: str = "atan"
    detach_reset: bool = True
    device: str = "auto"
    seed: int = 0
    data_dir: str | None = None
    max_train_samples: int | None = None
    max_test_samples: int | None = None
    val_split: float = 0.0
    eval_batch_size: int = 256
    backend: str = "auto"
    compile: bool = False
    sync_bn: bool = False
    memory: str = field(default="none", metadata={
        "help": "activation savings in training: none; exact (one-byte spikes, two-byte max-pool offsets, "
                "BN recomputed; bit-identical gradients); all (exact + bf16 potentials)",
        "choices": ("none", "exact", "all")})
    checkpoint_blocks: bool = field(default=False, metadata={
        "help": "keep only each convolutional block's input for backward and recompute the block (exact)"})
    out: str | None = None
    input_shape: tuple = field(default=())
    num_classes: int = 0

    def network_kwargs(self) -> dict:
        """Keywords for :func:`plif.models.build_network` that rebuild exactly this network."""
        return {
            "neuron": self.neuron.upper(), "tau0": self.tau0, "pool": self.pool,
            "per_channel_tau": self.per_channel_tau, "bn_per_step": self.bn_per_step,
            "surrogate": self.surrogate, "detach_reset": self.detach_reset, "backend": self.backend,
        }

    def memory_options(self):
        """The :class:`plif.models.MemoryOptions` of ``memory`` and ``checkpoint_blocks``."""
        from ..models import MEMORY_PRESETS

        if self.memory not in ("none", "exact", "all"):
            raise ValueError(f"unknown --memory {self.memory!r}; valid: none, exact, all")
        return dataclasses.replace(MEMORY_PRESETS[self.memory], checkpoint_blocks=bool(self.checkpoint_blocks))

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["input_shape"] = list(self.input_shape)
        d["network_kwargs"] = self.network_kwargs()
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "TrainConfig":
        names = {f.name for f in dataclasses.fields(cls)}
        kw = {k: v for k, v in d.items() if k in names}
        kw["input_shape"] = tuple(kw.get("input_shape", ()))
        return cls(**kw)


# preset -> values for the fields left at None
PRESETS: dict[str, dict] = {
    "paper": {"epochs": 1024, "batch_size": 16, "lr": 1e-3, "t_max": 64},
    "cpu": {"epochs": 2, "batch_size": 64, "lr": 2e-3, "t_max": 2, "T": 4,
            "network": "{c32k3s1-BN-PLIF-MPk2s2}*2-DP-FC512-PLIF-DP-FC100-PLIF-APk10s10"},
}


def resolve_config(cfg: TrainConfig) -> TrainConfig:
    """Validate names and fill every ``None`` from the preset and the dataset's zoo entry."""
    from ..models import ZOO

    if cfg.dataset not in ZOO:
        raise ValueError(f"unknown dataset {cfg.dataset!r}; valid: {', '.join(ZOO)}")
    if cfg.preset not in PRESETS:
        raise ValueError(f"unknown preset {cfg.preset!r}; valid: {', '.join(PRESETS)}")
    if cfg.neuron.lower() not in NEURON_NAMES:
        raise ValueError(f"unknown neuron {cfg.neuron!r}; valid: {', '.join(NEURON_NAMES)}")
    if cfg.pool not in (None, "max", "avg"):
        raise ValueError(f"unknown pooling {cfg.pool!r}; valid: max, avg")
    cfg.memory_options()  # refuses an unknown --memory before any work
    if not 0.0 <= cfg.val_split < 1.0:
        raise ValueError(f"--val-split must be in [0, 1), got {cfg.val_split}")
    entry = get_entry(cfg.dataset)
    preset = dict(PRESETS[cfg.preset])
    if cfg.preset == "cpu" and cfg.dataset not in STATIC:
        preset.pop("network")  # the narrow network is sized for 28x28 images; events use the zoo
    values = {}
    for name in ("T", "epochs", "batch_size", "lr", "t_max", "network"):
        if getattr(cfg, name) is None:
            values[name] = preset.get(name)
    values.setdefault("network", None)
    resolved = dataclasses.replace(cfg, **{k: v for k, v in values.items() if v is not None})
    if resolved.network is None:
        resolved = dataclasses.replace(resolved, network=entry.network_string(cfg.authors_code))
    if resolved.T is None:
        resolved = dataclasses.replace(resolved, T=entry.T)
    for name in ("T", "epochs", "batch_size", "t_max", "eval_batch_size"):
        if getattr(resolved, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(resolved, name)}")
    return dataclasses.replace(resolved, neuron=cfg.neuron.lower(), input_shape=tuple(entry.input_shape),
                               num_classes=entry.num_classes)


# Settings that may change when a run is resumed without changing what it computes.
RESUMABLE_CHANGES = ("epochs", "device", "out", "eval_batch_size", "memory", "checkpoint_blocks")


def config_diff(old: dict, new: dict) -> list[str]:
    """Human-readable differences between two resolved configs that forbid a resume."""
    diffs = []
    for key in sorted(set(old) | set(new)):
        if key in RESUMABLE_CHANGES or key == "network_kwargs":
            continue
        a, b = old.get(key), new.get(key)
        if json.dumps(a) != json.dumps(b):
            diffs.append(f"  {key}: run has {a!r}, now {b!r}")
    return diffs
