"""How the Triton neuron kernels are launched: neurons a program, warps, and the compile-time flags.

Pure functions of a layer's shape, shared by the launchers and by the lowering check
(:mod:`plif.kernels.lowering`), which lowers every combination they can return.  Sizes may be
symbolic under ``torch.compile`` (a dynamic batch): only comparisons are made on them, so they
guard instead of specialising.  Nothing here queries the device, so a launch is deterministic,
needs no host synchronisation and replays unchanged inside a CUDA graph.

One launch table: up to 1,024 neurons of one ``k`` channel and 4 warps a program.  Smaller
programs (at least 1,024 of them), 8 warps a program and loads issued a step ahead by hand
measured 0.99-1.05 of it on an H200 (``docs/gpu/h200-2026-11-27/``) and were removed.
``num_stages`` is not a lever either: these loops hold no ``tl.dot``, and Triton's pipeliner
leaves them alone (the TTGIR is the same for 1, 3 and 4 stages, checked by the lowering test).
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Launch", "MAX_BLOCK", "launch_config", "forward_flags", "backward_flags", "pow2_at_least"]

MAX_BLOCK = 1024


@dataclass(frozen=True)
class Launch:
    """``block`` neurons (a power of two) of one ``k`` channel per program, run by ``num_warps`` warps
    (the fused block's launches, :mod:`.triton_block_launch`: ``block`` windows or pixels of one plane)."""

    block: int
    num_warps: int


def pow2_at_least(n, low: int, high: int) -> int:
    """The smallest power of two ``>= n``, clamped to ``[low, high]`` (sizes may be symbolic: only compared)."""
    if n >= high:
        return high
    return max(low, 1 << (int(n) - 1).bit_length())


def launch_config(m) -> Launch:
    """The launch for groups of ``m`` neurons: the smallest power of two holding them, between 16
    and :data:`MAX_BLOCK` (8 neurons a thread at 1,024), 4 warps.  A size below one block is
    specialised (small layers only)."""
    return Launch(pow2_at_least(m, 16, MAX_BLOCK), 4)


def forward_flags(leak: bool, hard: bool, per_channel: bool, block: int) -> dict:
    """The forward kernel's ``tl.constexpr`` values."""
    return dict(BLOCK=block, LEAK=leak, HARD=hard, PER_CHANNEL=per_channel)


def backward_flags(leak: bool, hard: bool, detach: bool, sg_code: int, per_channel: bool, need_k: bool,
                   block: int) -> dict:
    """The backward kernel's ``tl.constexpr`` values."""
    return dict(BLOCK=block, LEAK=leak, HARD=hard, DETACH=detach, SG=sg_code, PER_CHANNEL=per_channel,
                NEED_K=need_k)
