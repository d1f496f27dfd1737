"""The checks of a run's settings before any work starts: every value against its meaning, the
network built on the meta device (its output width), and its weights and one batch against the
memory of the machine or device.

A network written as ``nn.Module`` code (``plif train --model``) is checked by running it on one
batch (:func:`check_user_model`), one in the paper's notation by its shapes (:func:`check_network`):
:func:`check_run_network` picks.

Errors are ``ValueError`` naming the option (``--lr``) and what it must be.  Options that would have
no effect in the combination asked for (``--per-channel-tau`` with LIF, ``--tau0`` with IF,
``--max-val-samples`` without ``--val-split``, ...) are refused with the reason, not ignored
(:func:`check_effects`).
"""
from __future__ import annotations

import dataclasses
import math
import os

from ..device import free_memory, pick_device
from ..models.notation import MAX_INT
from ..neurons import NEURONS, check_tau
from ..surrogate import get_surrogate
from ..values import check_value
from .fields import field_kind, flag_name

__all__ = ["NEURON_NAMES", "NOTATION_ONLY", "MAX_SEED", "LR_RANGE", "check_names", "check_values", "check_recipe",
           "check_effects", "idle_settings", "check_outputs", "meta_network", "check_run_network", "check_stored_network",
           "check_user_model", "sample_input",
           "check_network", "check_weights_fit",
           "check_step_fits", "available_memory"]

NEURON_NAMES = tuple(name.lower() for name in NEURONS)
MAX_SEED = 2**32 - 1  # every generator seeded from it stays inside torch's 64-bit seeds
LR_RANGE = (2.0**-126, (2 - 2.0**-23) * 2.0**127)
"""The learning rates that mean something: the normal float32 numbers.  Adam's step ``lr·m/√v``
(``|m/√v|`` about 1, at most ~3) is computed in float32 (the captured step's rate is a float32
tensor): a smaller rate is subnormal there, or 0 (``1e-320``), and changes no weight but one within
~1e-31 of 0 (a step below half a float32 ulp rounds away); a larger one is infinite."""


NOTATION_ONLY = ("network", "neuron", "tau0", "pool", "per_channel_tau", "authors_code", "bn_per_step", "surrogate",
                 "detach_reset", "checkpoint_blocks", "encoder")
"""The settings that build or shape a network from its notation: a ``--model`` network is its own code's."""


def check_names(cfg, presets) -> None:
    """The preset (one of ``presets``), the neuron, the surrogate and every value with choices."""
    if cfg.preset not in presets:
        raise ValueError(f"unknown preset {cfg.preset!r}; valid: {', '.join(presets)}")
    if not isinstance(cfg.neuron, str) or cfg.neuron.lower() not in NEURON_NAMES:
        raise ValueError(f"unknown neuron {cfg.neuron!r}; valid: {', '.join(NEURON_NAMES)}")
    get_surrogate(cfg.surrogate, option="--surrogate")  # the registry, importing MODULE of MODULE:NAME
    for f in dataclasses.fields(cfg):
        choices = f.metadata.get("choices")
        value = getattr(cfg, f.name)
        if f.name in ("dataset", "neuron") or not choices or value is None:
            continue
        if value not in choices:
            raise ValueError(f"{flag_name(f.name)} {value!r}: unknown; valid: {', '.join(map(str, choices))}")


def check_values(cfg) -> None:
    """Every number against its meaning (runs after the preset filled the ``None`` values)."""
    for f in dataclasses.fields(cfg):
        if f.metadata.get("derived"):
            continue
        check_value(flag_name(f.name), getattr(cfg, f.name), *field_kind(f))
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
    check_recipe(cfg)
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


