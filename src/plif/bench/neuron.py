"""Time one PLIF layer (forward, and forward + backward) on every backend, against a copy bound.

For each case every backend runs the paper's neuron (PLIF, one learnable τ per layer, ATan,
hard reset, detached reset) with the gradient of ``x`` and ``w`` requested.  Reported per row:

- time: median over repetitions (CUDA events synchronised, or wall clock on the CPU);
- effective GB/s: the bytes an ideal fused pass must move divided by the time: forward reads
  X and writes S and H, backward reads ∂L/∂S and H and writes ∂L/∂X (H counted as fp32), so
  forward + backward is 6 X-sized transfers, three copies' worth of traffic in fp32;
- % of copy bound: that ideal traffic at the speed of a measured ``y.copy_(x)``, over the time;
  above 100% the copy was timed slower than the pass (another job's load), and the row says so;
- speed-ups over the naive PyTorch loop (``reference``) and over SpikingJelly when importable;
- on CUDA, the kernels' own device time per call (``torch.profiler``: the sum of their durations, no
  host time) with its % of the copy bound, and the number of kernels one call launches.  At small
  shapes the eager call is host-bound, so the two percentages differ: the first is what a user's
  call costs, the second what the kernels leave on the table.  The CPU rows say "needs CUDA".

SpikingJelly picks its own neuron implementation per call; the table's last line names it.

A backend whose working set would not fit in the free memory is reported as skipped.
"""
from __future__ import annotations

import json
import math
import os
import platform
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import torch

from ..atomic import atomic_write_text
from ..device import free_memory
from ..neurons.dispatch import available_backends, multi_step, select_backend
from ..neurons.functional import NeuronConfig
from .kernels import profile_kernels
from .spikingjelly import INSTALL_HINT, spikingjelly_path, spikingjelly_unavailable

__all__ = ["CASES", "BenchRow", "run_neuron_bench", "default_backends", "format_table", "write_json",
           "write_json_data", "machine_description"]

# name -> [T, B, ...]
CASES: dict[str, tuple] = {
    "T8-B16-C128-28x28": (8, 16, 128, 28, 28),
    "T20-B16-C128-128x128": (20, 16, 128, 128, 128),
    "FC-T8-B64-N2048": (8, 64, 2048),
}
PASSES = ("fwd", "fwd+bwd")
SPIKINGJELLY = "spikingjelly"
# peak memory of forward + backward in multiples of X's bytes (saved tensors, outputs, gradients)
_MEMORY_FACTOR = {"reference": 12, "bptt": 7, SPIKINGJELLY: 12}
_DEFAULT_FACTOR = 6
# leave the rest to other processes: an OOM kill on a shared machine may hit someone else
_MEMORY_FRACTION = 0.6


@dataclass
class BenchRow:
    case: str
    backend: str
    pass_: str
    time_ms: float | None = None
    gb_per_s: float | None = None
    pct_copy_bound: float | None = None
    vs_naive: float | None = None
    vs_spikingjelly: float | None = None
    reps: int = 0
    note: str = ""
    extra: dict = field(default_factory=dict)
    device_ms: float | None = None  # kernels' summed device time per call (CUDA only)
    pct_device_bound: float | None = None  # the ideal traffic at copy speed over ``device_ms``
    kernels: float | None = None  # kernels launched per call (CUDA only)


NOISE = "above the copy bound: the copy was timed under load, not a real speed"


def bound_note(*pcts: float | None) -> str:
    """A row whose % of the copy bound exceeds 100 measured noise (the copy timed slow), not speed."""
    return NOISE if any(p is not None and p > 100 for p in pcts) else ""


def machine_description(device: torch.device) -> str:
    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)} (torch {torch.__version__})"
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} logical CPUs, {torch.get_num_threads()} torch threads (torch {torch.__version__})"


def _timer(device: torch.device, fn: Callable[[], object], reps: int, budget_s: float) -> tuple[float, int]:
    """Median seconds of ``fn`` after one warm-up call; fewer reps when a call is slow."""
    def once():
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1e3
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0

    first = once()
    n = max(1, min(reps, int(budget_s / max(first, 1e-6))))
    return statistics.median(once() for _ in range(n)), n


def _spikingjelly_runner(cfg: NeuronConfig, device):
    """A multi-step SpikingJelly PLIF node with the same settings (check :func:`spikingjelly_unavailable` first)."""
    from spikingjelly.activation_based import neuron, surrogate

    node = neuron.ParametricLIFNode(init_tau=2.0, v_threshold=cfg.v_threshold, v_reset=cfg.v_reset,
                                    surrogate_function=surrogate.ATan(alpha=cfg.alpha),
                                    detach_reset=cfg.detach_reset, step_mode="m").to(device)

    def run(x):
        node.reset()
        return node(x), node.w

    return run


