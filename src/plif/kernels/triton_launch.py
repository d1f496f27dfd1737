"""How the Triton neuron kernels are launched: neurons a program, warps, and the compile-time flags.

Pure functions of a layer's shape and the switches (:mod:`plif.kernels.gpu_switches`), shared by
the launchers and by the lowering check (:mod:`plif.kernels.lowering`), which lowers every
combination they can return.  Sizes may be symbolic under ``torch.compile`` (a dynamic batch):
only comparisons are made on them, so they guard instead of specialising.  Nothing here queries
the device, so a launch is deterministic, needs no host synchronisation and replays unchanged
inside a CUDA graph.

``num_stages`` is not a lever: these loops hold no ``tl.dot``, and Triton's pipeliner leaves
them alone (the TTGIR is the same for 1, 3 and 4 stages, checked by the lowering test); loads
issued ahead of the step that uses them are the ``PREFETCH`` flag instead.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Launch", "MAX_BLOCK", "launch_config", "forward_flags", "backward_flags"]

MAX_BLOCK = 1024
FINE_PROGRAMS = 1024  # ``fine``: at least this many programs (7-8 per SM on an H100's 132) where the layer allows


@dataclass(frozen=True)
class Launch:
    """``block`` neurons (a power of two) of one ``k`` channel per program, run by ``num_warps`` warps."""

    block: int
    num_warps: int


def _fit(m) -> int:
    """The smallest power of two holding ``m`` neurons, between 16 and :data:`MAX_BLOCK`.  A size
    below one block is specialised (small layers only)."""
    if m >= MAX_BLOCK:
        return MAX_BLOCK
    return max(16, 1 << (int(m) - 1).bit_length())


def launch_config(m, channels: int, table: str = "default") -> Launch:
    """The launch for ``channels`` groups of ``m`` neurons each, by launch table.

    - ``default``: what the first H100 run measured: up to 1,024 neurons and 4 warps a program
      (8 neurons a thread);
    - ``wide``: the same programs with 8 warps (4 neurons a thread: one 16-byte load of fp32);
    - ``fine``: programs of 512, 256 or 128 neurons (4 a thread) where 1,024-neuron programs would
      number fewer than 1,024 (an FC layer of B64 x 2048 is 128 programs, under an H100's 132 SMs);
      the default launch elsewhere.
    """
    block = _fit(m)
    if table == "default":
        return Launch(block, 4)
    if table == "wide":
        return Launch(block, 8 if block >= MAX_BLOCK else 4)
    if table == "fine":
        for b in (MAX_BLOCK, 512, 256):
            if channels * m >= b * FINE_PROGRAMS:
                break
        else:
            b = 128
        block = min(block, b)
        return Launch(block, min(4, max(1, block // 128)))  # 1,024 neurons: the default launch
    raise ValueError(f"unknown launch table {table!r}; valid: default, fine, wide")


def forward_flags(leak: bool, hard: bool, per_channel: bool, block: int, prefetch: bool) -> dict:
    """The forward kernel's ``tl.constexpr`` values."""
    return dict(BLOCK=block, LEAK=leak, HARD=hard, PER_CHANNEL=per_channel, PREFETCH=prefetch)


def backward_flags(leak: bool, hard: bool, detach: bool, sg_code: int, per_channel: bool, need_k: bool,
                   block: int, prefetch: bool) -> dict:
    """The backward kernel's ``tl.constexpr`` values."""
    return dict(BLOCK=block, LEAK=leak, HARD=hard, DETACH=detach, SG=sg_code, PER_CHANNEL=per_channel,
                NEED_K=need_k, PREFETCH=prefetch)
