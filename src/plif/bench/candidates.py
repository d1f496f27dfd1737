"""Candidates against the baseline, side by side: each timed in turns with it (A B A B) in one process.

A candidate is a switchable variant of plif (a kernel launch configuration, a fused layer, a TF32
switch ...), prepared to be measured before it becomes the default.  It is any object with

- ``name: str``; ``kind: str``: ``"neuron"`` or ``"train"``; ``decides: str``: one line, what the
  measurement decides;
- ``apply()``: returns a context manager that switches the variant on (the baseline is no context).
  A switch may be read when a layer is built or when it is called, so both the candidate's build
  and every one of its timed calls run inside a fresh ``apply()`` context;
- optionally ``cases`` (neuron: names out of :data:`plif.bench.neuron.CASES`) or ``modes`` (train:
  ``"eager"``, ``"cuda-graph"``) to measure fewer than all of them.

``neuron`` candidates are timed on the standard ``plif bench neuron`` cases, forward + backward of a
:class:`~plif.neurons.PLIF` layer (one τ, the network's call); ``train`` candidates on the paper's
Fashion-MNIST step at batch 16 and 128, eager (``auto``) and ``--cuda-graph``.  Per pair: the median
time of each (over rounds of alternated calls, so load from elsewhere falls on both), the median of
the per-round ratios candidate / baseline (< 1: the candidate is faster), on CUDA the kernels per call
and their device time for each, and whether the two agree (neuron: same spikes and input gradient).
"""
from __future__ import annotations

import statistics
import time
import traceback
from dataclasses import dataclass, field

import torch

from .alternate import alternate
from .kernels import profile_kernels

__all__ = ["PairRow", "run_candidates", "check_candidate", "TRAIN_BATCHES", "MODES"]

TRAIN_BATCHES = (16, 128)
MODES = ("eager", "cuda-graph")
_ROUND_S = 0.02  # a timed round repeats the call until it lasts about this long


@dataclass
class PairRow:
    candidate: str
    case: str
    baseline_ms: float | None = None
    candidate_ms: float | None = None
    ratio: float | None = None  # median over rounds of candidate / baseline
    rounds: int = 0
    agrees: bool | None = None  # neuron: identical spikes, input gradient within 1e-4 relative
    note: str = ""
    extra: dict = field(default_factory=dict)  # kernels and device time of each, % of the copy bound


def check_candidate(c) -> str:
    """Empty when ``c`` has the interface, else what is missing (one line)."""
    wrong = [a for a, t in (("name", str), ("kind", str), ("decides", str)) if not isinstance(getattr(c, a, None), t)]
    if wrong:
        return f"needs str attributes {', '.join(wrong)}"
    if c.kind not in ("neuron", "train"):
        return f"kind {c.kind!r}: must be 'neuron' or 'train'"
    if not callable(getattr(c, "apply", None)):
        return "needs apply() returning a context manager"
    return ""


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _inside(candidate, fn):
    def run():
        with candidate.apply():
            return fn()
    return run


def _side_by_side(base, cand, device, rounds: int) -> dict:
    """Alternate the two calls; times per call in ms and the median per-round ratio."""
    def timed(fn):
        def once():
            fn()
            _sync(device)
        once()  # compiles, allocates
        t0 = time.perf_counter()
        once()
        reps = max(1, min(50, int(_ROUND_S / max(time.perf_counter() - t0, 1e-6))))

        def round_():
            for _ in range(reps):
                fn()
            _sync(device)
        return round_, reps

    (a, na), (b, nb) = timed(base), timed(cand)
    _, wall = alternate({"baseline": a, "candidate": b}, rounds, warmup=0)
    ta = [t / na for t in wall["baseline"]]
    tb = [t / nb for t in wall["candidate"]]
    return {"baseline_ms": statistics.median(ta) * 1e3, "candidate_ms": statistics.median(tb) * 1e3,
            "ratio": statistics.median(y / x for x, y in zip(ta, tb)), "rounds": rounds}


def _kernels(base, cand, device) -> dict:
    kb, kc = profile_kernels(base, device), profile_kernels(cand, device)
    if kb["note"]:
        return {"device_time": kb["note"]}
    return {"baseline_kernels": kb["kernels"], "candidate_kernels": kc["kernels"],
            "baseline_kernel_ms": kb["kernel_ms"], "candidate_kernel_ms": kc["kernel_ms"]}