def check_recipe(cfg) -> None:
    """The loss, optimiser and schedule settings against their meaning (after the preset filled ``epochs`` and
    ``t_max``); each error names the option."""
    if cfg.weight_decay < 0:
        raise ValueError(f"--weight-decay must be at least 0, got {cfg.weight_decay:g}")
    if not 0 <= cfg.momentum < 1:
        raise ValueError(f"--momentum must be in [0, 1), got {cfg.momentum:g}")
    if cfg.nesterov and cfg.optimizer == "sgd" and cfg.momentum == 0:
        raise ValueError("--nesterov needs a momentum: --momentum 0 leaves nothing for Nesterov's look-ahead; give "
                         "--momentum above 0 (e.g. 0.9) or drop --nesterov")
    if not 0 <= cfg.label_smoothing < 1:
        raise ValueError(f"--label-smoothing must be in [0, 1), got {cfg.label_smoothing:g}")
    if not 0 <= cfg.tet_lambda < 1:
        raise ValueError(f"--tet-lambda must be in [0, 1) (the loss is (1 - lambda) * cross-entropy + lambda * "
                         f"MSE), got {cfg.tet_lambda:g}")
    if cfg.warmup_epochs < 0:
        raise ValueError(f"--warmup-epochs must be at least 0, got {cfg.warmup_epochs}")
    if cfg.warmup_epochs and cfg.warmup_epochs >= cfg.epochs:
        raise ValueError(f"--warmup-epochs {cfg.warmup_epochs}: must be below --epochs {cfg.epochs} (the warm-up "
                         "would take the whole run)")
    if cfg.warmup_epochs and cfg.warmup_epochs >= cfg.t_max:
        raise ValueError(f"--warmup-epochs {cfg.warmup_epochs}: must be below the cosine period --t-max {cfg.t_max} "
                         "(the warm-up takes the first epochs of it)")


def check_effects(cfg, authors_network: str | None, asked=True) -> None:
    """Options that would have no effect in the resolved config ``cfg``, refused with the reason (each
    is the default's value otherwise), and a ``--lr`` outside :data:`LR_RANGE` (it moves no weight, or
    every weight to infinity); ``authors_network``: the dataset's authors'-code network, if any.
    Only for what is asked now: a stored run's config keeps what it ran with, and ``asked`` (field
    names; True: all) limits the checks to the options given now to continue it."""
    given = _given(asked)
    if given("lr") and not LR_RANGE[0] <= cfg.lr <= LR_RANGE[1]:
        raise ValueError(f"--lr {cfg.lr!r}: must be a normal float32 number, 2^-126 (1.2e-38) to 3.4e38: Adam's step "
                         "lr*m/sqrt(v) is computed in float32, where a smaller rate is subnormal or 0 and changes no "
                         "weight but one within ~1e-31 of 0, a larger one is infinite")
    for name, (default, why) in idle_settings(type(cfg), vars(cfg)).items():
        value = getattr(cfg, name)
        # options named (the command line's, a resume's): any value given is refused, the default's too
        # (--tau0 2 as --tau0 3); all of them (True: a config built in Python) cannot tell the default from
        # "not given", so only another value is
        if given(name) and (asked is not True or value != default):
            raise ValueError(f"{_typed(name, value, default)} has no effect {why}")
    if given("authors_code") and cfg.authors_code and cfg.network != authors_network:
        why = ("the dataset's paper network is the authors' code's" if authors_network is None else
               "--preset cpu trains the dataset's CPU network" if cfg.preset == "cpu" else "--network gives the network")
        raise ValueError(f"--authors-code has no effect here: it picks the authors' code's network for --preset paper, "
                         f"and {why}")


def _typed(name: str, value, default) -> str:
    """An option as typed: a float's value as %g, a switch as ``--x`` or ``--no-x``."""
    if isinstance(value, bool):
        return flag_name(name) if value else "--no-" + flag_name(name)[2:]
    return f"{flag_name(name)} {value:g}" if isinstance(default, float) else f"{flag_name(name)} {value}"


def idle_settings(config_type, values) -> dict[str, tuple[object, str]]:
    """The settings that have no effect in config ``values`` (field name -> value of dataclass
    ``config_type``; one left out is at its default): name -> (its default, why), in the order
    :func:`check_effects` refuses one given another value.  ``per_channel_tau`` without PLIF,
    ``tau0`` with IF, ``max_val_samples`` without ``val_split``; a resume compares them at their
    defaults (:func:`plif.train.resume.config_diff`: runs made before they were refused kept them)."""
    default = {f.name: f.default for f in dataclasses.fields(config_type)}
    neuron = str(values.get("neuron", default["neuron"])).lower()
    why = {}
    if neuron != "plif":
        why["per_channel_tau"] = (f"with --neuron {neuron}: only PLIF learns its tau, so only PLIF can learn one per "
                                  "channel" + (" (IF has no tau)" if neuron == "if" else ""))
    if neuron == "if":
        why["tau0"] = ("with --neuron if: IF integrates without a leak, it has no time constant (--neuron lif or "
                       "plif have one)")
    if values.get("model"):
        why.update({name: (f"with --model: {values['model']} builds its own network (its layers, neurons and "
                           "surrogates are its code's)") for name in NOTATION_ONLY if name != "network"})
    loss = values.get("loss", default["loss"])
    if loss == "mse":
        why["label_smoothing"] = ("with --loss mse: only the cross-entropy of --loss ce and --loss tet smooths its "
                                  "labels")
    if loss != "tet":
        for name in ("tet_lambda", "tet_phi"):
            why[name] = f"with --loss {loss}: it sets the MSE regulariser of --loss tet, which --loss {loss} has not"
    optimizer = values.get("optimizer", default["optimizer"])
    if optimizer != "sgd":
        for name in ("momentum", "nesterov"):
            why[name] = (f"with --optimizer {optimizer}: Adam keeps its own moment estimates; it is SGD's "
                         "(--optimizer sgd)")
    if not values.get("val_split", default["val_split"]):
        why["max_val_samples"] = ("without --val-split: no validation split is held out (protocol B: e.g. "
                                  "--val-split 0.15)")
    return {name: (default[name], reason) for name, reason in why.items()}


