"""Training configuration: one frozen dataclass, presets, and the resolution of defaults.

``paper`` is the paper's protocol exactly (its supplement, Hyper-Parameters: the zoo network, its T,
batch 16, Adam 1e-3, cosine T_max=64 per epoch, 1024 epochs).  ``cpu`` is the main job: each dataset's narrower network of the same form
(``cpu_network`` in :mod:`plif.catalog`: 32 instead of 128 channels, FC512, T = 4) for 2 epochs, which reached 89.3% test accuracy on Fashion-MNIST in
3 minutes on a 2-core CPU (REPRODUCTION.md).

The checks :func:`resolve_config` runs are :mod:`plif.train.checks`; a field's kind and flag,
:mod:`plif.train.fields`.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from ..catalog import DATASETS, DatasetSpec, get_dataset
from ..encoding import DEFAULT_ENCODER, ENCODERS, encoder_spec
from ..models.memory import DEFAULT_MEMORY, MEMORY_HELP, MEMORY_PRESETS  # --memory left to plif, except where plif.train.speed compiles
from ..surrogate import PAPER_SURROGATE, SURROGATES, surrogate_spec
from .checks import NEURON_NAMES, check_effects, check_names, check_values, check_stored_network
from .fields import field_kind, is_int, value_fits
from .loss import LOSSES, Loss
from .optim import OPTIMIZERS, Recipe

__all__ = ["TrainConfig", "PRESETS", "resolve_config", "check_stored", "MEMORY_CHOICES", "SPEED_AUTO",
           "left_to_plif", "RECIPE_FIELDS"]

MEMORY_CHOICES = tuple(MEMORY_PRESETS)  # --memory: the one table of memory modes (plif.fuse takes the same)


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
    model: str | None = field(default=None, metadata={
        "help": "train a network written as nn.Module code instead of --network: FILE.py:FACTORY, "
                "package.module:FACTORY or a registered name (plif.models.factories); FACTORY gets those of "
                "input_shape, num_classes and T it takes and returns a module mapping [T, B, ...] to "
                "[T, B, classes]", "metavar": "REF"})
    T: int | None = field(default=None, metadata={"help": "time-steps per sample [preset / zoo]"})
    epochs: int | None = field(default=None, metadata={"help": "epochs to train [paper 1024, cpu 2]"})
    batch_size: int | None = field(default=None, metadata={"help": "training batch size per process [paper 16, cpu 64]"})
    lr: float | None = field(default=None, metadata={"help": "learning rate [paper 1e-3, cpu 2e-3]"})
    t_max: int | None = field(default=None, metadata={
        "help": "CosineAnnealingLR period in epochs [paper 64; cpu: --epochs, and a --resume that changes --epochs "
                "stretches it to the new epochs, the lr going on from the stretched curve]"})
    warmup_epochs: int = field(default=0, metadata={
        "help": "linear warm-up: epoch e < N runs at lr*(e+1)/(N+1), then the cosine anneals over the rest of "
                "its period (plif.train.optim.warmup_cosine_factor)"})
    loss: str = field(default="mse", metadata={
        "help": "mse: the paper's, MSE of the firing rate against the one-hot label; ce: cross-entropy of the mean "
                "over T of the output (SEW ResNet's); tet: TET, every step's cross-entropy averaged over T plus "
                "--tet-lambda times an MSE pulling the outputs to --tet-phi (Deng et al., ICLR 2022)",
        "choices": LOSSES})
    label_smoothing: float = field(default=0.0, metadata={
        "help": "label smoothing of --loss ce / tet's cross-entropy, in [0, 1)"})
    tet_lambda: float = field(default=1e-3, metadata={
        "help": "--loss tet: the loss is (1 - lambda) * its cross-entropy + lambda * its MSE regulariser, lambda "
                "in [0, 1) (TET's code's default)"})
    tet_phi: float = field(default=1.0, metadata={
        "help": "--loss tet: the constant its MSE regulariser pulls every output to (TET's code's default)"})
    optimizer: str = field(default="adam", metadata={
        "help": "adam: the paper's; sgd: SGD with --momentum (SEW ResNet's)", "choices": OPTIMIZERS})
    momentum: float = field(default=0.9, metadata={"help": "--optimizer sgd: momentum, in [0, 1)"})
    nesterov: bool = field(default=False, metadata={"help": "--optimizer sgd: Nesterov momentum"})
    weight_decay: float = field(default=0.0, metadata={
        "help": "L2 weight decay, torch's (added to the gradient; Adam's too, not AdamW's); 0 is the paper's"})
    neuron: str = field(default="plif", metadata={
        "help": "replace every neuron of the network", "choices": NEURON_NAMES})
    tau0: float = field(default=2.0, metadata={"help": "initial tau of PLIF, the fixed tau of LIF (> 1, at most 1e30)"})
    pool: str | None = field(default=None, metadata={
        "help": "replace every spatial pooling [as the network string says]", "choices": ("max", "avg")})
    per_channel_tau: bool = field(default=False, metadata={"help": "one learnable tau per channel instead of per layer"})
    authors_code: bool = field(default=False, metadata={"help": "the authors' code's network variant"})
    bn_per_step: bool = field(default=False, metadata={"help": "BatchNorm statistics per time-step"})
    surrogate: str = field(default=PAPER_SURROGATE, metadata={
        "help": f"surrogate gradient of the spike: {', '.join(SURROGATES)} (atan is the paper's), or MODULE:NAME, a "
                "surrogate that importing MODULE registers (plif.surrogate.register_surrogate; MODULE installed or "
                "on PYTHONPATH)", "metavar": "NAME"})
    detach_reset: bool = field(default=True, metadata={
        "help": "detach the reset from the graph (the authors' code does)"})
    encoder: str = field(default=DEFAULT_ENCODER, metadata={
        "help": "how a static image becomes T steps (plif.encoding): direct (the paper's: the image at every step, "
                "the first conv is the learnt encoder), poisson (a spike with probability = the pixel's intensity in "
                "[0, 1] at every step), latency (one spike at step round((T-1)(1-intensity))), latency-log "
                "(SpikingJelly's log latency), phase (the intensity's binary digits, weighted phase); event datasets "
                "feed their frames", "choices": tuple(ENCODERS)})
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
    compile: bool | None = field(default=None, metadata={
        "help": "torch.compile the network (Inductor), inside the CUDA graph when there is one [auto: on inside "
                "the CUDA graph for the networks where that was measured faster, off elsewhere (plif.train.speed)]"})
    cuda_graph: bool | None = field(default=None, metadata={
        "help": "capture the whole training step (and evaluation) as CUDA graphs and replay them, CUDA only [auto: "
                "on CUDA in a single process, unless something the graph cannot replay is asked for, which one "
                "line names; off on the CPU]"})
    tf32: bool | None = field(default=True, metadata={  # None: torch's defaults (plif.device.set_tf32)
        "help": "TF32 tensor cores for fp32 matmuls and convolutions on CUDA (10-bit mantissa products, fp32 sums); "
                "no effect on the CPU; how the run executes, like --backend: a resume may change it"})
    amp: str | None = field(default="auto", metadata={
        "help": "mixed precision: bf16 autocast, with fp32 weights, BatchNorm statistics and output, neuron "
                "state and loss (plif.layers.precision); none: fp32; auto: bf16 on a CPU with native bf16 "
                "(AVX512-BF16 or AMX, asked of the CPU; its accuracy measured within seed noise of fp32), "
                "fp32 elsewhere (CUDA: TF32); config.json records bf16 or null (docs/speed.md) [auto]",
        "choices": ("bf16", "none", "auto")})
    memory: str | None = field(default=None, metadata={
        "help": "how training runs the layers [auto: fused, except none where the network is compiled inside the "
                "CUDA graph as measured faster (plif.train.speed)]: " + "; ".join(f"{k} ({v})" for k, v in MEMORY_HELP.items()),
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

    @property
    def dataset_spec(self) -> DatasetSpec:
        """The record of ``dataset`` (:mod:`plif.catalog`): what the data pipeline, the summary
        and the resolution read; an unknown name raises ``ValueError`` listing the valid ones."""
        return get_dataset(self.dataset)

    def data_options(self):
        """What the data layer reads of this run (:class:`plif.data.pipeline.DataOptions`), the
        dataset's record resolved here once."""
        from ..data.pipeline import DataOptions

        return DataOptions(self.dataset_spec, self.data_dir, self.T, self.seed, self.val_split, self.max_train_samples,
                           self.max_val_samples, self.max_test_samples, self.data_on_device)

    def network_kwargs(self) -> dict:
        """Keywords for :func:`plif.models.build_network` that rebuild exactly this network (the
        neuron backend is not among them: it is how the network runs, chosen where it runs)."""
        kw = {
            "neuron": self.neuron.upper(), "tau0": self.tau0, "pool": self.pool,
            "per_channel_tau": self.per_channel_tau, "bn_per_step": self.bn_per_step,
            "surrogate": self.surrogate, "detach_reset": self.detach_reset,
        }
        if self.encoder != DEFAULT_ENCODER:  # the images come normalised: the encoder maps them back to [0, 1]
            spec = self.dataset_spec
            kw["encoder"] = encoder_spec(self.encoder, spec.mean, spec.std)
        return kw

    def loss_function(self) -> Loss:
        """The run's loss (:class:`plif.train.loss.Loss`: ``--loss`` and its settings)."""
        return Loss(self.loss, self.label_smoothing, self.tet_lambda, self.tet_phi)

    def recipe(self) -> Recipe:
        """The run's optimiser and schedule settings (:class:`plif.train.optim.Recipe`), once resolved."""
        return Recipe(self.optimizer, self.lr, self.momentum, self.nesterov, self.weight_decay, self.warmup_epochs,
                      self.t_max)

    def memory_options(self):
        """The :class:`plif.models.MemoryOptions` of ``memory`` and ``checkpoint_blocks``."""
        memory = DEFAULT_MEMORY if self.memory is None else self.memory  # auto, before plif.train.speed decides it
        if memory not in MEMORY_CHOICES:
            raise ValueError(f"unknown --memory {memory!r}; valid: {', '.join(MEMORY_CHOICES)}")
        opts = MEMORY_PRESETS[memory]
        return dataclasses.replace(opts, checkpoint_blocks=opts.checkpoint_blocks or bool(self.checkpoint_blocks))

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
        d = {**ABSENT_MEANS, **d}
        kw = {}
        for f in dataclasses.fields(cls):
            if f.name not in d:
                continue
            value = d[f.name]
            if f.name == "input_shape":
                if not isinstance(value, (list, tuple)) or not all(is_int(v) for v in value):
                    raise ValueError(f"{source}: input_shape must be a list of integers, got {value!r}")
                value = tuple(value)
            else:
                kind, optional = field_kind(f)
                if not value_fits(value, kind, optional):
                    want = kind.__name__ + (" or null" if optional else "")
                    raise ValueError(f"{source}: {f.name} must be {want}, got {value!r} ({type(value).__name__})")
                if kind is float and value is not None:
                    value = float(value)
            kw[f.name] = value
        return cls(**kw)


