"""Encoders by name: what ``plif train --encoder``, ``build_network(..., encoder=NAME)`` and a run's
``config.json`` call them."""
from __future__ import annotations

import functools
from typing import Sequence

from .base import Encoder
from .delta import DeltaEncoder
from .direct import DirectEncoder
from .intensity import Intensity, Normalised
from .latency import LatencyEncoder
from .periodic import PeriodicEncoder
from .phase import WeightedPhaseEncoder
from .poisson import PoissonEncoder
from .population import PopulationEncoder

DEFAULT_ENCODER = "direct"

ENCODERS = {
    "direct": DirectEncoder,
    "poisson": PoissonEncoder,
    "latency": LatencyEncoder,
    "latency-log": functools.partial(LatencyEncoder, function="log"),
    "phase": WeightedPhaseEncoder,
}
"""Encoders of a static image ``[B, ...] -> [T, B, ...]``, by name (``plif train --encoder``): name ->
``factory(T, check=...)``."""

OTHER_ENCODERS = {"periodic": PeriodicEncoder, "delta": DeltaEncoder, "population": PopulationEncoder}
"""The other encoders, by name: their input is a sequence (periodic: a pattern ``[P, B, ...]``;
delta: ``[T, B, ...]``) or their output has more features than the input (population), so a network
cannot take them as its static feed; build them yourself."""


_WHY = {"periodic": "its input is a pattern [P, B, ...], not an image",
        "delta": "it codes the changes of a sequence [T, B, ...]; a repeated image changes only at step 0",
        "population": "it gives N values per input value, which changes the network's input shape"}


def _name_of(spec) -> str:
    if spec in OTHER_ENCODERS:
        raise ValueError(f"encoder {spec!r} is not a network's feed ({_WHY[spec]}); build "
                         f"plif.encoding.{OTHER_ENCODERS[spec].__name__}(T, ...) and apply it yourself")
    if not isinstance(spec, str) or spec not in ENCODERS:
        raise ValueError(f"unknown encoder {spec!r}; valid: {', '.join(ENCODERS)}")
    return spec


def make_encoder(spec, T: int, channels: int | None = None) -> Encoder | None:
    """The encoder ``spec`` names for ``T`` steps, or None for the direct (the network's own) feed.

    spec: None, an :class:`Encoder` (kept as it is: its ``T`` must equal ``T``), a name of
    :data:`ENCODERS`, or ``{"name": NAME, "mean": [...], "std": [...]}`` as a run's ``config.json``
    stores it (``network_kwargs["encoder"]``: input normalised with that mean and std, mapped back
    to ``[0, 1]`` by :class:`Intensity`, whose clamp makes the range check needless: none runs).
    channels: the input's channels where known (the mean and std must have one value per channel)."""
    if spec is None or isinstance(spec, DirectEncoder):
        return None
    if isinstance(spec, Encoder):
        if spec.T != T:
            raise ValueError(f"encoder: {type(spec).__name__} has T = {spec.T}, the network T = {T}")
        return spec
    options = {}
    if isinstance(spec, dict):
        unknown = sorted(set(spec) - {"name", "mean", "std"})
        if unknown or "name" not in spec:
            raise ValueError(f"encoder: expected {{'name': ..., 'mean': [...], 'std': [...]}}, got {spec!r}")
        options = {k: v for k, v in spec.items() if k != "name"}
        spec = spec["name"]
    name = _name_of(spec)
    if options and set(options) != {"mean", "std"}:
        raise ValueError(f"encoder {name!r}: give both mean and std, got {sorted(options)}")
    intensity = Intensity(options["mean"], options["std"], channels) if options else None
    if name == DEFAULT_ENCODER:
        return None
    encoder = ENCODERS[name](T, check=not options)  # Intensity's clamp keeps normalised images in range
    return Normalised(encoder, intensity) if intensity is not None else encoder


def encoder_spec(name: str, mean: Sequence[float] | None = None, std: Sequence[float] | None = None):
    """What a run stores for ``--encoder name`` on images normalised with ``mean``/``std``: None for
    ``direct`` (the network's own feed), else the dict :func:`make_encoder` takes."""
    name = _name_of(name)
    if name == DEFAULT_ENCODER:
        return None
    if mean is None:
        return name
    return {"name": name, "mean": [float(m) for m in mean], "std": [float(s) for s in std]}
