"""Training configuration: one frozen dataclass, presets, and the resolution of defaults.

``paper`` is the paper's protocol exactly (its supplement, Hyper-Parameters: the zoo network, its T,
batch 16, Adam 1e-3, cosine T_max=64 per epoch, 1024 epochs).  ``cpu`` is the main job: each dataset's narrower network of the same form
(``cpu_network`` in :mod:`plif.data.catalog`: 32 instead of 128 channels, FC512, T = 4) for 2 epochs, which reached 89.3% test accuracy on Fashion-MNIST in
3 minutes on a 2-core CPU (REPRODUCTION.md).
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import dataclass, field

from ..data.catalog import DATASETS
from ..device import pick_device
from ..models import get_entry
from ..models.notation import MAX_INT
from ..neurons import MAX_TAU as MAX_TAU0, NEURONS, check_tau
from ..surrogate import SURROGATES, get_surrogate, surrogate_spec

__all__ = ["TrainConfig", "PRESETS", "resolve_config", "config_diff", "field_kind", "flag_name", "pick_device",
           "check_network", "check_outputs", "check_stored", "read_stored_config", "MAX_SEED", "MAX_TAU0"]

NEURON_NAMES = tuple(name.lower() for name in NEURONS)
MAX_SEED = 2**32 - 1  # every generator seeded from it stays inside torch's 64-bit seeds
MEMORY_CHOICES = ("fused", "none", "exact", "low", "all")  # --memory: presets of plif.models.MEMORY_PRESETS


@dataclass(frozen=True)
class TrainConfig:
    """Every setting of a run; ``None`` means "the preset's value" until :func:`resolve_config`.

    Each field declares its command-line help (and choices) in its metadata: ``plif train`` and
    ``plif ablate`` generate their flags from these (:mod:`plif.cli.config_flags`).
    """

    dataset: str = field(default="fashion-mnist", metadata={
        "help": "dataset to train on", "choices": tuple(DATASETS)})
    preset: str = field(default="cpu", metadata={
        "help": "'paper' is the paper's protocol exactly (its supplement, Hyper-Parameters), 'cpu' a narrower network that trains in minutes",
        "choices": ("paper", "cpu")})
    network: str | None = field(default=None, metadata={
        "help": "network string in the paper's notation [the preset's / the dataset's zoo network]"})
    T: int | None = field(default=None, metadata={"help": "time-steps per sample [preset / zoo]"})
    epochs: int | None = field(default=None, metadata={"help": "epochs to train [paper 1024, cpu 2]"})
    batch_size: int | None = field(default=None, metadata={"help": "training batch size per process [paper 16, cpu 64]"})
    lr: float | None = field(default=None, metadata={"help": "Adam learning rate [paper 1e-3, cpu 2e-3]"})
    t_max: int | None = field(default=None, metadata={
        "help": "CosineAnnealingLR period in epochs [paper 64; cpu: --epochs, and a --resume that changes --epochs "
                "stretches it to the new epochs, the lr going on from the stretched curve]"})
    neuron: str = field(default="plif", metadata={
        "help": "replace every neuron of the network", "choices": NEURON_NAMES})
    tau0: float = field(default=2.0, metadata={"help": "initial tau of PLIF, the fixed tau of LIF (> 1, at most 1e30)"})
    pool: str | None = field(default=None, metadata={
        "help": "replace every spatial pooling [as the network string says]", "choices": ("max", "avg")})
    per_channel_tau: bool = field(default=False, metadata={"help": "one learnable tau per channel instead of per layer"})
    authors_code: bool = field(default=False, metadata={"help": "the authors' code's network variant"})
    bn_per_step: bool = field(default=False, metadata={"help": "BatchNorm statistics per time-step"})
    surrogate: str = field(default="atan", metadata={
        "help": f"surrogate gradient of the spike: {', '.join(SURROGATES)} (atan is the paper's), or MODULE:NAME, a "
                "surrogate that importing MODULE registers (plif.surrogate.register_surrogate; MODULE installed or "
                "on PYTHONPATH)", "metavar": "NAME"})
    detach_reset: bool = field(default=True, metadata={
        "help": "detach the reset from the graph (the authors' code does)"})
    device: str = field(default="auto", metadata={"help": "auto (cuda if available), cpu, cuda, cuda:1, ..."})
    seed: int = field(default=0, metadata={
        "help": "seed of weights, shuffling, augmentation and dropout (0 to 2^32-1)"})
    data_dir: str | None = field(default=None, metadata={
        "help": "folder with the dataset files (Fashion-MNIST is also found in /usr/share/datasets)"})
    max_train_samples: int | None = field(default=None, metadata={
        "help": "use N training samples: a fixed-seed, class-stratified subset (each class in its share); "
                "--val-split then holds out its share of them"})
    max_test_samples: int | None = field(default=None, metadata={
        "help": "use N test samples: a fixed-seed, class-stratified subset (each class in its share)"})
    max_val_samples: int | None = field(default=None, metadata={
        "help": "use N validation samples, class-stratified like --max-train-samples "
                "(independent of --max-test-samples)"})
    val_split: float = field(default=0.0, metadata={
        "help": "hold out this fraction of each class for validation (protocol B; paper: 0.15)"})
    eval_batch_size: int = field(default=256, metadata={"help": "batch size of evaluation passes"})
    data_on_device: str = field(default="auto", metadata={
        "help": "keep whole splits on the device (yes), stream batches from the CPU / frame cache (no), "
                "or yes when they fit in half the free device memory (auto)", "choices": ("auto", "yes", "no")})
    backend: str = field(default="auto", metadata={
        "help": "neuron backend: auto, bptt, reference, or a fused kernel (how the network runs here, not part of "
                "it: --resume may change it)"})
    compile: bool = field(default=False, metadata={"help": "torch.compile the network"})
    cuda_graph: bool = field(default=False, metadata={
        "help": "capture the whole training step (and evaluation) as CUDA graphs and replay them (CUDA only)"})
    amp: str | None = field(default=None, metadata={
        "help": "mixed precision: bf16 autocast with fp32 weights, BatchNorm statistics, neuron state and loss "
                "(CUDA or CPU; on the CPU it pays where oneDNN has native bf16, e.g. AVX512-BF16: docs/speed.md)",
        "choices": ("bf16",)})
    memory: str = field(default="fused", metadata={
        "help": "how training runs the layers: fused (each conv's BN, neuron and 2x2 max-pool as one fused step that "
                "keeps only the conv's output; gradients equal to the composed layers' to rounding); none (the "
                "composed PyTorch layers); exact (fused, the conv outputs recomputed from one-byte spikes in "
                "backward: the same results as fused); low (exact + the first conv block of event input run a few "
                "time-steps at a time and replayed in backward); all (low + bf16 potentials of the other neurons)",
        "choices": MEMORY_CHOICES})
    checkpoint_blocks: bool = field(default=False, metadata={
        "help": "keep only each convolutional block's input for backward and recompute the block (exact)"})
    sync_bn: bool = field(default=False, metadata={"help": "SyncBatchNorm across processes (torchrun, CUDA)"})
    log: str = field(default="none", metadata={
        "help": "also log each epoch to TensorBoard (<run>/tensorboard); metrics.jsonl stays the record",
        "choices": ("none", "tensorboard")})
    time_limit: str | None = field(default=None, metadata={
        "help": "wall time of this job (3600, 90m, 1.5h, 1:30:00, 1-00:00:00): stop cleanly after the last epoch "
                "(or --checkpoint-every step) that fits and exit with status 75 (0 under torchrun); the same command "
                "continues the run"})
    checkpoint_every: int | None = field(default=None, metadata={
        "help": "also checkpoint every STEPS training steps within an epoch (long epochs); a resume continues at "
                "the same batch"})
    out: str | None = field(default=None, metadata={"help": "run folder [runs/<dataset>-<time>]"})
    input_shape: tuple = field(default=(), metadata={"derived": True})
    num_classes: int = field(default=0, metadata={"derived": True})

    def network_kwargs(self) -> dict:
        """Keywords for :func:`plif.models.build_network` that rebuild exactly this network (the
        neuron backend is not among them: it is how the network runs, chosen where it runs)."""
        return {
            "neuron": self.neuron.upper(), "tau0": self.tau0, "pool": self.pool,
            "per_channel_tau": self.per_channel_tau, "bn_per_step": self.bn_per_step,
            "surrogate": self.surrogate, "detach_reset": self.detach_reset,
        }

    def memory_options(self):
        """The :class:`plif.models.MemoryOptions` of ``memory`` and ``checkpoint_blocks``."""
        from ..models import MEMORY_PRESETS

        if self.memory not in MEMORY_CHOICES:
            raise ValueError(f"unknown --memory {self.memory!r}; valid: {', '.join(MEMORY_CHOICES)}")
        return dataclasses.replace(MEMORY_PRESETS[self.memory], checkpoint_blocks=bool(self.checkpoint_blocks))

    def to_dict(self) -> dict:
        """Every field as JSON-ready values plus the network's keyword arguments (a run's ``config.json``)."""
        d = dataclasses.asdict(self)
        d["input_shape"] = list(self.input_shape)
        d["network_kwargs"] = self.network_kwargs()
        return d

    @classmethod
    def from_dict(cls, d: dict, source: str = "config") -> "TrainConfig":
        """Rebuild from :meth:`to_dict`'s output; a value of the wrong type raises ``ValueError``
        naming ``source`` (e.g. the config.json path) and the field.  Unknown keys are ignored."""
        if not isinstance(d, dict):
            raise ValueError(f"{source}: expected a JSON object, got {type(d).__name__}")
        kw = {}
        for f in dataclasses.fields(cls):
            if f.name not in d:
                continue
            value = d[f.name]
            if f.name == "input_shape":
                if not isinstance(value, (list, tuple)) or not all(_is_int(v) for v in value):
                    raise ValueError(f"{source}: input_shape must be a list of integers, got {value!r}")
                value = tuple(value)
            else:
                kind, optional = field_kind(f)
                if not _type_ok(value, kind, optional):
                    want = kind.__name__ + (" or null" if optional else "")
                    raise ValueError(f"{source}: {f.name} must be {want}, got {value!r} ({type(value).__name__})")
                if kind is float and value is not None:
                    value = float(value)
            kw[f.name] = value
        return cls(**kw)


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _type_ok(value, kind, optional: bool) -> bool:
    if value is None:
        return optional
    if kind is bool:
        return isinstance(value, bool)
    if kind is int:
        return _is_int(value)
    if kind is float:
        return _is_int(value) or isinstance(value, float)
    return isinstance(value, kind)


_KINDS = {"bool": bool, "int": int, "float": float, "str": str, "tuple": tuple}


def field_kind(f: dataclasses.Field) -> tuple[type, bool]:
    """``(base type, optional)`` of a config field from its annotation (``int | None`` -> ``(int, True)``)."""
    text = f.type.__name__ if isinstance(f.type, type) else str(f.type).replace("typing.", "")
    parts = [p.strip() for p in text.replace("Optional[", "").rstrip("]").split("|")]
    optional = "None" in parts
    names = [p for p in parts if p != "None"]
    if len(names) != 1 or names[0] not in _KINDS:
        raise TypeError(f"TrainConfig.{f.name}: unsupported annotation {f.type!r} (use bool, int, float, str, "
                        "optionally '| None')")
    return _KINDS[names[0]], optional


# preset -> values for the fields left at None
PRESETS: dict[str, dict] = {
    "paper": {"epochs": 1024, "batch_size": 16, "lr": 1e-3, "t_max": 64},
    # the network is each dataset's cpu_network (plif.data.catalog), e.g. 32 channels and FC512;
    # t_max: the epochs (resolve_config)
    "cpu": {"epochs": 2, "batch_size": 64, "lr": 2e-3, "T": 4, "cpu_network": True},
}
"""The values each ``preset`` gives the fields left ``None`` (see the module docstring)."""


def resolve_config(cfg: TrainConfig) -> TrainConfig:
    """Validate every value and fill every ``None`` from the preset and the dataset's zoo entry.

    Errors are ``ValueError`` naming the option (``--lr``) and what it must be, raised before any
    work starts.  The ``cpu`` preset's cosine period follows ``epochs`` unless ``t_max`` is given.
    """
    from ..models import ZOO

    _check_names(cfg, ZOO)
    entry = get_entry(cfg.dataset)
    preset = dict(PRESETS[cfg.preset])
    if preset.pop("cpu_network", False):  # the dataset's own CPU-sized network
        preset["network"] = entry.network_string(cpu=True)
    values = {name: preset.get(name) for name in ("T", "epochs", "batch_size", "lr", "t_max", "network")
              if getattr(cfg, name) is None}
    if cfg.t_max is None and "t_max" not in preset:
        values["t_max"] = cfg.epochs if cfg.epochs is not None else preset["epochs"]
    resolved = dataclasses.replace(cfg, **{k: v for k, v in values.items() if v is not None})
    if resolved.network is None:
        resolved = dataclasses.replace(resolved, network=entry.network_string(cfg.authors_code))
    if resolved.T is None:
        resolved = dataclasses.replace(resolved, T=entry.T)
    _check_values(resolved)
    return dataclasses.replace(resolved, neuron=cfg.neuron.lower(), input_shape=tuple(entry.input_shape),
                               num_classes=entry.num_classes, surrogate=surrogate_spec(cfg.surrogate, "--surrogate"))


def check_stored(cfg: TrainConfig, d: dict, source: str) -> None:
    """A run's stored config (``config.json``) holds only values ``plif train`` accepts, and the
    derived ones (classes, network keywords) agree with them; errors name ``source``.

    The data folder is not checked: a run may be evaluated elsewhere (``--data-dir``)."""
    try:
        resolved = resolve_config(dataclasses.replace(cfg, data_dir=None, backend="auto"))  # how it ran there
        if "num_classes" in d and cfg.num_classes != resolved.num_classes:  # the input shape build_network checks
            raise ValueError(f"num_classes is {cfg.num_classes!r} but {cfg.dataset} has {resolved.num_classes}")
        kwargs = d.get("network_kwargs", {})
        if not isinstance(kwargs, dict):
            raise ValueError(f"network_kwargs must be an object, got {kwargs!r}")
        # runs made before the backend left the network kept it among these keywords: it is ignored
        unknown = sorted(set(kwargs) - set(resolved.network_kwargs()) - {"backend"})
        if unknown:
            raise ValueError(f"network_kwargs has unknown keys {', '.join(map(repr, unknown))}; "
                             f"valid: {', '.join(resolved.network_kwargs())}")
        # the network string and its sizes (the loaded weights check the rest)
        _meta_network(dataclasses.replace(resolved, input_shape=cfg.input_shape or resolved.input_shape), outputs=False)
    except ValueError as e:
        raise ValueError(f"{source}: {e}") from None


def read_stored_config(run_dir) -> TrainConfig:
    """A run folder's ``config.json`` as a :class:`TrainConfig` holding only values ``plif train``
    accepts (:func:`check_stored`); every error names the file, and the field where there is one."""
    from ..runs import RunFolder

    folder = RunFolder(run_dir)
    return stored_config(folder.read_config(), str(folder.config))


def stored_config(d: dict, source: str) -> TrainConfig:
    """A stored config dict (``config.json``'s, or the copy in a checkpoint) as a checked
    :class:`TrainConfig`; errors name ``source``."""
    cfg = TrainConfig.from_dict(d, source=source)
    check_stored(cfg, d, source)
    return cfg


def flag_name(name: str) -> str:
    """The command-line flag of a config field: ``max_train_samples`` -> ``--max-train-samples``."""
    return "--" + name.replace("_", "-")


def _check_names(cfg: TrainConfig, zoo) -> None:
    if cfg.dataset not in zoo:
        raise ValueError(f"unknown dataset {cfg.dataset!r}; valid: {', '.join(zoo)}")
    if cfg.preset not in PRESETS:
        raise ValueError(f"unknown preset {cfg.preset!r}; valid: {', '.join(PRESETS)}")
    if not isinstance(cfg.neuron, str) or cfg.neuron.lower() not in NEURON_NAMES:
        raise ValueError(f"unknown neuron {cfg.neuron!r}; valid: {', '.join(NEURON_NAMES)}")
    get_surrogate(cfg.surrogate, option="--surrogate")  # the registry, importing MODULE of MODULE:NAME
    for f in dataclasses.fields(TrainConfig):
        choices = f.metadata.get("choices")
        value = getattr(cfg, f.name)
        if f.name in ("dataset", "neuron") or not choices or value is None:
            continue
        if value not in choices:
            raise ValueError(f"{flag_name(f.name)} {value!r}: unknown; valid: {', '.join(map(str, choices))}")


def _check_values(cfg: TrainConfig) -> None:
    """Every number against its meaning (runs after the preset filled the ``None`` values)."""
    for f in dataclasses.fields(TrainConfig):
        if f.metadata.get("derived"):
            continue
        kind, optional = field_kind(f)
        value = getattr(cfg, f.name)
        if not _type_ok(value, kind, optional):
            raise ValueError(f"{flag_name(f.name)} must be {kind.__name__}, got {value!r}")
        if kind is float and value is not None and not math.isfinite(value):
            raise ValueError(f"{flag_name(f.name)} must be a finite number, got {value}")
    for name in ("T", "epochs", "batch_size", "t_max", "eval_batch_size"):
        if getattr(cfg, name) < 1:
            raise ValueError(f"{flag_name(name)} must be at least 1, got {getattr(cfg, name)}")
    for name in ("T", "batch_size", "eval_batch_size"):  # sizes of tensors: torch's limit
        if getattr(cfg, name) > MAX_INT:
            raise ValueError(f"{flag_name(name)} must be at most {MAX_INT} (2^31-1), got {getattr(cfg, name)}")
    for name in ("max_train_samples", "max_test_samples", "max_val_samples"):
        value = getattr(cfg, name)
        if value is not None and value < 1:
            raise ValueError(f"{flag_name(name)} must be at least 1 (leave it out to use every sample), got {value}")
    if cfg.checkpoint_every is not None and cfg.checkpoint_every < 1:
        raise ValueError(f"--checkpoint-every must be at least 1 step, got {cfg.checkpoint_every}")
    if cfg.time_limit is not None:
        from .stopping import parse_duration

        parse_duration(cfg.time_limit)
    if cfg.lr <= 0:
        raise ValueError(f"--lr must be positive, got {cfg.lr:g}")
    if cfg.neuron.lower() != "if":  # also every neuron token of the network string
        check_tau(cfg.tau0, "--tau0")
    if not 0.0 <= cfg.val_split < 1.0:
        raise ValueError(f"--val-split must be in [0, 1), got {cfg.val_split}")
    if not 0 <= cfg.seed <= MAX_SEED:
        raise ValueError(f"--seed must be between 0 and {MAX_SEED} (2^32-1), got {cfg.seed}")
    if cfg.network is not None and not cfg.network.strip():
        raise ValueError("--network must not be empty")
    for name in ("out", "data_dir"):
        if getattr(cfg, name) is not None and not getattr(cfg, name).strip():
            raise ValueError(f"{flag_name(name)} must not be empty (leave it out for the default)")
    if cfg.data_dir is not None and not os.path.isdir(cfg.data_dir):
        raise ValueError(f"--data-dir {cfg.data_dir}: no such folder")
    from ..neurons.dispatch import check_backend

    check_backend(cfg.backend, pick_device(cfg.device, check=False), cfg.surrogate, option="--backend")


def check_outputs(model, cfg: TrainConfig) -> None:
    """The network's output per sample must be one value per class of the dataset."""
    out = model.info[-1].out_shape if model.info else tuple(cfg.input_shape)
    if tuple(out) != (cfg.num_classes,):
        raise ValueError(f"--network {cfg.network!r}: gives outputs of shape {tuple(out)} per sample, but "
                         f"{cfg.dataset} has {cfg.num_classes} classes; end the network with "
                         f"{cfg.num_classes} outputs (e.g. ...-FC{cfg.num_classes * 10}-PLIF-APk10s10)")


def _meta_network(cfg: TrainConfig, outputs: bool = True):
    """``cfg``'s network built on the meta device (shapes, no storage), its output width checked."""
    import torch

    from ..models import build_network

    with torch.device("meta"):
        model = build_network(cfg.network, cfg.input_shape, cfg.T, **cfg.network_kwargs())
    if outputs:
        check_outputs(model, cfg)
    return model


def check_network(cfg: TrainConfig) -> None:
    """Build ``cfg``'s network on the meta device (shapes, no storage) and refuse, before anything is
    written, a network that cannot be built, has the wrong output width, or whose weights with
    Adam's state, or one batch of input, alone exceed the memory of the machine or device."""
    model = _meta_network(cfg)
    limit, where = _memory_size(cfg.device)
    if not limit:
        return
    params = sum(p.numel() for p in model.parameters())
    need = 4 * 4 * params  # fp32 weights, gradients and Adam's two moments
    if need > limit:
        raise ValueError(f"--network {cfg.network!r}: {params:,} weights need {_gib(need)} with their gradients and "
                         f"Adam's state, more than the {_gib(limit)} of {where}")
    batch = 4 * cfg.T * cfg.batch_size * math.prod(cfg.input_shape)
    if batch > limit:
        raise ValueError(f"--T {cfg.T} with --batch-size {cfg.batch_size}: one batch of input alone is {_gib(batch)}, "
                         f"more than the {_gib(limit)} of {where}")


def _gib(n: int) -> str:
    return f"{n / 2**30:,.1f} GiB"


def _memory_size(device: str) -> tuple[int, str]:
    """``(bytes, description)`` of the memory a run on ``device`` has; (0, "") when unknown."""
    import torch

    dev = pick_device(device, check=False)
    if dev.type == "cuda" and torch.cuda.is_available():
        return torch.cuda.get_device_properties(dev.index or 0).total_memory, f"{dev}"
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"), "this machine's memory"
    except (OSError, ValueError):
        return 0, ""


# Settings that may change when a run is resumed without changing what it computes.
RESUMABLE_CHANGES = ("epochs", "device", "out", "eval_batch_size", "data_on_device", "log", "cuda_graph",
                     "memory", "checkpoint_blocks", "backend", "time_limit", "checkpoint_every")


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