# what a stored config.json without the key ran with: runs made before the field existed ran with
# torch's defaults (fp32 matmuls, TF32 cuDNN convolutions: plif.device.TORCH_TF32), in fp32 (amp),
# with the paper's recipe, each recipe field's default (MSE, Adam, no weight decay, no warm-up)
RECIPE_FIELDS = ("loss", "label_smoothing", "tet_lambda", "tet_phi", "optimizer", "momentum", "nesterov",
                 "weight_decay", "warmup_epochs")
"""The settings of the training recipe (:mod:`plif.train.loss`, :mod:`plif.train.optim`); their defaults are the paper's."""
ABSENT_MEANS = {"tf32": None, "encoder": DEFAULT_ENCODER, "amp": None,
                **{f.name: f.default for f in dataclasses.fields(TrainConfig) if f.name in RECIPE_FIELDS}}

SPEED_AUTO = ("cuda_graph", "compile", "memory")
"""The settings :mod:`plif.train.speed` decides for the device and the processes where they are left
``None``.  A run's ``config.json`` records what was decided and, under ``"speed_auto"``, which were
decided, so that a ``--resume`` decides those again where it runs (:func:`left_to_plif`)."""


def left_to_plif(d: dict) -> dict:
    """A stored config ``d`` with the settings plif decided for it (its ``"speed_auto"``) back to ``None``."""
    return {**d, **{name: None for name in d.get("speed_auto", ())}}


