"""Check a fused block backend against :mod:`plif.kernels.block_reference` on a grid of cases.

A backend is the triple ``(block_forward, block_backward, bn_input_grad)`` with the reference's
signatures.  Per case: the (pooled) spikes, the pool's places and ``V_{T-1}`` must be identical to
the reference's (fp32, fp64, and bf16 ``y``, whose arithmetic is fp32 in both); ``∂z``, ``∂V_{-1}``,
``∂k`` and the two per-channel sums must agree to a tolerance relative to each tensor's largest
value (they add the same terms in another order); ``∂y`` from the same ``∂z`` and sums must be
identical.  Run on a GPU machine as ``python -m plif.kernels.block_check --backend triton --device
cuda`` (one line per case, non-zero exit on a failure or when no case ran); a case in a dtype the
backend refuses (Triton: fp64) is skipped, one line saying so.  The tests run it for the CPU kernel.
"""
from __future__ import annotations

import argparse
import itertools
import json
import sys
from dataclasses import asdict, dataclass

import torch

from .. import kernel_table
from ..neurons.functional import state_dtype
from ..surrogate import SURROGATES
from .block_reference import block_backward_reference, block_forward_reference, bn_input_grad
from .check import TAU, case_config

__all__ = ["BlockCase", "block_grid", "make_block_inputs", "run_block_case", "load_backend", "main"]

TOLERANCE = {"float64": 1e-10, "float32": 2e-5, "bfloat16": 2e-5, "float16": 2e-5}  # half y: fp32 arithmetic on both sides


@dataclass(frozen=True)
class BlockCase:
    """One comparison: ``shape`` is ``[T, B, C, H, W]``; ``k_mode`` ``layer`` (one τ) or ``channel``."""

    shape: tuple
    neuron: str = "PLIF"
    k_mode: str = "layer"
    hard: bool = True
    detach: bool = True
    surrogate: str = "atan"
    dtype: str = "float32"
    pool: bool = True
    v0: bool = False
    need_state: bool = False

    @property
    def name(self) -> str:
        flags = [self.neuron, self.k_mode, "hard" if self.hard else "soft", "detach" if self.detach else "attached",
                 self.surrogate, self.dtype, "pool" if self.pool else "nopool"]
        flags += ["v0"] if self.v0 else []
        flags += ["state"] if self.need_state else []
        return "-".join(flags + ["x".join(map(str, self.shape))])


def block_grid(quick: bool = False) -> list[BlockCase]:
    """Every neuron, reset and detach flag on odd and even sizes with and without the pool; each
    surrogate; per-channel τ; ``v0`` and ``V_{T-1}``; sizes over one tile; each case in fp32 (the
    quick grid: a third of them), and a part in fp64 and bf16."""
    shapes = [(1, 2, 3, 4, 4), (3, 2, 3, 7, 6), (8, 1, 2, 5, 9)]
    cases = []
    for neuron, hard, detach, shape, pool in itertools.product(["IF", "LIF", "PLIF"], [True, False], [True, False],
                                                              shapes, [True, False]):
        cases.append(BlockCase(shape, neuron, "layer", hard, detach, pool=pool, v0=hard, need_state=detach))
    for sg, pool in itertools.product(SURROGATES, [True, False]):
        cases.append(BlockCase((3, 2, 3, 6, 7), "PLIF", "channel", True, False, sg, pool=pool, v0=True, need_state=True))
        cases.append(BlockCase((8, 1, 2, 5, 4), "LIF", "channel", False, True, sg, pool=pool))
    cases += [BlockCase((3, 2, 3, 30, 41), "PLIF", "channel", need_state=True),  # several tiles per plane
              BlockCase((2, 1, 2, 9, 300), "PLIF", pool=False, v0=True),  # rows wider than a tile
              BlockCase((3, 2, 2, 1, 5), "IF", pool=False), BlockCase((2, 2, 2, 3, 1), "PLIF", pool=False)]
    if quick:
        cases = cases[::3]
    wide = [BlockCase(**{**asdict(c), "dtype": d}) for c in cases[::5] for d in ("float64", "bfloat16")]
    return cases + wide


