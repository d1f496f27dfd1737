"""Training-step benchmark: the paper's network, forward + backward + Adam, per backend.

Variants measured in one process so ratios are fair:

- ``naive``: every neuron through the autograd reference loop and the composed PyTorch layers (what a
  plain PyTorch SNN does);
- ``bptt``: the closed-form backward in PyTorch, composed layers;
- ``auto``: plif as it trains by default: each conv block's BatchNorm, neuron and max-pool as one fused
  step (``--memory fused``), the fastest neuron backend for the device elsewhere;
- ``auto+none``: ``auto`` with ``--memory none``: the composed layers, each neuron fused on its own (plif
  before the fused block);
- ``auto+bf16``: ``auto`` under bf16 autocast (``plif train --amp bf16``; CPU or CUDA);
- ``auto+graph`` (CUDA only): the whole step captured in one CUDA graph and replayed;
- ``compile``: the ``auto`` network under ``torch.compile`` (Inductor; the fused kernels are custom ops);
- ``cuda-graph`` / ``cuda-graph+bf16`` (CUDA only): the step of ``plif train --cuda-graph``
  (:class:`plif.train.graph.GraphTrainer`: device-side totals, lr tensor), fp32 or bf16 autocast;
- ``spikingjelly``: the same network (the zoo's, rebuilt by :func:`plif.bench.twin.spikingjelly_twin`) in
  SpikingJelly 2.0 (multi-step; its neuron implementation is its own automatic choice, named in the
  row's note), when installed;
- ``spikingjelly+graph`` (CUDA only): that step captured in one CUDA graph, as ``auto+graph`` does for
  plif (SpikingJelly's documentation: a CUDA graph keeps the implementation chosen before capture).

Static datasets feed one random image batch ``[B, C, H, W]`` (the network repeats it over T); event
datasets feed synthetic event frames ``[T, B, 2, H, W]`` (Poisson counts, mean 0.3 per pixel), not
recordings: the step's cost does not depend on the values.  On CUDA each row also gets the kernels
one step launches and their summed device time (:func:`plif.bench.kernels.profile_kernels`).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from ..models import MemoryOptions, build_network, get_entry
from ..train.graph import autocast_context, capture_cuda_graph
from ..train.loop import train_step
from ..train.malloc import keep_freed_memory
from ..train.optim import adam
from .kernels import profile_kernels
from .spikingjelly import INSTALL_HINT, spikingjelly_path, spikingjelly_unavailable
from .twin import spikingjelly_twin

__all__ = ["TrainBenchResult", "bench_train", "format_train_table", "VARIANTS", "CUDA_ONLY"]

VARIANTS = ("naive", "bptt", "auto", "auto+none", "auto+bf16", "auto+graph", "compile", "compile+graph", "cuda-graph", "cuda-graph+bf16",
            "spikingjelly", "spikingjelly+graph")
# compile+graph: Inductor's fused network (BN, neuron and pooling around the custom ops) inside one
# captured step with the capturable Adam: whether fusing the per-layer kernels is the lever at B16
CUDA_ONLY = ("auto+graph", "compile+graph", "cuda-graph", "cuda-graph+bf16", "spikingjelly+graph")


@dataclass
class TrainBenchResult:
    variant: str
    batch: int
    ms_per_step: float | None  # None: not measured (``note`` says why)
    samples_per_s: float | None
    ratio_to_naive: float | None = None
    ratio_to_spikingjelly: float | None = None
    peak_mem_mb: float | None = None
    note: str = ""
    kernels: float | None = None  # kernels one step launches (CUDA; None elsewhere)
    kernel_ms: float | None = None  # their summed device time per step


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _time(step, device, warmup: int, iters: int) -> float:
    for _ in range(warmup):
        step()
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(iters):
        step()
    _sync(device)
    return (time.perf_counter() - t0) / iters


def _step_fn(net, x, y, classes, capturable=False, after=None, amp=None):
    """``plif train``'s step (:func:`plif.train.loop.train_step`, finiteness flag included) on one
    batch; ``after(net)`` runs after it (SpikingJelly's state reset); ``amp``: ``--amp``'s value."""
    opt = adam(net.parameters(), 1e-3, capturable=capturable)
    params = list(net.parameters())
    autocast = None if amp is None else (lambda: autocast_context(x.device, amp))

    def step():
        train_step(net, opt, x, y, classes, params, set_to_none=not capturable, autocast=autocast)
        if after is not None:
            after(net)
    return step


def _inputs(entry, T: int, b: int, dev):
    """``(x for plif, x for SpikingJelly, y)``: a static batch (SpikingJelly gets it repeated T times) or
    synthetic event frames ``[T, B, C, H, W]`` for both."""
    gen = torch.Generator().manual_seed(0)
    y = torch.randint(0, entry.num_classes, (b,), generator=gen).to(dev)
    if entry.kind == "event":
        x = torch.poisson(torch.full((T, b, *entry.input_shape), 0.3), generator=gen).to(dev)
        return x, x, y
    x = torch.randn(b, *entry.input_shape, generator=gen).to(dev)
    return x, x.unsqueeze(0).repeat(T, *([1] * x.dim())), y


def _build_step(v: str, entry, T: int, x, xs, y, dev, network: str | None = None):
    """The step of variant ``v`` (a fresh network and optimiser) on ``network`` (default: the paper's)."""
    network = network or entry.network
    if v.startswith("spikingjelly"):
        sj, reset_net = spikingjelly_twin(build_network(network, entry.input_shape, T), str(dev))
        graph = v.endswith("graph")
        step = _step_fn(sj.to(dev), xs, y, entry.num_classes, capturable=graph, after=reset_net)
        return capture_cuda_graph(step, dev) if graph else step
    if v.startswith("cuda-graph"):
        from ..train.graph import GraphTrainer
        from ..train.optim import graph_adam

        net = build_network(network, entry.input_shape, T).to(dev)
        trainer = GraphTrainer(net, graph_adam(net.parameters(), 1e-3, dev), entry.num_classes, dev,
                               amp="bf16" if v.endswith("bf16") else None)
        net.train()
        return lambda: trainer.train_step(x, y)
    backend = {"naive": "reference", "bptt": "bptt"}.get(v, "auto")
    composed = v in ("naive", "bptt", "auto+none")  # the composed layers (--memory none)
    net = build_network(network, entry.input_shape, T, backend=backend,
                        memory=MemoryOptions() if composed else None).to(dev)
    step = _step_fn(torch.compile(net) if v.startswith("compile") else net, x, y, entry.num_classes,
                    capturable=v.endswith("graph"), amp="bf16" if v.endswith("bf16") else None)
    return capture_cuda_graph(step, dev) if v.endswith("graph") else step


def bench_train(dataset: str = "fashion-mnist", batches=(16,), device: str = "cpu", variants=None,
                warmup: int = 2, iters: int = 5, T: int | None = None, kernels: bool = True,
                deadline: float | None = None) -> list[TrainBenchResult]:
    """Time one training step of the paper's network for ``dataset`` at each batch size; with
    ``kernels`` (CUDA) also count the kernels of one step.  Past ``deadline`` (``time.monotonic()``)
    the remaining rows say "not run"."""
    dev = torch.device(device)
    entry = get_entry(dataset)
    T = T or entry.T
    if variants is None:
        variants = ["naive", "bptt", "auto+none", "auto"] + (["auto+graph"] if dev.type == "cuda" else []) + ["spikingjelly"]
    for v in variants:
        if v not in VARIANTS:
            raise ValueError(f"unknown variant {v!r}; valid: {', '.join(VARIANTS)}")
        if v in CUDA_ONLY and dev.type != "cuda":
            raise ValueError(f"variant {v!r} needs a CUDA device, got {dev}")
    wants_sj = any(v.startswith("spikingjelly") for v in variants)
    sj_missing = spikingjelly_unavailable() if wants_sj else None
    sj_note = f"SpikingJelly neuron: {spikingjelly_path(dev)}" if wants_sj and not sj_missing else ""
    if dev.type == "cpu":
        keep_freed_memory()  # as plif train does on the CPU
    results = []
    for b in batches:
        x, xs, y = _inputs(entry, T, b, dev)
        for v in variants:
            torch.manual_seed(0)
            if v.startswith("spikingjelly") and sj_missing:
                results.append(TrainBenchResult(v, b, None, None, note=f"unavailable: {sj_missing} ({INSTALL_HINT})"))
                continue
            if deadline is not None and time.monotonic() > deadline:
                results.append(TrainBenchResult(v, b, None, None, note="not run: time budget spent"))
                continue
            if dev.type == "cuda":
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats(dev)
            step = _build_step(v, entry, T, x, xs, y, dev)
            sec = _time(step, dev, warmup, iters)
            mem = torch.cuda.max_memory_allocated(dev) / 2**20 if dev.type == "cuda" else None
            k = profile_kernels(step, dev, calls=2) if kernels else {"kernels": None, "kernel_ms": None}
            results.append(TrainBenchResult(v, b, sec * 1e3, b / sec, peak_mem_mb=mem, kernels=k["kernels"],
                                            kernel_ms=k["kernel_ms"],
                                            note=sj_note if v.startswith("spikingjelly") else ""))
            del step
    return fill_ratios(results)


def fill_ratios(results: list[TrainBenchResult]) -> list[TrainBenchResult]:
    """Set each row's speed-up over the naive network and SpikingJelly at the same batch size."""
    for r in results:
        same = {o.variant: o.ms_per_step for o in results if o.batch == r.batch and o.ms_per_step}
        if r.ms_per_step:
            r.ratio_to_naive = same["naive"] / r.ms_per_step if "naive" in same else None
            r.ratio_to_spikingjelly = same["spikingjelly"] / r.ms_per_step if "spikingjelly" in same else None
    return results


def format_train_table(results: list[TrainBenchResult], title: str) -> str:
    """One line per (variant, batch); kernel columns where a row has them (CUDA); the SpikingJelly
    rows' implementation as a last line."""
    kernels = any(r.kernels is not None for r in results)
    head = f"{'variant':18s} {'batch':>5s} {'ms/step':>9s} {'samples/s':>10s} {'x naive':>8s} {'x SJ':>6s} {'peak MB':>8s}"
    head += f" {'kernels':>8s} {'kernel ms':>9s}" if kernels else ""
    lines = [title, head, "-" * len(head)]
    for r in results:
        f = lambda v, fmt: format(v, fmt) if v is not None else "-"  # noqa: E731
        if r.ms_per_step is None:
            lines.append(f"{r.variant:18s} {r.batch:5d} {r.note}")
            continue
        lines.append(f"{r.variant:18s} {r.batch:5d} {r.ms_per_step:9.2f} {r.samples_per_s:10.0f} "
                     f"{f(r.ratio_to_naive, '8.2f'):>8s} {f(r.ratio_to_spikingjelly, '6.2f'):>6s} {f(r.peak_mem_mb, '8.0f'):>8s}"
                     + (f" {f(r.kernels, '8.0f'):>8s} {f(r.kernel_ms, '9.2f'):>9s}" if kernels else ""))
    notes = sorted({r.note for r in results if r.ms_per_step is not None and r.note})
    return "\n".join(lines + notes)
