"""``plif bench memory``: peak memory and time of one training step, per memory configuration.

One step (:func:`plif.train.loop.train_step`, the step of ``plif train``) of a zoo network on
random event frames ``[T, B, C, H, W]`` at batch ``B``.  Each (network, configuration, batch) runs
in a fresh Python process, so the number is that process's peak resident set (``ru_maxrss``): the
interpreter, torch, the weights and Adam's state included, nothing left over from another
configuration.  On CUDA the worker reports ``torch.cuda.max_memory_allocated`` instead.

The headline is the *live* peak: the worker runs with glibc's ``MALLOC_MMAP_THRESHOLD_`` fixed at
128 KB, so every tensor above it is mapped on allocation and unmapped when freed and the resident
set follows the live tensors (peaks repeat within ~20 MB).  With glibc's default, dynamic
threshold freed memory stays resident in amounts that depend on allocation order (the same
SpikingJelly worker read 4.4 to 7.0 GB across runs); that figure is measured in a second process
and shown beside the live one, as what a plain ``python train.py`` would see, not as the cost.

Configurations:

naive          every neuron through the autograd reference loop; plain PyTorch layers
spikingjelly   the same network built from SpikingJelly 2.0 layers (:mod:`plif.bench.twin`;
               multi-step, the neuron implementation SpikingJelly picks itself, named in the
               row's ``note``), when SpikingJelly is installed
default        plif as it trains by default (``--memory fused``: each conv block's BatchNorm, neuron and
               max-pool as one fused step keeping the conv's output)
none           ``--memory none``: the composed layers, each neuron fused on its own saving ``H``
spikes         the composed layers with one-byte spikes and two-byte pool offsets (no recomputation)
exact          ``--memory exact``: the fused blocks with each conv's output recomputed in backward
low            ``--memory low``: exact + the first block run in chunks of time-steps, replayed in backward
all            ``--memory all``: low + bf16 ``H``
all+checkpoint ``--memory all --checkpoint-blocks``

The largest batch that fits a memory budget is *derived* from two measured batches: the peak
grows linearly with the batch, ``peak(B) = a + b·B``, so ``B_max = floor((budget - a) / b)``.
"""
from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from dataclasses import asdict, dataclass

__all__ = ["CONFIGS", "MemoryResult", "measure", "bench_memory", "fit_batches", "format_memory_table", "config_memory"]

CONFIGS = ("naive", "spikingjelly", "default", "none", "spikes", "exact", "low", "all", "all+checkpoint")


@dataclass
class MemoryResult:
    network: str
    config: str
    batch: int
    T: int
    peak_mb: float
    base_mb: float  # resident before the first step: interpreter, torch, weights, input batch
    step_s: float  # fastest of the timed steps
    error: str | None = None
    rss_default_mb: float | None = None  # peak RSS of a second worker with glibc's default allocator
    note: str = ""  # e.g. which neuron implementation SpikingJelly ran


LIVE_MMAP_THRESHOLD = 131072  # bytes: blocks above it are unmapped when freed, so RSS follows live tensors


def _rss_mb() -> float:
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def _current_rss_mb() -> float:
    with open("/proc/self/statm") as f:
        import os
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def config_memory(config: str):
    """The :class:`plif.models.MemoryOptions` a configuration's plif network trains with: ``naive``
    the composed layers (with the reference neuron), ``default`` the training default, a preset its
    own; SpikingJelly's twin is built from the default network's layers."""
    from ..models import MEMORY_PRESETS, MemoryOptions
    from ..models.memory import DEFAULT_MEMORY

    if config == "naive":
        return MemoryOptions()
    return MEMORY_PRESETS[config] if config in MEMORY_PRESETS else MEMORY_PRESETS[DEFAULT_MEMORY]