def make_block_inputs(case: BlockCase, device="cpu", seed: int = 0) -> dict:
    """Every argument of the three functions for ``case``; ``y`` scaled so that every case fires."""
    gen = torch.Generator().manual_seed(seed)
    dtype = getattr(torch, case.dtype)
    wide = state_dtype(dtype)
    T, B, C, H, W = case.shape
    r = lambda *shape: torch.randn(shape, generator=gen, dtype=torch.float64)  # noqa: E731
    tau = TAU[case.neuron]
    y = r(T, B, C, H, W) * 2 + 0.5
    mean, invstd = r(C) * 0.1 + 0.5, torch.rand(C, generator=gen, dtype=torch.float64) + 0.5
    scale, shift = invstd * (1 + 0.2 * r(C)) * tau * 1.2, r(C) * 0.3
    kshape = (C,) if case.k_mode == "channel" else (1,)
    k = torch.sigmoid(r(*kshape) * 0.5) if case.neuron == "PLIF" else torch.full(kshape, 1 / tau, dtype=torch.float64)
    pooled = (T, B, C, H // 2, W // 2) if case.pool else (T, B, C, H, W)
    cfg = case_config(case)
    to = lambda t, dt: t.to(dt).to(device)  # noqa: E731
    return {"y": to(y, dtype), "scale": to(scale, wide), "shift": to(shift, wide), "mean": to(mean, wide),
            "invstd": to(invstd, wide), "k": to(k, wide), "v0": to(torch.rand(B, C, H, W, generator=gen) * 0.5, wide)
            if case.v0 else None, "cfg": cfg, "pool": case.pool, "g_out": to(r(*pooled), dtype),
            "g_v_last": to(r(B, C, H, W), wide) if case.need_state else None}


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double().cpu(), b.double().cpu()
    if a.shape != b.shape:
        return float("inf")
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30)) if b.numel() else 0.0


def run_block_case(case: BlockCase, forward, backward, input_grad, device="cpu", g_y_tol: float = 0.0) -> dict:
    """Compare a backend's three functions with the reference on ``case``; ``g_y_tol``: ``∂y`` within
    this of the reference's largest value instead of identical (Triton's stated exactness)."""
    a = make_block_inputs(case, device)
    fa = (a["y"], a["scale"], a["shift"], a["k"], a["v0"], a["cfg"], a["pool"], case.need_state)
    out, place, v_last = forward(*fa)
    r_out, r_place, r_v = block_forward_reference(*fa)
    same = {"out": torch.equal(out.cpu(), r_out.cpu()), "place": torch.equal(place.cpu(), r_place.cpu()),
            "v_last": torch.equal(v_last.cpu(), r_v.cpu())}
    ba = (a["y"], a["scale"], a["shift"], a["mean"], a["k"], a["v0"], a["cfg"], a["pool"])
    got = backward(*ba, place, a["g_out"], a["g_v_last"], True)
    ref = block_backward_reference(*ba, r_place, a["g_out"], a["g_v_last"], True)
    errs = {name: _rel(x, y) for name, x, y in zip(("g_z", "g_v0", "g_k", "sum_g", "sum_gc"), got, ref)}
    if not a["cfg"].leak:  # IF has no k: zeros on both sides
        errs["g_k"] = 0.0 if not got[2].any() else float("inf")
    for training in (True, False):
        ia = (a["y"], a["mean"], a["invstd"], a["scale"], ref[3], ref[4], training)
        # a clone: a backend may write ∂y over the ∂z it is given (Triton's and the CPU's in-place one do)
        got_y, ref_y = input_grad(ref[0].clone(), *ia).cpu(), bn_input_grad(ref[0], *ia).cpu()
        same[f"g_y_{'train' if training else 'eval'}"] = (_rel(got_y, ref_y) <= g_y_tol if g_y_tol
                                                          else torch.equal(got_y, ref_y))
    fired = bool(0 < r_out.sum() < r_out.numel()) or r_out.numel() == 0
    tol = TOLERANCE[case.dtype]
    ok = all(same.values()) and fired and all(e <= tol for e in errs.values())
    return {"case": case.name, "ok": ok, "fired": fired, "tol": tol, **same, **errs}


def load_backend(name: str):
    """``(forward, backward, input_grad, supports)`` of block kernel ``name``, loaded through
    :mod:`plif.kernel_table`; a ``RuntimeError`` with the reason where it did not load."""
    found = kernel_table.functions("block", name)
    if found is None:
        raise RuntimeError(f"block kernel {name!r}: did not load here: {kernel_table.failure('block', name) or 'not in plif.kernel_table'}")
    return tuple(found[role] for role in ("forward", "backward", "input_grad", "supports"))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="check a fused block backend against block_reference")
    p.add_argument("--backend", required=True, choices=tuple(kernel_table.KERNELS["block"]))
    p.add_argument("--device", default="cpu")
    p.add_argument("--quick", action="store_true", help="a third of the fp32 grid")
    p.add_argument("--json", action="store_true", help="print one JSON object per case")
    args = p.parse_args(argv)
    *fns, supports = load_backend(args.backend)
    bad = ran = 0
    for case in block_grid(args.quick):
        if not supports(args.device, getattr(torch, case.dtype)):
            print(json.dumps({"case": case.name, "skipped": f"{args.backend} does not take {case.dtype} on "
                                                            f"{args.device}"}) if args.json
                  else f"skip {case.name} ({args.backend} does not take {case.dtype} on {args.device})", flush=True)
            continue
        r = run_block_case(case, *fns, device=args.device)
        bad, ran = bad + (not r["ok"]), ran + 1
        print(json.dumps(r) if args.json else f"{'ok  ' if r['ok'] else 'FAIL'} {r['case']}", flush=True)
    if not ran:
        print(f"no case ran: {args.backend} takes none of the grid's dtypes on {args.device}", file=sys.stderr)
    return 1 if bad or not ran else 0


if __name__ == "__main__":
    sys.exit(main())
