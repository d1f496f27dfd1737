"""The network a run's config describes, and how the run's batches reach it: the one place that tells a
network in the paper's notation from one written as ``nn.Module`` code (``plif train --model``).

A run's config (``config.json``, :meth:`plif.train.TrainConfig.to_dict`) names one of them: ``network``,
a notation string :func:`plif.models.build_network` builds with the stored ``network_kwargs``, or
``model``, a factory reference (:mod:`plif.models.factories`).  Training, resuming, and every reader of a
run folder build it with :func:`build_run_network` and feed it the batches :func:`run_prepare` makes:
a notation network takes a static image ``[B, ...]`` (it owns its encoder, and hoists what runs once),
a ``--model`` network ``[T, B, ...]``, a static image repeated over T as a stride-0 view (which
:func:`plif.fuse` recognises); event frames are ``[T, B, ...]`` for both.
"""
from __future__ import annotations

from typing import Callable, Mapping

__all__ = ["run_model", "network_label", "build_run_network", "takes_frames", "run_prepare"]


def run_model(config: Mapping) -> str | None:
    """The ``--model`` reference of a run's config, None for a network in the paper's notation."""
    return config.get("model") or None


def network_label(config: Mapping, notation: str = "{}") -> str:
    """The run's network in a few words: ``--model REF``, or its notation string as ``notation``
    formats it (``"the network {!r}"``)."""
    ref = run_model(config)
    return f"--model {ref}" if ref is not None else notation.format(config["network"])


def build_run_network(config: Mapping, backend: str = "auto", seed: int | None = None, option: str = "backend"):
    """The network of a run's ``config`` (``network`` or ``model``, ``input_shape``, ``T``, and
    ``network_kwargs`` or ``num_classes``), its neurons set to ``backend``, not yet fused.

    seed: torch's generator is seeded with it before any weight is drawn (a factory's reseeds derive
    from it: :func:`plif.models.factories.build_model`); None: as it stands (a network whose weights
    are loaded next).  option: how an error names ``backend`` for a ``--model`` network."""
    ref = run_model(config)
    if ref is not None:
        from .factories import build_model

        return build_model(ref, config["input_shape"], config["num_classes"], config["T"], backend, option=option,
                           seed=seed)
    import torch

    from .network import build_network

    if seed is not None:
        torch.manual_seed(seed)
    return build_network(config["network"], config["input_shape"], config["T"],
                         **config.get("network_kwargs", {})).set_backend(backend)


def takes_frames(config: Mapping, is_event: bool) -> bool:
    """Whether the run's batches are ``[T, B, ...]`` (event frames, or a ``--model`` network's input)
    rather than static images ``[B, ...]``: the batch is dim 1 then."""
    return is_event or run_model(config) is not None


def run_prepare(prepare: Callable, config: Mapping, is_event: bool) -> Callable:
    """The data pipeline's ``prepare(x, gen)`` made to give the run's network its input: a static
    dataset's batch repeated over ``T`` as a stride-0 view for a ``--model`` network; else ``prepare``."""
    if is_event or run_model(config) is None:  # frames already, or a network that takes [B, ...]
        return prepare
    from .inputs import repeat_over_time

    T = int(config["T"])

    def prepare_over_time(x, gen=None):
        return repeat_over_time(prepare(x, gen), T)

    return prepare_over_time