def _neuron_pairs(c, device, cases, rounds, deadline, log) -> list[PairRow]:
    from ..neurons import PLIF
    from .neuron import CASES, _ideal_bytes, _timer

    rows = []
    for name in getattr(c, "cases", None) or cases:
        if time.monotonic() > deadline:
            rows.append(PairRow(c.name, f"{name} fwd+bwd", note="not run: time budget spent"))
            continue
        gen = torch.Generator().manual_seed(0)
        x = (torch.randn(CASES[name], generator=gen) * 1.5 + 0.6).to(device).requires_grad_(True)
        g = torch.randn(x.shape, generator=gen).to(device)
        layers = {"baseline": PLIF(tau0=2.0).to(device)}
        with c.apply():
            layers["candidate"] = PLIF(tau0=2.0).to(device)

        def fwd_bwd(layer):
            def run():
                s = layer(x)
                return (s, *torch.autograd.grad(s, [x, layer.w], g))
            return run
        base, cand = fwd_bwd(layers["baseline"]), _inside(c, fwd_bwd(layers["candidate"]))
        (s0, gx0, _), (s1, gx1, _) = base(), cand()
        agrees = bool(torch.equal(s0, s1)) and float((gx1 - gx0).norm() / (gx0.norm() + 1e-12)) < 1e-4
        del s0, gx0, s1, gx1
        row = PairRow(c.name, f"{name} fwd+bwd", agrees=agrees, **_side_by_side(base, cand, device, rounds))
        y = torch.empty_like(x)
        copy_s, _ = _timer(device, lambda: y.copy_(x.detach()), 5, 1.0)
        bound_ms = _ideal_bytes(x, "fwd+bwd") / (2 * x.numel() * x.element_size() / copy_s) * 1e3
        row.extra = {"copy_bound_ms": bound_ms, **_kernels(base, cand, device)}
        for who in ("baseline", "candidate"):
            row.extra[f"{who}_pct_of_bound"] = 100 * bound_ms / getattr(row, f"{who}_ms")
            kms = row.extra.get(f"{who}_kernel_ms")
            if kms:
                row.extra[f"{who}_pct_of_bound_device"] = 100 * bound_ms / kms
        log(f"  {c.name} {row.case}: {row.baseline_ms:.3f} -> {row.candidate_ms:.3f} ms (x{row.ratio:.3f}), "
            f"agrees {agrees}")
        rows.append(row)
        del x, g, y
    return rows


def _train_pairs(c, device, batches, T, network, rounds, deadline, log) -> list[PairRow]:
    from ..data.catalog import get_dataset
    from .train import _build_step, _inputs

    entry = get_dataset("fashion-mnist")
    T = T or entry.T
    rows = []
    for mode in getattr(c, "modes", None) or MODES:
        for b in batches:
            case = f"fashion-mnist paper step B{b} {mode}"
            if mode == "cuda-graph" and device.type != "cuda":
                rows.append(PairRow(c.name, case, note="needs CUDA"))
                continue
            if time.monotonic() > deadline:
                rows.append(PairRow(c.name, case, note="not run: time budget spent"))
                continue
            x, xs, y = _inputs(entry, T, b, device)
            variant = "auto" if mode == "eager" else "cuda-graph"
            torch.manual_seed(0)
            base = _build_step(variant, entry, T, x, xs, y, device, network)
            torch.manual_seed(0)
            with c.apply():
                cand = _inside(c, _build_step(variant, entry, T, x, xs, y, device, network))
            row = PairRow(c.name, case, **_side_by_side(base, cand, device, rounds))
            row.extra = _kernels(base, cand, device)
            log(f"  {c.name} {case}: {row.baseline_ms:.2f} -> {row.candidate_ms:.2f} ms (x{row.ratio:.3f})")
            rows.append(row)
            del base, cand
            if device.type == "cuda":
                torch.cuda.empty_cache()
    return rows


def run_candidates(candidates, device, deadline: float, neuron_cases=None, train_batches=TRAIN_BATCHES,
                   T: int | None = None, rounds: int = 10, log=print, train_network: str | None = None) -> list[PairRow]:
    """Measure every candidate against the baseline; each gets an equal share of the time left before
    ``deadline`` (``time.monotonic()``) for those not yet run.  A candidate that fails keeps its error
    in a row and the next one runs.  ``T`` and ``train_network`` (default: the paper's T and network)
    shrink the train step for a CPU dry run."""
    from .neuron import CASES

    device = torch.device(device)
    neuron_cases = list(CASES) if neuron_cases is None else neuron_cases
    rows: list[PairRow] = []
    for i, c in enumerate(candidates):
        name = getattr(c, "name", None) or f"#{i}"
        wrong = check_candidate(c)
        if wrong:
            rows.append(PairRow(str(name), "-", note=f"not a candidate: {wrong}"))
            continue
        own = time.monotonic() + (deadline - time.monotonic()) / (len(candidates) - i)
        log(f"candidate {c.name} ({c.kind}): {c.decides}")
        try:
            if c.kind == "neuron":
                rows += _neuron_pairs(c, device, neuron_cases, rounds, own, log)
            else:
                rows += _train_pairs(c, device, train_batches, T, train_network, rounds, own, log)
        except Exception as e:  # noqa: BLE001  (one broken candidate must not lose the others' numbers)
            rows.append(PairRow(c.name, "-", note=f"failed: {type(e).__name__}: {e}",
                                extra={"traceback": traceback.format_exc()[-2000:]}))
            log(f"  {c.name} failed: {type(e).__name__}: {e}")
    return rows