def worker(network: str, config: str, batch: int, T: int, steps: int, device: str) -> MemoryResult:
    """One configuration in this process (call it in a fresh one: the peak is per process)."""
    import torch

    from ..catalog import get_dataset
    from ..models import build_zoo
    from ..train.loop import train_step
    from ..train.optim import adam

    if config not in CONFIGS:
        raise ValueError(f"unknown configuration {config!r}; valid: {', '.join(CONFIGS)}")
    dev = torch.device(device)
    entry = get_dataset(network)
    torch.manual_seed(0)
    backend = "reference" if config == "naive" else "auto"
    net = build_zoo(network, T=T, backend=backend).set_memory(config_memory(config))
    model, reset, note = net, None, ""
    if config == "spikingjelly":
        from .spikingjelly import spikingjelly_path
        from .twin import spikingjelly_twin
        model, reset = spikingjelly_twin(net, device)
        note = f"SpikingJelly neuron: {spikingjelly_path(dev)}"
    model = model.to(dev).train()
    opt = adam(model.parameters(), 1e-3)
    # event frames: spike counts of a sparse sensor, the input the DVS networks see
    x = torch.poisson(torch.full((T, batch, *entry.input_shape), 0.3), generator=torch.Generator().manual_seed(0)).to(dev)
    y = torch.randint(0, entry.num_classes, (batch,), generator=torch.Generator().manual_seed(1)).to(dev)
    base = torch.cuda.memory_allocated(dev) / 2**20 if dev.type == "cuda" else _current_rss_mb()
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    params = list(model.parameters())
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        train_step(model, opt, x, y, entry.num_classes, params)  # the step of plif train
        if reset is not None:
            reset(model)
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        times.append(time.perf_counter() - t0)
    peak = torch.cuda.max_memory_allocated(dev) / 2**20 if dev.type == "cuda" else _rss_mb()
    return MemoryResult(network, config, batch, T, peak, base, min(times[1:] or times), note=note)


def measure(network: str, config: str, batch: int, T: int = 20, steps: int = 3, device: str = "cpu",
            threads: int | None = None, timeout: float = 1800, mmap_threshold: int | None = None) -> MemoryResult:
    """Run :func:`worker` in a fresh interpreter and return what it measured.

    ``mmap_threshold`` (bytes) fixes glibc's ``MALLOC_MMAP_THRESHOLD_`` in the worker: blocks above it
    are mapped and unmapped one by one, so freed tensors leave the resident set at once and the peak
    RSS follows the live tensors (by default glibc raises the threshold up to 32 MB as blocks are
    freed and keeps freed heap memory, which makes the peak depend on allocation order)."""
    import os

    env = dict(os.environ)
    if mmap_threshold is not None:
        env["MALLOC_MMAP_THRESHOLD_"] = str(int(mmap_threshold))
    code = ("import json, sys, torch\n"
            + (f"torch.set_num_threads({int(threads)})\n" if threads else "")
            + "from dataclasses import asdict\nfrom plif.bench.memory import worker\n"
            + f"r = worker({network!r}, {config!r}, {int(batch)}, {int(T)}, {int(steps)}, {device!r})\n"
            + "print('RESULT ' + json.dumps(asdict(r)))\n")
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return MemoryResult(network, config, batch, T, math.nan, math.nan, math.nan,
                            error=f"timed out after {timeout:.0f} s")
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return MemoryResult(**json.loads(line[7:]))
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return MemoryResult(network, config, batch, T, math.nan, math.nan, math.nan, error=tail)


def fit_batches(results: list[MemoryResult], budget_mb: float) -> dict[tuple[str, str], dict]:
    """Per (network, config): the per-sample slope and intercept of the peak between the smallest
    and largest measured batch, and the largest batch that fits ``budget_mb`` (derived)."""
    out = {}
    keys = {(r.network, r.config) for r in results}
    for key in sorted(keys):
        rows = sorted((r for r in results if (r.network, r.config) == key and r.error is None), key=lambda r: r.batch)
        if len(rows) < 2 or rows[0].batch == rows[-1].batch:
            continue
        lo, hi = rows[0], rows[-1]
        slope = (hi.peak_mb - lo.peak_mb) / (hi.batch - lo.batch)
        intercept = lo.peak_mb - slope * lo.batch
        fits = math.floor((budget_mb - intercept) / slope) if slope > 0 else None
        if fits is not None and fits < 0:  # not even the intercept fits the budget
            fits = 0
        out[key] = {"mb_per_sample": slope, "intercept_mb": intercept, "max_batch": fits}
    return out