# preset -> values for the fields left at None
PRESETS: dict[str, dict] = {
    "paper": {"epochs": 1024, "batch_size": 16, "lr": 1e-3, "t_max": 64},
    # the network is each dataset's cpu_network (plif.catalog), e.g. 32 channels and FC512;
    # t_max: the epochs (resolve_config)
    "cpu": {"epochs": 2, "batch_size": 64, "lr": 2e-3, "T": 4, "cpu_network": True},
}
"""The values each ``preset`` gives the fields left ``None`` (see the module docstring)."""


def resolve_config(cfg: TrainConfig, asked=True) -> TrainConfig:
    """Validate every value and fill every ``None`` from the preset and the dataset's zoo entry.

    Errors are ``ValueError`` naming the option (``--lr``) and what it must be, raised before any
    work starts.  The ``cpu`` preset's cosine period follows ``epochs`` unless ``t_max`` is given.
    asked: ``cfg`` is what is asked for now, not a stored run's config (a resume, ``plif eval``):
    options that would have no effect in it are refused too (:func:`plif.train.checks.check_effects`);
    the names of fields (a resume's options given now): only those are.
    """
    entry = cfg.dataset_spec  # an unknown name: the error lists the valid ones
    check_names(cfg, PRESETS)
    preset = dict(PRESETS[cfg.preset])
    if preset.pop("cpu_network", False):  # the dataset's own CPU-sized network
        preset["network"] = entry.network_string(cpu=True)
    if cfg.model is not None:
        preset.pop("network", None)  # the model is the network
        if cfg.network is not None:
            raise ValueError(f"--network {cfg.network!r} and --model {cfg.model}: give one of them (--model trains a "
                             "network written as nn.Module code)")
        from ..models.factories import parse_model_ref

        kind, where, attr = parse_model_ref(cfg.model)
        cfg = dataclasses.replace(cfg, model=f"{where}:{attr}" if kind == "file" else cfg.model)  # recorded absolute
    values = {name: preset.get(name) for name in ("T", "epochs", "batch_size", "lr", "t_max", "network")
              if getattr(cfg, name) is None}
    if cfg.t_max is None and "t_max" not in preset:
        values["t_max"] = cfg.epochs if cfg.epochs is not None else preset["epochs"]
    resolved = dataclasses.replace(cfg, **{k: v for k, v in values.items() if v is not None})
    if resolved.network is None and cfg.model is None:
        resolved = dataclasses.replace(resolved, network=entry.network_string(cfg.authors_code))
    if resolved.T is None:
        resolved = dataclasses.replace(resolved, T=entry.T)
    check_values(resolved)
    check_encoder(resolved.encoder, entry)
    if asked:
        check_effects(resolved, entry.authors_network, asked)
    return dataclasses.replace(resolved, neuron=cfg.neuron.lower(), input_shape=tuple(entry.input_shape),
                               num_classes=entry.num_classes, surrogate=surrogate_spec(cfg.surrogate, "--surrogate"))