def _plif_runner(backend: str, cfg: NeuronConfig, device):
    w = torch.zeros((), device=device, requires_grad=True)  # τ0 = 2

    def run(x):
        s, _ = multi_step(x, torch.sigmoid(w).to(x.dtype), None, cfg, backend)
        return s, w

    return run


def _measure(run, x, g, passes, device, reps, budget_s) -> dict[str, tuple[float, int, dict]]:
    """Per pass: (median seconds, repetitions, :func:`profile_kernels` of one call)."""
    def fwd():
        run(x)

    def fwd_bwd():
        s, w = run(x)
        torch.autograd.grad(s, [x, w], g)

    fns = {"fwd": fwd, "fwd+bwd": fwd_bwd}
    # a training loop alternates both passes; warming both first keeps the allocator's state
    # (which decides how many fresh pages each pass faults in) independent of the order measured
    fwd_bwd()
    return {p: (*_timer(device, fns[p], reps, budget_s), profile_kernels(fns[p], device)) for p in passes}


def _ideal_bytes(x: torch.Tensor, pass_: str) -> int:
    one_way = x.numel() * (2 * x.element_size() + 4)  # read X + write S, + H in fp32 (forward)
    return one_way if pass_ == "fwd" else 2 * one_way


def default_backends(device: torch.device) -> list[str]:
    """The fused backend ``auto`` picks on this device (if any), then ``bptt``, ``reference`` and SpikingJelly."""
    chosen = select_backend(torch.zeros(1, 1, device=device), NeuronConfig())
    return ([chosen] if chosen not in ("bptt", "reference") else []) + ["bptt", "reference", SPIKINGJELLY]


def run_neuron_bench(cases: list[str] | None = None, backends: list[str] | None = None,
                     device: str | torch.device | None = None, dtype: torch.dtype = torch.float32,
                     passes=PASSES, reps: int = 10, budget_s: float = 10.0, log=print,
                     deadline: float | None = None) -> list[BenchRow]:
    """Benchmark the listed cases (default all of :data:`CASES`) and backends; returns one row per
    (case, backend, pass).  ``budget_s`` caps the time spent on one measurement; past ``deadline``
    (``time.monotonic()``) the remaining (case, backend) pairs are reported as not run."""
    from ..device import pick_device

    device = pick_device(device) if isinstance(device, (str, type(None))) else device
    cases = list(CASES) if cases is None else cases
    backends = default_backends(device) if backends is None else backends
    for name in cases:
        if name not in CASES:
            raise ValueError(f"unknown case {name!r}; valid: {', '.join(CASES)}")
    for b in backends:
        if b != SPIKINGJELLY and b not in available_backends():
            raise ValueError(f"unknown backend {b!r}; valid: {', '.join(available_backends() + [SPIKINGJELLY])}")
    sj_missing = spikingjelly_unavailable() if SPIKINGJELLY in backends else None
    if sj_missing:
        log(f"SpikingJelly unavailable: {sj_missing} ({INSTALL_HINT})")
    sj_path = spikingjelly_path(device) if SPIKINGJELLY in backends and not sj_missing else None
    cfg = NeuronConfig()
    rows: list[BenchRow] = []
    for name in cases:
        if deadline is not None and time.monotonic() > deadline:
            rows += [BenchRow(name, b, p, note="not run: time budget spent") for b in backends for p in passes]
            continue
        x_bytes = math.prod(CASES[name]) * torch.empty((), dtype=dtype).element_size()
        if 3 * x_bytes > _MEMORY_FRACTION * free_memory(device):  # X, its gradient and the copy target
            rows += [BenchRow(name, b, p, note=f"skipped: needs > {3 * x_bytes / 1e9:.0f} GB") for b in backends for p in passes]
            log(f"{name}: skipped, not enough free memory for X ({x_bytes / 1e9:.1f} GB) three times")
            continue
        gen = torch.Generator(device="cpu").manual_seed(0)
        x = torch.randn(CASES[name], generator=gen).mul_(1.5).add_(0.6).to(device=device, dtype=dtype).requires_grad_(True)
        g = torch.randn(x.shape, generator=gen).to(device=device, dtype=dtype)
        y = torch.empty_like(x)
        copy_s, _ = _timer(device, lambda: y.copy_(x.detach()), reps, budget_s)
        del y
        copy_bw = 2 * x.numel() * x.element_size() / copy_s
        log(f"{name}: X = {x.numel() * x.element_size() / 1e9:.2f} GB, copy {copy_s * 1e3:.2f} ms ({copy_bw / 1e9:.1f} GB/s)")
        case_rows = []
        for b in backends:
            if b == SPIKINGJELLY and sj_missing:
                case_rows += [BenchRow(name, b, p, note=f"unavailable: {sj_missing}") for p in passes]
                continue
            if deadline is not None and time.monotonic() > deadline:
                case_rows += [BenchRow(name, b, p, note="not run: time budget spent") for p in passes]
                continue
            run = _spikingjelly_runner(cfg, device) if b == SPIKINGJELLY else _plif_runner(b, cfg, device)
            need = _MEMORY_FACTOR.get(b, _DEFAULT_FACTOR) * x.numel() * x.element_size()
            if need > _MEMORY_FRACTION * free_memory(device):
                for p in passes:
                    case_rows.append(BenchRow(name, b, p, note=f"skipped: needs ~{need / 1e9:.0f} GB"))
                log(f"  {b}: skipped (needs ~{need / 1e9:.0f} GB)")
                continue
            timings = _measure(run, x, g, passes, device, reps, budget_s)
            for p, (t, n, k) in timings.items():
                ideal = _ideal_bytes(x, p)
                dev_s = k["kernel_ms"] / 1e3 if k["kernel_ms"] else None
                extra = {"copy_ms": copy_s * 1e3, "ideal_bytes": ideal}
                if k["note"]:
                    extra["device_time"] = k["note"]
                if b == SPIKINGJELLY:
                    extra["spikingjelly_path"] = sj_path
                if k["top"]:
                    extra["top_kernels"] = k["top"]
                row = BenchRow(name, b, p, t * 1e3, ideal / t / 1e9, 100 * (ideal / copy_bw) / t, reps=n, extra=extra,
                               device_ms=k["kernel_ms"], kernels=k["kernels"],
                               pct_device_bound=100 * (ideal / copy_bw) / dev_s if dev_s else None)
                row.note = bound_note(row.pct_copy_bound, row.pct_device_bound)
                case_rows.append(row)
                log(f"  {b:>12} {p:>8}: {t * 1e3:10.2f} ms" + (f", kernels {k['kernel_ms']:.3f} ms device "
                                                                f"({k['kernels']:.0f} launched)" if dev_s else ""))
        for base, attr in (("reference", "vs_naive"), (SPIKINGJELLY, "vs_spikingjelly")):
            ref = {r.pass_: r.time_ms for r in case_rows if r.backend == base and r.time_ms}
            for r in case_rows:
                if r.time_ms and r.pass_ in ref:
                    setattr(r, attr, ref[r.pass_] / r.time_ms)
        rows += case_rows
        del x, g
    return rows


