"""Time the fused block's Triton kernels against the composed PyTorch layers, against a copy bound.

Two shapes of the paper's networks, after the convolution (``y [T, B, C, H, W]``, fp32 and bf16):

- ``gesture``: DVS128 Gesture's first block, T20 B16 C128 128×128, BN-PLIF-MPk2s2;
- ``cifar10``: CIFAR-10's, T8 B16 C256 32×32, BN-PLIF (no pool).

First an exactness check on the device (small blocks, and one of T20 B8 C64 64×64: forward
bit-identical to :mod:`plif.kernels.block_reference`, gradients within 1e-5), then per shape rows:
each fused kernel (statistics, forward, backward, BatchNorm's input gradient), the fused forward and
forward + backward, and the composed layers (``F.batch_norm`` in training mode, plif's neuron on its
fastest backend, ``max_pool2d``; forward, and forward + backward through autograd).  Each row: the
median time between CUDA events, the kernels' device time (``torch.profiler``), the bytes an ideal
pass moves (module docstring of :mod:`plif.kernels.triton_block`), and both times as a % of that
ideal at the speed of a measured ``copy_`` of ``y``.  The Gesture backward is also timed in chunks of
at most 10 steps (two chunks, ``y`` read 1.5 times, ~110 registers a thread) against the default 20
(one chunk, one read, ~170 registers), which decides
:data:`~plif.kernels.triton_block_launch.MAX_CHUNK`.

Without CUDA (or ``dry=True``) the same code runs at tiny shapes in Triton's interpreter, in a
fresh process with ``TRITON_INTERPRET=1``: the times mean nothing, the check and the plumbing do.

    python -m plif.bench.block [--dry] [--out FILE.json]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from ..atomic import atomic_write_text
from ..layers.fused_block import bn_affine as _scale_shift
from ..neurons.functional import NeuronConfig
from .kernels import profile_kernels
from .neuron import _timer

__all__ = ["SHAPES", "DRY_SHAPES", "run_block_bench", "main"]

SHAPES = {"gesture": ((20, 16, 128, 128, 128), True), "cifar10": ((8, 16, 256, 32, 32), False)}
DRY_SHAPES = {"gesture": ((3, 2, 4, 8, 8), True), "cifar10": ((2, 2, 4, 6, 6), False)}
_CHECK_SHAPES = ((3, 2, 3, 9, 10), (4, 2, 3, 6, 5))  # odd and even sides, checked with and without the pool
# On the device only: T <= 20 is one backward chunk, the usual case, at a size where a load
# past a tensor's end (offsets up to B·C·H·W) leaves the allocation by megabytes, not bytes
_LARGE_CHECK_SHAPE = (20, 8, 64, 64, 64)


def _inputs(shape, pool: bool, dtype, device, seed: int = 0):
    """``y``, BatchNorm's affine (γ, β), PLIF's one ``k`` and an upstream gradient, as a trained
    block sees them (about a fifth of the neurons fire)."""
    gen = torch.Generator().manual_seed(seed)
    T, B, C, H, W = shape
    y = (torch.randn(shape, generator=gen) * 1.5 + 0.3).to(device=device, dtype=dtype)
    gamma = (torch.rand(C, generator=gen) + 0.5).to(device)
    beta = (torch.rand(C, generator=gen) * 0.5 + 0.2).to(device)
    k = torch.full((1,), 0.5, device=device)
    out_shape = (T, B, C, H // 2, W // 2) if pool else shape
    g_out = torch.randn(out_shape, generator=gen).to(device=device, dtype=dtype)
    return y, gamma, beta, k, g_out


def _affine(y, gamma, beta, stats):
    """``(mean, invstd, scale, shift)`` of BatchNorm over ``y`` with ``stats(y) = (mean, biased variance)``."""
    mean, var = stats(y)
    invstd = (var + 1e-5).rsqrt()
    return (mean, invstd, *_scale_shift(gamma, beta, mean, invstd))


def _torch_stats(y):
    var, mean = torch.var_mean(y.float(), dim=(0, 1, 3, 4), correction=0)
    return mean, var


def _fused(y, gamma, beta, k, g_out, pool: bool, cfg: NeuronConfig):
    """The fused block's calls: ``fwd()`` (statistics and forward), ``bwd()`` (backward and
    BatchNorm's input gradient, from a stored forward) and each kernel alone."""
    from ..kernels import triton_block as tb

    mean, invstd, scale, shift = _affine(y, gamma, beta, tb.block_stats_triton)
    out, place, _ = tb.block_forward_triton(y, scale, shift, k, None, cfg, pool)
    g = tb.block_backward_triton(y, scale, shift, mean, k, None, cfg, pool, place, g_out, None)
    g_z = g[0].clone()  # fp32 y: BatchNorm's input gradient is written over it, call after call

    def fwd():
        _, _, s, sh = _affine(y, gamma, beta, tb.block_stats_triton)
        return tb.block_forward_triton(y, s, sh, k, None, cfg, pool)

    def bwd():
        g_z, _, g_k, sum_g, sum_gc = tb.block_backward_triton(y, scale, shift, mean, k, None, cfg, pool, place,
                                                              g_out, None)
        return tb.bn_input_grad_triton(g_z, y, mean, invstd, scale, sum_g, sum_gc, True), g_k

    kernels = {"stats": lambda: tb.block_stats_triton(y),
               "forward": lambda: tb.block_forward_triton(y, scale, shift, k, None, cfg, pool),
               "backward": lambda: tb.block_backward_triton(y, scale, shift, mean, k, None, cfg, pool, place, g_out,
                                                            None),
               "bn_input_grad": lambda: tb.bn_input_grad_triton(g_z, y, mean, invstd, scale, g[3], g[4], True)}
    return fwd, bwd, kernels