def check_network_effects(model, cfg, asked=True) -> None:
    """Options that would have no effect on the network ``model`` (built from ``cfg``); ``asked`` as
    :func:`check_effects` takes it."""
    given = _given(asked)
    kinds = [(i.kind, len(i.out_shape)) for i in model.info]
    if given("bn_per_step") and cfg.bn_per_step and not any(kind == "bn" for kind, _ in kinds):
        raise ValueError(f"--bn-per-step has no effect: the network {cfg.network!r} has no BatchNorm (BN)")
    head = next((k for k, (kind, _) in enumerate(kinds) if kind in ("flatten", "fc")), len(kinds))
    if given("checkpoint_blocks") and cfg.checkpoint_blocks and not any(kind == "pool" and dims == 3 for kind, dims in kinds[:head]):
        raise ValueError(f"--checkpoint-blocks has no effect: the network {cfg.network!r} has no convolutional block "
                         "to recompute (a block ends with a spatial pooling before the first FC layer)")


def _given(asked):
    """Whether an option is among ``asked`` (field names), or every one when that is True."""
    return (lambda name: True) if asked is True else (lambda name: name in asked)


def check_outputs(model, cfg) -> None:
    """The network's output per sample must be one value per class of the dataset."""
    out = model.info[-1].out_shape if model.info else tuple(cfg.input_shape)
    if tuple(out) != (cfg.num_classes,):
        raise ValueError(f"--network {cfg.network!r}: gives outputs of shape {tuple(out)} per sample, but "
                         f"{cfg.dataset} has {cfg.num_classes} classes; end the network with "
                         f"{cfg.num_classes} outputs (e.g. ...-FC{cfg.num_classes * 10}-PLIF-APk10s10)")


def meta_network(cfg, outputs: bool = True):
    """``cfg``'s network built on the meta device (shapes, no storage), its output width checked."""
    import torch

    from ..models import build_network

    with torch.device("meta"):
        model = build_network(cfg.network, cfg.input_shape, cfg.T, **cfg.network_kwargs())
    if outputs:
        check_outputs(model, cfg)
    return model


def check_run_network(cfg, asked=True) -> None:
    """The network of ``cfg`` checked before anything is written: a ``--model`` network built and run on
    one batch (:func:`check_user_model`), a notation network built on the meta
    device (:func:`check_network`).  The one place where what is checked differs: a notation network's
    shapes and sizes are known without weights, a module's only by running it."""
    if cfg.model is not None:
        check_user_model(cfg)
    else:
        check_network(cfg, asked=asked)


def sample_input(cfg, batch: int = 2, device="cpu"):
    """A batch of the dataset's input as a ``--model`` network gets it: ``[T, batch, *input_shape]``
    (zeros: only its shape matters)."""
    import torch

    from ..models.inputs import repeat_over_time

    return repeat_over_time(torch.zeros((batch, *cfg.input_shape), device=device), cfg.T)


def check_user_model(cfg) -> None:
    """Refuse, before anything is written, a ``--model`` that does not import, names no attribute,
    raises, returns no module, or whose output for the dataset's input is not ``[T, B, classes]``
    (:class:`plif.models.factories.ModelError`, one line naming the reference); and one whose weights
    with Adam's state exceed the machine's or device's memory.

    The factory is called with the seed set, as ``plif train`` builds it (a reseed inside it derived
    from ``--seed``, :func:`plif.models.factories.build_model`, so that a factory that reseeds torch
    cannot make ``--seed 1`` and ``--seed 2`` one network), before any kernel is built, and run on one
    batch of the dataset's input (:func:`sample_input`: a static image repeated over T as a stride-0
    view, which :func:`plif.fuse` hoists)."""
    from ..models.factories import check_model_output
    from ..models.run_network import build_run_network

    model = build_run_network(cfg.to_dict(), cfg.backend, seed=cfg.seed, option="--backend")
    check_model_output(model, cfg.model, sample_input(cfg), cfg.num_classes)
    check_weights_fit(model, f"--model {cfg.model}", cfg.device)