def _fmt(v, spec):
    return "—" if v is None else format(v, spec)


def _pct(v):
    return "—" if v is None else f"{v:.0f}" + (" (noise)" if v > 100 else "")


def format_table(rows: list[BenchRow]) -> str:
    """A Markdown table: one line per (case, backend, pass); on CUDA also the kernels' device time,
    its % of the bound and the kernels per call; a last line names SpikingJelly's implementation."""
    device = any(r.device_ms is not None for r in rows)
    head = "| case | backend | pass | time (ms) | eff. GB/s | % of copy bound | vs naive loop | vs SpikingJelly |"
    if device:
        head += " device ms (kernels) | % of bound (device) | kernels per call |"
    lines = [head, "|" + "---|" * (11 if device else 8)]
    for r in rows:
        time_ms = r.note if r.time_ms is None else f"{r.time_ms:.2f}"
        line = (f"| {r.case} | {r.backend} | {r.pass_} | {time_ms} | {_fmt(r.gb_per_s, '.1f')} | "
                f"{_pct(r.pct_copy_bound)} | {_fmt(r.vs_naive, '.2f') + ('×' if r.vs_naive else '')} | "
                f"{_fmt(r.vs_spikingjelly, '.2f') + ('×' if r.vs_spikingjelly else '')} |")
        if device:
            line += f" {_fmt(r.device_ms, '.3f')} | {_pct(r.pct_device_bound)} | {_fmt(r.kernels, '.0f')} |"
        lines.append(line)
    paths = {r.extra["spikingjelly_path"] for r in rows if r.extra.get("spikingjelly_path")}
    if paths:
        lines.append("")
        lines.append("SpikingJelly's neuron ran as: " + "; ".join(sorted(paths)))
    if any(r.note == NOISE for r in rows):
        lines.append("")
        lines.append("(noise): " + NOISE + "; rerun on a quiet machine")
    return "\n".join(lines)


def write_json(path: str | Path, rows: list[BenchRow], meta: dict) -> None:
    """Write ``{"meta": ..., "rows": [...]}`` for a neuron benchmark run."""
    out = []
    for r in rows:
        d = asdict(r)
        d["pass"] = d.pop("pass_")
        out.append(d)
    write_json_data(path, {"meta": meta, "rows": out})


def write_json_data(path: str | Path, data: dict) -> None:
    """Write ``data`` as JSON atomically."""
    atomic_write_text(path, json.dumps(data, indent=1))