def _composed(y, gamma, beta, k, g_out, pool: bool, cfg: NeuronConfig):
    """BatchNorm in training mode, plif's neuron (``auto`` on CUDA; ``bptt`` in a dry run, which
    builds no C++), ``max_pool2d``: ``fwd()`` and ``fwd_bwd()``."""
    from ..neurons.dispatch import multi_step

    backend = "auto" if y.is_cuda else "bptt"
    T, B = y.shape[:2]
    running = torch.zeros(y.shape[2], device=y.device), torch.ones(y.shape[2], device=y.device)

    def fwd(grad: bool = False):
        yy, gg, bb = (t.detach().requires_grad_(grad) for t in (y, gamma, beta))
        z = F.batch_norm(yy.flatten(0, 1), *running, gg, bb, training=True).unflatten(0, (T, B))
        s, _ = multi_step(z, k.reshape(()), None, cfg, backend)
        out = F.max_pool2d(s.flatten(0, 1), 2, 2).unflatten(0, (T, B)) if pool else s
        return out, (yy, gg, bb)

    def fwd_bwd():
        out, leaves = fwd(True)
        return torch.autograd.grad(out, leaves, g_out)

    return (lambda: fwd()[0]), fwd_bwd


def _ideal_bytes(shape, pool: bool, elem: int) -> dict:
    """Bytes an ideal pass of each fused kernel moves (``y`` read once, ``place`` one byte)."""
    n = 1
    for d in shape:
        n *= d
    pooled = n // 4 if pool else n
    out = {"stats": n * elem,
           "forward": n * elem + pooled * elem + (pooled if pool else 0),
           "backward": n * elem + pooled * elem + (pooled if pool else 0) + 4 * n,
           "bn_input_grad": 4 * n + 2 * n * elem}
    out["fwd"] = out["stats"] + out["forward"]
    out["fwd+bwd"] = out["fwd"] + out["backward"] + out["bn_input_grad"]
    return out


