"""Check a fused backend against the reference loop (autograd) on a grid of cases.

Used by the tests (CPU, and Triton under ``TRITON_INTERPRET=1`` in a subprocess) and runnable on
a GPU machine as ``python -m plif.kernels.check --backend triton --device cuda``: it prints one
line per case and exits non-zero if any case differs.

A case compares spikes (must be identical), ``V_{T-1}``, and the gradients of ``x``, ``k`` and
``v0`` for a random upstream gradient on both outputs.  A case may give its backend a channels-last
input (a channels-last network's convolution output), so that layout is checked against the
reference on the same grid.  Low-precision inputs are compared with the reference run in fp32 on
the same (rounded) values, since the kernels keep their state in fp32.
"""
from __future__ import annotations

import argparse
import itertools
import json
import sys
from dataclasses import asdict, dataclass

import torch

from ..neurons.dispatch import multi_step
from ..neurons.functional import NeuronConfig
from ..surrogate import SURROGATES

__all__ = ["TAU", "Case", "case_config", "case_grid", "variant_cases", "run_case", "main"]

TAU = {"IF": 1.0, "LIF": 3.0, "PLIF": 2.0}  # a case's τ by neuron: inputs scale with it, LIF's k is 1/τ


@dataclass(frozen=True)
class Case:
    """One comparison: ``shape`` is ``[T, B, ...]``; ``neuron`` is IF, LIF or PLIF; ``k_mode``
    ``layer`` (one τ), ``channel`` (dim 2, or dim 1 without spatial dims) or ``neuron`` (one per neuron)."""

    shape: tuple
    neuron: str = "PLIF"
    k_mode: str = "layer"
    hard: bool = True
    detach: bool = True
    surrogate: str = "atan"
    dtype: str = "float32"
    layout: str = "contiguous"  # or "channels_last": x ``[T, B, C, H, W]`` channels-last in each step

    @property
    def name(self) -> str:
        reset = "hard" if self.hard else "soft"
        det = "detach" if self.detach else "attached"
        dims = "x".join(map(str, self.shape))
        extra = "-cl" if self.layout == "channels_last" else ""
        return f"{self.neuron}-{self.k_mode}-{reset}-{det}-{self.surrogate}-{self.dtype}-{dims}{extra}"


def case_config(case) -> NeuronConfig:
    """The neuron of a case (:class:`Case` or :class:`~.block_check.BlockCase`): its leak, reset,
    detach flag and surrogate."""
    return NeuronConfig(leak=case.neuron != "IF", v_reset=0.0 if case.hard else None,
                        detach_reset=case.detach, surrogate=case.surrogate)


def case_grid(quick: bool = False) -> list[Case]:
    """Every flag combination on small odd shapes, plus each surrogate and larger-than-a-block sizes."""
    shapes = [(1, 3, 5), (5, 2, 3, 4, 5)] if quick else [(1, 8), (1, 3, 5), (7, 5), (5, 2, 3, 4, 5), (3, 2, 3, 13, 17)]
    cases = []
    for neuron, hard, detach, shape in itertools.product(["IF", "LIF", "PLIF"], [True, False], [True, False], shapes):
        cases.append(Case(shape, neuron, "layer", hard, detach))
    for k_mode, shape in itertools.product(["channel", "neuron"], [(5, 2, 3, 4, 5), (4, 3, 6)]):
        cases.append(Case(shape, "PLIF", k_mode, True, False))
        cases.append(Case(shape, "LIF", k_mode, False, True))
    for sg, detach in itertools.product(SURROGATES, [True, False]):
        if sg != "atan":  # the default surrogate's PLIF, layer, hard cases on 5-D shapes are the first loop's
            cases.append(Case((6, 2, 3, 5, 7), "PLIF", "layer", True, detach, sg))
        cases.append(Case((6, 2, 3, 5, 7), "PLIF", "channel", False, detach, sg))
    big = (3, 2, 3, 30, 30) if quick else (9, 3, 40, 45)  # more neurons than one block or chunk
    cases += [Case(big, "PLIF", "layer"), Case(big, "PLIF", "channel", False, False), Case(big, "IF")]
    return cases + variant_cases(quick)


def variant_cases(quick: bool = False) -> list[Case]:
    """Channels-last inputs (the ``channels_last`` GPU switch's networks): read in place with one τ,
    copied with one τ per channel."""
    cl = (3, 2, 4, 5, 6)
    cases = [Case(cl, "PLIF", layout="channels_last"), Case(cl, "PLIF", "channel", layout="channels_last")]
    if not quick:
        cases.append(Case(cl, "LIF", "layer", False, True, "rect", layout="channels_last"))
    return cases


def _k(case: Case, step_shape, dtype, gen) -> torch.Tensor:
    tau = TAU[case.neuron]
    if case.k_mode == "layer":
        shape = ()
    elif case.k_mode == "channel":
        shape = (step_shape[1],) + (1,) * (len(step_shape) - 2)
    else:
        shape = tuple(step_shape[1:])
    # PLIF-like k = sigmoid(w) spread around 1/tau; LIF a fixed 1/tau
    w = torch.randn(shape, generator=gen, dtype=torch.float64) * 0.5
    k = torch.sigmoid(w) if case.neuron == "PLIF" else torch.full(shape, 1.0 / tau, dtype=torch.float64)
    return k.to(dtype)