def bench_memory(networks=("dvs128-gesture", "cifar10-dvs"), configs=CONFIGS, batches=(1, 2), T: int = 20,
                 steps: int = 3, device: str = "cpu", threads: int | None = None, log=print,
                 mmap_threshold: int | None = LIVE_MMAP_THRESHOLD, default_rss: bool = True,
                 timeout: float = 1800, deadline: float | None = None) -> list[MemoryResult]:
    """Measure every (network, configuration, batch), each in its own process: the peak with
    ``mmap_threshold`` (default: the live peak) and, with ``default_rss`` on the CPU, the peak RSS of
    a second process under glibc's default allocator.

    Each process gets at most ``timeout`` seconds; with a ``deadline`` (``time.monotonic()``) each
    gets an equal share of the time left for those not yet run, so a slow one cannot take the
    others' time (one that ends early leaves its share to the rest)."""
    results = []
    plan = [(n, c, b) for n in networks for c in configs for b in batches]
    for i, (network, config, b) in enumerate(plan):
        limit = timeout if deadline is None else min(timeout, (deadline - time.monotonic()) / (len(plan) - i))
        if limit < 1:
            r = MemoryResult(network, config, b, T, math.nan, math.nan, math.nan, error="not run: time budget spent")
        else:
            r = measure(network, config, b, T, steps, device, threads, timeout=limit, mmap_threshold=mmap_threshold)
            if default_rss and device == "cpu" and mmap_threshold is not None and r.error is None:
                d = measure(network, config, b, T, steps, device, threads, timeout=timeout)
                r.rss_default_mb = d.peak_mb if d.error is None else None
        beside = f" (default allocator {r.rss_default_mb:8.0f} MB)" if r.rss_default_mb is not None else ""
        log(f"  {network:15s} {config:15s} B={b}: "
            + (f"peak {r.peak_mb:8.0f} MB{beside}, step {r.step_s:6.2f} s" if r.error is None
               else f"failed: {r.error}") + (f"  [{r.note}]" if r.note else ""))
        results.append(r)
    return results


def format_memory_table(results: list[MemoryResult], budget_mb: float) -> str:
    """Markdown: peak per batch, per-sample slope, derived largest batch, step time and ratios; the
    rows' notes (SpikingJelly's implementation) as last lines."""
    fits = fit_batches(results, budget_mb)
    batches = sorted({r.batch for r in results})
    head = (["network", "configuration"] + [f"peak B={b} (MB)" for b in batches]
            + [f"default-allocator RSS B={batches[-1]} (MB)", "MB/sample",
               f"max B in {budget_mb / 1024:.0f} GiB (derived)", f"step B={batches[-1]} (s)",
               "peak vs naive", "step vs default"])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    by = {(r.network, r.config, r.batch): r for r in results}
    for network in dict.fromkeys(r.network for r in results):
        for config in dict.fromkeys(r.config for r in results if r.network == network):
            cells = [network, config]
            for b in batches:
                r = by.get((network, config, b))
                cells.append("-" if r is None or r.error else f"{r.peak_mb:,.0f}")
            last = by.get((network, config, batches[-1]))
            rss = last.rss_default_mb if last is not None and last.error is None else None
            cells.append(f"{rss:,.0f}" if rss is not None else "-")
            f = fits.get((network, config))
            cells += [f"{f['mb_per_sample']:,.0f}" if f else "-", str(f["max_batch"]) if f and f["max_batch"] else "-"]
            naive = by.get((network, "naive", batches[-1]))
            default = by.get((network, "default", batches[-1]))
            ok = last is not None and last.error is None
            cells.append(f"{last.step_s:.2f}" if ok else "-")
            cells.append(f"{last.peak_mb / naive.peak_mb:.2f}" if ok and naive and not naive.error else "-")
            cells.append(f"{last.step_s / default.step_s:.2f}" if ok and default and not default.error else "-")
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines + sorted({r.note for r in results if r.note and r.error is None}))


def write_results(path: str, results: list[MemoryResult], meta: dict) -> None:
    from ..atomic import atomic_write_text
    atomic_write_text(path, json.dumps({"meta": meta, "rows": [asdict(r) for r in results]}, indent=1))