def _check(device, dry: bool, log) -> list[dict]:
    """The kernels against the reference on small blocks of this device and one large one:
    forward bit-identical, gradients within 1e-5 of the largest (fp32 and bf16 ``y``; two of the
    small cases in a dry run)."""
    from ..kernels import block_reference as ref
    from ..kernels import triton_block as tb

    rows = []
    cfg = NeuronConfig(detach_reset=False)
    shapes = _CHECK_SHAPES if dry else (*_CHECK_SHAPES, _LARGE_CHECK_SHAPE)
    cases = [(s, p, d) for s in shapes for p in (True, False) for d in (torch.float32, torch.bfloat16)]
    for shape, pool, dtype in (cases[::5] if dry else cases):
        y, gamma, beta, k, g_out = _inputs(shape, pool, dtype, device, seed=1)
        k = torch.rand(shape[2], generator=torch.Generator().manual_seed(2)).to(device) * 0.5 + 0.3
        mean, _, scale, shift = _affine(y, gamma, beta, _torch_stats)
        r = ref.block_forward_reference(y, scale, shift, k, None, cfg, pool, True)
        f = tb.block_forward_triton(y, scale, shift, k, None, cfg, pool, True)
        rb = ref.block_backward_reference(y, scale, shift, mean, k, None, cfg, pool, r[1], g_out, None)
        fb = tb.block_backward_triton(y, scale, shift, mean, k, None, cfg, pool, f[1], g_out, None)
        errs = [float((a - b).abs().max() / a.abs().max().clamp_min(1e-30)) for a, b in zip(rb, fb)]
        row = {"shape": list(shape), "pool": pool, "dtype": str(dtype).replace("torch.", ""),
               "forward_identical": all(torch.equal(a, b) for a, b in zip(r, f)), "grad_rel_err": max(errs)}
        row["ok"] = row["forward_identical"] and row["grad_rel_err"] < 1e-5
        rows.append(row)
        log(f"  check {row['shape']} pool={pool} {row['dtype']}: forward identical {row['forward_identical']}, "
            f"gradients {row['grad_rel_err']:.1e}")
    return rows


def _row(name, fn, device, ideal, copy_gbs, reps, budget_s) -> dict:
    ms = _timer(device, fn, reps, budget_s)[0] * 1e3
    prof = profile_kernels(fn, device)
    row = {"name": name, "ms": ms, "device_ms": prof["kernel_ms"], "kernels": prof["kernels"], "ideal_bytes": ideal}
    if ideal:
        bound_ms = ideal / (copy_gbs * 1e9) * 1e3
        row["pct_copy_bound"] = 100 * bound_ms / ms
        row["pct_copy_bound_device"] = 100 * bound_ms / prof["kernel_ms"] if prof["kernel_ms"] else None
    return row


def _measure(device, shapes: dict, dtypes, short_chunk: int, reps: int, budget_s: float, deadline: float | None,
             log, results: list) -> list[dict]:
    """Append one result per shape and dtype to ``results`` as it is measured; returns it."""
    from ..kernels import triton_block_launch as launch

    cfg = NeuronConfig()
    for case, (shape, pool) in shapes.items():
        for dtype in dtypes:
            name = f"{case}-T{shape[0]}-B{shape[1]}-C{shape[2]}-{shape[3]}x{shape[4]}-{str(dtype)[6:]}"
            if deadline is not None and time.monotonic() > deadline:
                results.append({"case": name, "note": "not run: time budget spent"})
                continue
            y, gamma, beta, k, g_out = _inputs(shape, pool, dtype, device)
            copy = torch.empty_like(y)
            copy_ms = _timer(device, lambda: copy.copy_(y), reps, budget_s)[0] * 1e3
            del copy
            copy_gbs = 2 * y.numel() * y.element_size() / (copy_ms * 1e-3) / 1e9
            ideal = _ideal_bytes(shape, pool, y.element_size())
            log(f"{name}: y {y.numel() * y.element_size() / 1e9:.2f} GB, copy {copy_ms:.2f} ms ({copy_gbs:.0f} GB/s)")
            fwd, bwd, kernels = _fused(y, gamma, beta, k, g_out, pool, cfg)
            rows = [_row(f"fused {key}", fn, device, ideal[key], copy_gbs, reps, budget_s) for key, fn in kernels.items()]
            rows.append(_row("fused fwd", fwd, device, ideal["fwd"], copy_gbs, reps, budget_s))
            rows.append(_row("fused fwd+bwd", lambda: (fwd(), bwd()), device, ideal["fwd+bwd"], copy_gbs, reps,
                             budget_s))
            if shape[0] > short_chunk:  # the chunk length the next GPU run decides
                saved = launch.MAX_CHUNK
                try:
                    launch.MAX_CHUNK = short_chunk
                    rows.append(_row(f"fused backward, chunks <= {short_chunk}", kernels["backward"], device,
                                     ideal["backward"], copy_gbs, reps, budget_s))
                finally:
                    launch.MAX_CHUNK = saved
            if dtype == torch.float32:
                c_fwd, c_fwd_bwd = _composed(y, gamma, beta, k, g_out, pool, cfg)
                rows.append(_row("composed fwd", c_fwd, device, ideal["fwd"], copy_gbs, reps, budget_s))
                rows.append(_row("composed fwd+bwd", c_fwd_bwd, device, ideal["fwd+bwd"], copy_gbs, reps, budget_s))
            for r in rows:
                log(f"  {r['name']:>30}: {r['ms']:9.3f} ms" + (f", device {r['device_ms']:.3f} ms"
                                                              if r["device_ms"] else "")
                    + (f", {r['pct_copy_bound']:.0f}% of the copy bound" if r.get("pct_copy_bound") else ""))
            results.append({"case": name, "copy_ms": copy_ms, "copy_gbs": copy_gbs, "rows": rows})
            del y, g_out, fwd, bwd, kernels
            if device.type == "cuda":
                torch.cuda.empty_cache()
    return results