def check_encoder(encoder: str, entry: DatasetSpec) -> None:
    """``--encoder`` other than ``direct`` encodes static images; an event dataset's input is its frames."""
    if encoder != DEFAULT_ENCODER and entry.is_event:
        raise ValueError(f"--encoder {encoder}: encodes static images, but {entry.name} is an event dataset whose "
                         f"input is already its T frames of events; leave --encoder out (direct)")


def check_stored(d: dict, source: str) -> None:
    """A run's stored config (``config.json``, as :func:`plif.runs.read_run_config` reads it) holds
    only values ``plif train`` accepts, and the derived ones (classes, network keywords) agree with
    them; errors name ``source``.  The readers of a run pass it in as their ``check``.

    The data folder is not checked: a run may be evaluated elsewhere (``--data-dir``)."""
    cfg = TrainConfig.from_dict(d, source=source)
    auto = d.get("speed_auto", [])
    if not isinstance(auto, list) or not set(auto) <= set(SPEED_AUTO):
        raise ValueError(f"{source}: speed_auto must be a list of {', '.join(SPEED_AUTO)}, got {auto!r}")
    try:
        resolved = resolve_config(dataclasses.replace(cfg, data_dir=None, backend="auto"), asked=False)  # as it ran
        if "num_classes" in d and cfg.num_classes != resolved.num_classes:  # the input shape build_network checks
            raise ValueError(f"num_classes is {cfg.num_classes!r} but {cfg.dataset} has {resolved.num_classes}")
        unknown = sorted(set(d.get("network_kwargs", {})) - set(resolved.network_kwargs()))
        if unknown:
            raise ValueError(f"network_kwargs has unknown keys {', '.join(map(repr, unknown))}; "
                             f"valid: {', '.join(resolved.network_kwargs())}")
        check_stored_network(dataclasses.replace(resolved, input_shape=cfg.input_shape or resolved.input_shape))
    except ValueError as e:
        raise ValueError(f"{source}: {e}") from None
