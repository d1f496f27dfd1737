"""How the fused block's Triton kernels are launched: programs, warps, time chunks and flags.

Pure functions of the block's shape, shared by the launchers (:mod:`.triton_block`) and the
lowering check (:mod:`.lowering`), which lowers what they can return.  Nothing here queries the
device: a launch is deterministic and replays unchanged in a CUDA graph.

- Forward: a program owns ``block`` 2×2 windows (or ``block`` pixels without the pool) of one
  ``(b, c)`` plane and loops over ``t``.
- Backward: a program owns ``block`` pixels of one plane, one per thread, and walks time in chunks
  of ``chunk`` steps held in registers (:func:`chunk_steps`).
- Elementwise passes (statistics, BatchNorm's input gradient): up to 1,024 pixels of one plane.
"""
from __future__ import annotations

from .triton_launch import Launch, pow2_at_least

__all__ = ["MAX_CHUNK", "chunk_steps", "forward_launch", "backward_launch", "plane_launch",
           "forward_flags", "backward_flags", "input_grad_flags", "stats_flags"]

MAX_CHUNK = 20  # time steps a backward program holds in registers: T <= 20 is one chunk (one read of y)
_FORWARD_NEURONS = 1024  # neurons a forward program owns at most (256 windows of 4)
_BACKWARD_NEURONS = 128  # one a thread, 4 warps
_PLANE_NEURONS = 1024


def _warps(neurons: int) -> int:
    return 4 if neurons >= 512 else 2 if neurons >= 256 else 1


def forward_launch(h, w, pool: bool) -> Launch:
    """Windows (``pool``: ``ceil(H/2)·ceil(W/2)`` of them, the last row or column of an odd plane
    in windows of its own) or pixels per program."""
    if pool:
        block = pow2_at_least(((h + 1) // 2) * ((w + 1) // 2), 16, _FORWARD_NEURONS // 4)
        return Launch(block, _warps(4 * block))
    block = pow2_at_least(h * w, 16, _FORWARD_NEURONS)
    return Launch(block, _warps(block))


def backward_launch(h, w) -> Launch:
    """Pixels per program, one per thread (a warp at least)."""
    block = pow2_at_least(h * w, 32, _BACKWARD_NEURONS)
    return Launch(block, block // 32)


def plane_launch(h, w) -> Launch:
    """Pixels per program of the elementwise passes."""
    block = pow2_at_least(h * w, 16, _PLANE_NEURONS)
    return Launch(block, _warps(block))


def chunk_steps(T: int, max_chunk: int | None = None) -> int:
    """Steps per backward chunk: all ``T`` when they fit in ``max_chunk`` (:data:`MAX_CHUNK`, read
    at the call), else the chunks balanced (``T = 30``: 15 + 15)."""
    chunks = -(-int(T) // (max_chunk or MAX_CHUNK))
    return -(-int(T) // chunks)


def forward_flags(pool: bool, leak: bool, hard: bool, per_channel: bool, has_v0: bool, need_state: bool,
                  block: int) -> dict:
    """The forward kernel's ``tl.constexpr`` values."""
    return dict(BLOCK=block, POOL=pool, LEAK=leak, HARD=hard, PER_CHANNEL=per_channel, HAS_V0=has_v0,
                NEED_STATE=need_state)


def backward_flags(pool: bool, leak: bool, hard: bool, detach: bool, sg_code: int, per_channel: bool,
                   has_v0: bool, has_g_v_last: bool, need_k: bool, chunk: int, block: int) -> dict:
    """The backward kernel's ``tl.constexpr`` values."""
    return dict(BLOCK=block, CHUNK=chunk, POOL=pool, LEAK=leak, HARD=hard, DETACH=detach,
                SG=sg_code, PER_CHANNEL=per_channel, HAS_V0=has_v0, HAS_GV=has_g_v_last, NEED_K=need_k)


def input_grad_flags(training: bool, block: int) -> dict:
    """BatchNorm's input-gradient kernel's ``tl.constexpr`` values."""
    return dict(BLOCK=block, TRAINING=training)


def stats_flags(block: int) -> dict:
    """The statistics kernel's ``tl.constexpr`` values."""
    return dict(BLOCK=block)