def check_stored_network(cfg) -> None:
    """The network a stored run config ``cfg`` (resolved, as it ran) names, checked without weights: a
    ``--model`` reference plif can read (its module is imported only where trusted), or the network
    string and its sizes (the loaded weights check the rest)."""
    if cfg.model is not None:
        from ..models.factories import parse_model_ref

        parse_model_ref(cfg.model)
    else:
        meta_network(cfg, outputs=False)


def check_network(cfg, asked=True) -> None:
    """Build ``cfg``'s network on the meta device (shapes, no storage) and refuse, before anything is
    written, a network that cannot be built, has the wrong output width, or whose weights with
    Adam's state, or one batch of input, alone exceed the memory of the machine or device; and
    options that would have no effect on it, as :func:`plif.train.config.resolve_config` takes
    ``asked`` (True: all, False: none, field names: those)."""
    model = meta_network(cfg)
    if asked:
        check_network_effects(model, cfg, asked)
    limit, where = check_weights_fit(model, f"--network {cfg.network!r}", cfg.device)
    if not limit:
        return
    batch = 4 * cfg.T * cfg.batch_size * math.prod(cfg.input_shape)
    if batch > limit:
        raise ValueError(f"--T {cfg.T} with --batch-size {cfg.batch_size}: one batch of input alone is {_gib(batch)}, "
                         f"more than the {_gib(limit)} of {where}")
    check_step_fits(model, cfg)


def check_step_fits(model, cfg) -> None:
    """Refuse, in one line naming ``--T``, the batch and both sizes, a training step of ``model`` (built
    from ``cfg``, on the meta device) whose least memory (:func:`plif.models.step_memory.step_memory`:
    the activations its layers keep for backward over T, its input, weights and Adam's state) exceeds
    the memory available now on the run's device: the process would be killed, or the allocator fail,
    mid-step.  Unknown available memory: not checked."""
    from ..layers.precision import resolve_amp
    from ..models.memory import DEFAULT_MEMORY
    from ..models.step_memory import step_memory

    available, where = available_memory(cfg.device)
    if not available:
        return
    device = pick_device(cfg.device, check=False)
    need = step_memory(model, cfg.batch_size, cfg.memory_options(), resolve_amp(cfg.amp, device.type),
                       static=not cfg.dataset_spec.is_event)
    if need.total > available:
        memory = cfg.memory or DEFAULT_MEMORY
        raise ValueError(f"--T {cfg.T} with --batch-size {cfg.batch_size}: one training step needs at least "
                         f"{_gib(need.total)} ({_gib(need.activations)} of activations kept for backward over the "
                         f"{cfg.T} steps with --memory {memory}, {_gib(need.input)} of input, {_gib(need.weights)} of "
                         f"weights and Adam's state), more than the {_gib(available)} {where}; lower --T or "
                         "--batch-size")


def available_memory(device: str) -> tuple[int, str]:
    """``(bytes, description)`` of the memory free for a run on ``device`` now, as
    :func:`plif.device.free_memory` reads it (CUDA's free memory, or the host's ``MemAvailable`` within
    a cgroup limit); ``(0, "")`` when unknown."""
    import torch

    dev = pick_device(device, check=False)
    if dev.type == "cuda" and not torch.cuda.is_available():
        return 0, ""
    try:
        free = free_memory(dev)
    except (OSError, ValueError):
        return 0, ""
    return free, f"free on {dev}" if dev.type == "cuda" else "this machine has available (MemAvailable)"


def check_weights_fit(model, what: str, device: str) -> tuple[int, str]:
    """Refuse ``model`` (``what`` names it) when its fp32 weights with their gradients and Adam's two
    moments exceed the memory of ``device``; returns ``(bytes, description)`` of that memory."""
    limit, where = _memory_size(device)
    params = sum(p.numel() for p in model.parameters())
    need = 4 * 4 * params
    if limit and need > limit:
        raise ValueError(f"{what}: {params:,} weights need {_gib(need)} with their gradients and Adam's state, more "
                         f"than the {_gib(limit)} of {where}")
    return limit, where


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