def _run_here(device, dry: bool, deadline, log, out: dict) -> dict:
    shapes = DRY_SHAPES if dry else SHAPES
    dtypes = (torch.float32,) if dry else (torch.float32, torch.bfloat16)
    out.update(device=torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu (Triton interpreter)",
               dry=dry, torch=torch.__version__)
    out["check"] = _check(device, dry, log)
    out["check_ok"] = all(r["ok"] for r in out["check"])
    out["cases"] = []
    _measure(device, shapes, dtypes, 2 if dry else 10, 2 if dry else 20, 0.5 if dry else 5.0, deadline, log,
             out["cases"])
    return out


def run_block_bench(device: str | torch.device | None = None, dry: bool | None = None,
                    deadline: float | None = None, log=print, partial: dict | None = None) -> dict:
    """The check and the timings as a JSON-able dict (see the module docstring).  ``device``: CUDA
    when available unless given; on the CPU (or ``dry``) the tiny interpreter run, in a subprocess
    unless this process already interprets.  ``deadline`` (``time.monotonic()``): shapes past it
    are reported as not run.  ``partial``: a dict filled as results come (the device run), so a
    caller stopped mid-way keeps them; it is the dict returned."""
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    dry = device.type != "cuda" if dry is None else dry
    if device.type == "cuda" and not dry:
        return _run_here(device, False, deadline, log, {} if partial is None else partial)
    if os.environ.get("TRITON_INTERPRET") == "1":
        return _run_here(torch.device("cpu"), True, deadline, log, {} if partial is None else partial)
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    timeout = None if deadline is None else max(30.0, deadline - time.monotonic())
    proc = subprocess.run([sys.executable, "-m", "plif.bench.block", "--dry", "--json"], env=env,
                          capture_output=True, text=True, timeout=timeout)
    for line in proc.stderr.splitlines():
        log(line)
    if proc.returncode != 0:
        raise RuntimeError(f"the interpreter run of plif.bench.block failed ({proc.returncode}): {proc.stderr[-2000:]}")
    result = json.loads(proc.stdout.splitlines()[-1])
    if partial is None:
        return result
    partial.update(result)
    return partial


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="time the fused block's Triton kernels against the composed layers")
    p.add_argument("--dry", action="store_true", help="tiny shapes in Triton's interpreter (the default without CUDA)")
    p.add_argument("--json", action="store_true", help="print the result as one JSON line on stdout (the log on stderr)")
    p.add_argument("--out", type=Path, help="also write the result to this JSON file")
    args = p.parse_args(argv)
    log = (lambda msg: print(msg, file=sys.stderr, flush=True)) if args.json else print
    result = run_block_bench(dry=args.dry or None, log=log)
    if args.out:
        atomic_write_text(args.out, json.dumps(result, indent=1) + "\n")
    if args.json:
        print(json.dumps(result))
    return 0 if result["check_ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