def make_inputs(case: Case, device="cpu", seed: int = 0):
    """``(x, k, v0, cfg, g_s, g_v)`` for a case; inputs scaled so that every case fires."""
    gen = torch.Generator().manual_seed(seed)
    dtype = getattr(torch, case.dtype)
    tau = TAU[case.neuron]
    x = (torch.randn(case.shape, generator=gen, dtype=torch.float64) * 1.5 + 0.6) * tau
    v0 = torch.rand(case.shape[1:], generator=gen, dtype=torch.float64) * 0.5
    k = _k(case, case.shape[1:], torch.float64, gen)
    g_s = torch.randn(case.shape, generator=gen, dtype=torch.float64)
    g_v = torch.randn(case.shape[1:], generator=gen, dtype=torch.float64)
    cfg = case_config(case)
    cast = lambda t: t.to(dtype).to(device)  # noqa: E731
    return cast(x), cast(k), cast(v0), cfg, cast(g_s), cast(g_v)


def _channels_last(x: torch.Tensor) -> torch.Tensor:
    """``[T, B, C, H, W]`` with each step in channels-last memory order (same values)."""
    return x.permute(0, 1, 3, 4, 2).contiguous().permute(0, 1, 4, 2, 3)


def _run(backend, x, k, v0, cfg, g_s, g_v, layout: str = "contiguous"):
    if layout == "channels_last":
        x = _channels_last(x)
    x, k, v0 = (t.detach().clone(memory_format=torch.preserve_format).requires_grad_(True) for t in (x, k, v0))
    s, v = multi_step(x, k, v0, cfg, backend=backend)
    grads = torch.autograd.grad([s, v], [x, k, v0], [g_s.to(s.dtype), g_v.to(v.dtype)], allow_unused=True)
    return s.detach(), v.detach(), grads


def _max_rel_err(a, b) -> float:
    if a is None or b is None:
        return 0.0 if a is None and b is None else float("inf")
    a, b = a.double().cpu(), b.double().cpu()
    return float(((a - b).abs() / (b.abs() + 1.0)).max()) if a.numel() else 0.0


def run_case(case: Case, backend: str, device="cpu") -> dict:
    """Compare ``backend`` with the reference; returns the errors and whether they are within tolerance."""
    x, k, v0, cfg, g_s, g_v = make_inputs(case, device)
    s, v, grads = _run(backend, x, k, v0, cfg, g_s, g_v, case.layout)
    ref_dtype = torch.float64 if case.dtype == "float64" else torch.float32
    up = lambda t: t.to(ref_dtype)  # noqa: E731
    s_ref, v_ref, grads_ref = _run("reference", up(x), up(k), up(v0), cfg, up(g_s), up(g_v))
    if not cfg.leak:
        grads_ref = (grads_ref[0], None, grads_ref[2])  # IF ignores k; the reference never touches it
    # gradients compound over T steps and sum over neurons for k: tolerance relative to fp32/fp64 eps
    tol = {"float64": 1e-10, "float32": 2e-5}.get(case.dtype, 1e-2)
    errs = {"v_last": _max_rel_err(v, v_ref)}
    for name, a, b in zip(("g_x", "g_k", "g_v0"), grads, grads_ref):
        errs[name] = _max_rel_err(a, b)
    spikes_equal = bool(torch.equal(s.to(ref_dtype).cpu(), s_ref.cpu()))
    fired = bool(s_ref.sum() > 0) and bool(s_ref.sum() < s_ref.numel())
    # ∂k sums T·N/k.numel() terms, each side rounding them in a different order
    tols = {name: tol for name in errs}
    tols["g_k"] = tol * max(1.0, (x.numel() / k.numel()) ** 0.5 / 10)
    ok = spikes_equal and fired and all(errs[n] <= tols[n] for n in errs)
    return {"case": case.name, "ok": ok, "spikes_equal": spikes_equal, "fired": fired, "tol": tol, **errs}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="check a fused neuron backend against the reference")
    p.add_argument("--backend", required=True)
    p.add_argument("--device", default="cpu")
    p.add_argument("--quick", action="store_true", help="a smaller grid (for the Triton interpreter)")
    p.add_argument("--dtypes", default="float32", help="comma-separated input dtypes")
    p.add_argument("--json", action="store_true", help="print one JSON object per case")
    args = p.parse_args(argv)
    bad = 0
    for dtype in args.dtypes.split(","):
        for case in case_grid(args.quick):
            r = run_case(Case(**{**asdict(case), "dtype": dtype}), args.backend, args.device)
            bad += not r["ok"]
            print(json.dumps(r) if args.json else f"{'ok  ' if r['ok'] else 'FAIL'} {r['case']}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
