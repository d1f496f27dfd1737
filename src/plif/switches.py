"""GPU speed switches: the one home of a speed option still waiting for a device run to decide it.

Process-wide configuration, read where networks are built (:mod:`plif.models`) and runs recorded
(:mod:`plif.train`); it imports nothing of plif, so every package may read it.

Each field is one candidate, off by default.  A candidate that wins on the device becomes a default
(or a config field, as TF32 did: ``plif train --no-tf32``), a loser is removed with its code.  Left
today:

- ``channels_last``: :func:`plif.models.build_network` converts the network it builds.  In fp32 it
  was 1.04-1.06 of NCHW on an H200 (the Fashion-MNIST step, ``docs/gpu/h200-2026-11-27/``); it
  stays a candidate for bf16 conv-heavy networks, where tensor cores want NHWC (the GPU script's
  ``graph+bf16+channels-last`` rows).

Turn a switch on for a process with ``PLIF_GPU="channels_last"`` (comma-separated
``name[=value]``; a bare name means ``true``), or for a block of code with
``with switched(channels_last=True): ...``.  ``channels_last`` may change what a network computes
(cuDNN may pick other convolution algorithms, so sums may round differently), so ``plif train``
records the switches that are on in the run's ``config.json`` (:func:`changed`).
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
from dataclasses import dataclass, field

__all__ = ["GpuSwitches", "ENV", "current", "changed", "switched", "parse", "parse_changes"]

ENV = "PLIF_GPU"


@dataclass(frozen=True)
class GpuSwitches:
    """Every GPU speed candidate with its default."""

    channels_last: bool = field(default=False, metadata={
        "help": "networks built in channels-last memory format; the neuron kernels keep that layout when τ is "
                "one per layer"})


def _value(f: dataclasses.Field, text: str) -> bool:
    """A switch's value from its text: every switch is a yes/no value."""
    low = text.lower()
    if low not in ("1", "true", "yes", "on", "0", "false", "no", "off"):
        raise ValueError(f"{ENV}: {f.name}={text!r} is not a yes/no value")
    return low in ("1", "true", "yes", "on")


_FIELDS = {f.name: f for f in dataclasses.fields(GpuSwitches)}


def parse_changes(text: str) -> dict:
    """``"channels_last"`` -> ``{"channels_last": True}`` (one-line errors)."""
    values = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, raw = item.partition("=")
        name = name.strip()
        if name not in _FIELDS:
            raise ValueError(f"{ENV}: unknown switch {name!r}; valid: {', '.join(_FIELDS)}")
        values[name] = _value(_FIELDS[name], raw.strip() if raw else "true")
    return values


def parse(text: str) -> GpuSwitches:
    """The switches ``text`` names (``$PLIF_GPU``'s syntax) on top of the defaults."""
    return GpuSwitches(**parse_changes(text))


_current: GpuSwitches | None = None


def current() -> GpuSwitches:
    """The switches in force: :func:`switched`'s, else ``$PLIF_GPU``'s (read once), else the defaults."""
    global _current
    if _current is None:
        _current = parse(os.environ.get(ENV, ""))
    return _current


def changed() -> dict:
    """The switches in force that differ from their defaults (``{}`` in a default run): what a
    run's ``config.json`` records, since each may change what the network computes."""
    now, default = dataclasses.asdict(current()), dataclasses.asdict(GpuSwitches())
    return {k: v for k, v in now.items() if v != default[k]}


@contextlib.contextmanager
def switched(**changes):
    """Switches changed for the block; restored on exit."""
    global _current
    before = current()
    for name, value in changes.items():
        if name not in _FIELDS:
            raise ValueError(f"unknown GPU switch {name!r}; valid: {', '.join(_FIELDS)}")
        _value(_FIELDS[name], str(value))  # a yes/no value, or a one-line error
    _current = dataclasses.replace(before, **changes)
    try:
        yield _current
    finally:
        _current = before
