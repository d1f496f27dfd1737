"""The fused block's kernel variants for the lowering check (:mod:`.lowering`).

What :mod:`.triton_block`'s launchers can ask for: every flag of :mod:`.triton_block_launch`,
the input dtypes (fp32, bf16, fp16; the launchers refuse fp64), ``T = 1`` (which Triton's JIT
passes as a constant), every launch shape, and every backward chunk length (1 to
:data:`~.triton_block_launch.MAX_CHUNK`).  The covering set holds every value of every flag and
every pair of two flags' values, with the launch shapes and the short chunk lengths taken in turn,
each lowered at least once.  ``--all`` lowers every flag combination at the default launch, and
the backward at every chunk length.
"""
from __future__ import annotations

import itertools

from ..surrogate import SURROGATES, get_surrogate
from .lowering_variants import DTYPES, Variant, cover, in_turn, neuron_options
from .triton_block_launch import (MAX_CHUNK, backward_flags, backward_launch, forward_flags, forward_launch,
                                  input_grad_flags, plane_launch, stats_flags)
from .triton_launch import Launch

__all__ = ["BLOCK_KERNELS", "POINTERS", "INTS", "block_launches", "block_rows", "block_covering_variants",
           "block_all_variants"]

BLOCK_KERNELS = ("block_forward", "block_backward", "bn_input_grad", "block_stats")
# pointer arguments by role, as :mod:`.lowering` types them: "x" (y's dtype), "f32" (the state), "u8"
POINTERS = {"y_ptr": "x", "out_ptr": "x", "g_out_ptr": "x", "g_y_ptr": "x", "place_ptr": "u8",
            **{name: "f32" for name in ("scale_ptr", "shift_ptr", "mean_ptr", "invstd_ptr", "v_start_ptr",
                                        "v_end_ptr", "g_end_ptr", "g_z_ptr", "g_start_ptr", "ckpt_ptr", "part_ptr",
                                        "sum_g_ptr", "sum_gc_ptr", "pivot_ptr")}}
INTS = ("T", "C", "H", "W", "HO", "WO", "N", "NO", "HW", "count")
_SIZES = (1, 2, 3, 8, 16, 17, 32, 64, 128, 256)  # plane sides: every launch shape occurs among them
# The backward is unrolled over its chunk, and lowering it takes seconds from ~10 steps on: the
# covering set takes the short chunks (every code path: one step, the first and later steps of a
# chunk, a chunk past T); --all lowers every length up to MAX_CHUNK.
_COVER_CHUNKS = (1, 2, 3, 4)


def block_launches(kernel: str, pool: bool = False) -> list[Launch]:
    """Every launch ``kernel``'s launcher returns over planes from 1×1 to 256×256."""
    pick = {"block_forward": lambda h, w: forward_launch(h, w, pool), "block_backward": backward_launch}
    fn = pick.get(kernel, plane_launch)
    found = {fn(h, w) for h in _SIZES for w in _SIZES}
    return sorted(found, key=lambda launch: (launch.block, launch.num_warps))


def block_rows(kernel: str) -> list[dict]:
    """Every combination of ``kernel``'s flags, input dtype and ``T = 1`` (``unit``)."""
    rows = []
    if kernel == "block_forward":
        for pool, (leak, hard, pc), v0, state, x, unit in itertools.product(
                (True, False), neuron_options(), (True, False), (True, False), DTYPES, (False, True)):
            rows.append(dict(pool=pool, leak=leak, hard=hard, pc=pc, v0=v0, state=state, x=x, unit=unit))
    elif kernel == "block_backward":
        codes = sorted({get_surrogate(name).code for name in SURROGATES})
        for pool, (leak, hard, pc), detach, sg, v0, gv, need_k, x, unit in itertools.product(
                (True, False), neuron_options(), (True, False), codes, (True, False), (True, False), (True, False),
                DTYPES, (False, True)):
            if need_k and not leak:  # the launcher asks for ∂k only with a leak
                continue
            rows.append(dict(pool=pool, leak=leak, hard=hard, pc=pc, detach=detach, sg=sg, v0=v0, gv=gv,
                             need_k=need_k, x=x, unit=unit))
    elif kernel == "bn_input_grad":
        rows = [dict(training=training, x=x) for training, x in itertools.product((True, False), DTYPES)]
    else:
        rows = [dict(x=x) for x in DTYPES]
    return rows


def _flags(kernel: str, row: dict, launch: Launch, chunk: int) -> dict:
    if kernel == "block_forward":
        return forward_flags(row["pool"], row["leak"], row["hard"], row["pc"], row["v0"], row["state"], launch.block)
    if kernel == "block_backward":
        return backward_flags(row["pool"], row["leak"], row["hard"], row["detach"], row["sg"], row["pc"], row["v0"],
                              row["gv"], row["need_k"], chunk, launch.block)
    if kernel == "bn_input_grad":
        return input_grad_flags(row["training"], launch.block)
    return stats_flags(launch.block)


def _variant(kernel: str, row: dict, launch: Launch, chunk: int = 1) -> Variant:
    return Variant(kernel, tuple(sorted(_flags(kernel, row, launch, chunk).items())), launch.num_warps, row["x"],
                   "float32", row.get("unit", False))


def block_covering_variants() -> list[Variant]:
    """Per kernel the all-pairs rows, each with a launch shape of its kind (pooled or not) and a
    chunk length taken in turn, rows repeated until every shape and chunk length is lowered."""
    out = []
    for kernel in BLOCK_KERNELS:
        every = block_rows(kernel)
        by_kind: dict = {}
        for row in (cover(every) if len(every[0]) > 1 else every):  # one factor has no pairs: every row
            by_kind.setdefault(row.get("pool", False), []).append(row)
        pairs = []
        for pool, rows in by_kind.items():
            pairs += in_turn(rows, block_launches(kernel, pool))
        chunks = _COVER_CHUNKS if kernel == "block_backward" else [1]
        out += [_variant(kernel, *pair, chunk) for pair, chunk in in_turn(pairs, chunks)]
    return out


def block_all_variants() -> list[Variant]:
    """Every flag combination of the block's kernels at the default launch and fp32 input (the
    backward in chunks of 2 steps), then the backward with every flag on at each chunk length."""
    out = []
    for kernel in BLOCK_KERNELS:
        seen = set()
        for row in block_rows(kernel):
            launch = {"block_forward": forward_launch(128, 128, row.get("pool", False)),
                      "block_backward": backward_launch(128, 128)}.get(kernel, plane_launch(128, 128))
            v = _variant(kernel, {**row, "x": "float32", "unit": False}, launch, 2)
            if v.flags not in seen:
                seen.add(v.flags)
                out.append(v)
    every = dict(pool=True, leak=True, hard=True, pc=True, detach=False, sg=0, v0=True, gv=True, need_k=True,
                 x="float32", unit=False)
    return out + [_variant("block_backward", every, backward_launch(128, 128), c) for c in range(1, MAX_CHUNK + 1)]
