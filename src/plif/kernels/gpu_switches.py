"""GPU speed switches (issue 30): the one home of every speed option still waiting for a device run.

Each field is one candidate, off by default, so a default run is exactly what the first H100 run
measured (``docs/gpu/``).  A candidate that wins on the device becomes the default by changing
its value here, and nothing else.  Where a switch is read:

- ``launch``, ``prefetch``, ``lean_eager``: each call of the Triton neuron kernels
  (:mod:`plif.kernels.triton_neuron`, :mod:`plif.kernels.triton_launch`);
- ``tf32``: :func:`apply_torch_flags` (``plif train`` calls it once at setup; :func:`switched`
  sets and restores it);
- ``channels_last``: :func:`plif.models.build_network` converts the network it builds.

Turn a switch on for a process with ``PLIF_GPU="tf32,launch=fine"`` (comma-separated
``name[=value]``; a bare name means ``true``), or for a block of code with
``with switched(tf32=True): ...``.  None of them changes what a network computes except ``tf32``
(fp32 matmul inputs rounded to TF32's 10-bit mantissa) and ``channels_last`` (cuDNN may pick other
convolution algorithms, so sums may round differently); the others are bit-identical, except ``∂k``
under ``launch`` (summed in blocks of another size: equal to rounding).
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
from dataclasses import dataclass, field

import torch

__all__ = ["GpuSwitches", "LAUNCH_TABLES", "ENV", "current", "switched", "parse", "parse_changes", "apply_torch_flags"]

ENV = "PLIF_GPU"
LAUNCH_TABLES = ("default", "fine", "wide")  # :func:`plif.kernels.triton_launch.launch_config`


@dataclass(frozen=True)
class GpuSwitches:
    """Every GPU speed candidate with its default (what the 2026-11-26 H100 run measured)."""

    launch: str = field(default="default", metadata={
        "help": "neuron kernel launch table: default (1,024 neurons and 4 warps a program), fine (smaller "
                "programs, at least 1,024 of them, for layers that leave SMs idle), wide (8 warps a program)",
        "choices": LAUNCH_TABLES})
    prefetch: bool = field(default=False, metadata={
        "help": "neuron kernels load step t+1's inputs before computing step t (loads in flight while the "
                "step waits; Triton does not pipeline these loops itself)"})
    lean_eager: bool = field(default=False, metadata={
        "help": "an eager neuron call goes straight to an autograd.Function (no torch.library dispatch) and its "
                "backward skips the zero-fill of unused ∂k partials; torch.compile still sees the custom ops"})
    tf32: bool = field(default=False, metadata={
        "help": "TF32 for fp32 matmuls (the FC layers; cuDNN convolutions allow TF32 by PyTorch's default)"})
    channels_last: bool = field(default=False, metadata={
        "help": "networks built in channels-last memory format; the neuron kernels keep that layout when τ is "
                "one per layer"})


def _value(f: dataclasses.Field, text: str):
    if f.type in ("bool", bool):
        low = text.lower()
        if low not in ("1", "true", "yes", "on", "0", "false", "no", "off"):
            raise ValueError(f"{ENV}: {f.name}={text!r} is not a yes/no value")
        return low in ("1", "true", "yes", "on")
    choices = f.metadata.get("choices")
    if choices and text not in choices:
        raise ValueError(f"{ENV}: {f.name}={text!r}; valid: {', '.join(choices)}")
    return text


_FIELDS = {f.name: f for f in dataclasses.fields(GpuSwitches)}


def parse_changes(text: str) -> dict:
    """``"tf32,launch=fine"`` -> ``{"tf32": True, "launch": "fine"}`` (one-line errors)."""
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


def apply_torch_flags(switches: GpuSwitches | None = None) -> None:
    """Turn on PyTorch's process-wide flags that a switch stands for (today: ``tf32``, CUDA
    matmuls only); a switch that is off leaves the flag as the user set it."""
    if (switches or current()).tf32:
        torch.backends.cuda.matmul.allow_tf32 = True


@contextlib.contextmanager
def switched(**changes):
    """Switches changed for the block (and PyTorch's flags with them); restored on exit."""
    global _current
    before, flags = current(), torch.backends.cuda.matmul.allow_tf32
    for name, value in changes.items():
        if name not in _FIELDS:
            raise ValueError(f"unknown GPU switch {name!r}; valid: {', '.join(_FIELDS)}")
        _value(_FIELDS[name], str(value))  # validates a choice
    _current = dataclasses.replace(before, **changes)
    if "tf32" in changes:
        torch.backends.cuda.matmul.allow_tf32 = bool(changes["tf32"])
    try:
        yield _current
    finally:
        _current = before
        torch.backends.cuda.matmul.allow_tf32 = flags
