"""Training-step benchmark: the paper's network, forward + backward + Adam, per backend.

Variants measured in one process so ratios are fair:

- ``naive``: every neuron through the autograd reference loop and the composed PyTorch layers (what a
  plain PyTorch SNN does);
- ``bptt``: the closed-form backward in PyTorch, composed layers;
- ``auto``: plif as it trains by default: each conv block's BatchNorm, neuron and max-pool as one fused
  step (``--memory fused``), the fastest neuron backend for the device elsewhere;
- ``auto+none``: ``auto`` with ``--memory none``: the composed layers, each neuron fused on its own (plif
  before the fused block);
- ``auto+bf16``: ``auto`` under bf16 autocast (``plif train --amp bf16``; CPU or CUDA); with
  ``spikingjelly+bf16`` among the default rows where the device runs bf16 natively
  (:func:`default_variants`), its "x SJ" against SpikingJelly's bf16 row;
- ``auto+graph`` (CUDA only): the whole step captured in one CUDA graph and replayed;
- ``compile``: the ``auto`` network under ``torch.compile`` (Inductor; the fused kernels are custom ops);
- ``cuda-graph`` / ``cuda-graph+bf16`` (CUDA only): the step of ``plif train --cuda-graph``
  (:class:`plif.train.graph.GraphTrainer`: device-side totals, lr tensor), fp32 or bf16 autocast;
- ``compile+graph`` (CUDA only): ``plif train``'s default step on CUDA, the same graph trainer with
  Inductor's compiled network inside the captured step;
- ``cuda-graph+bf16+channels-last`` (CUDA only): ``cuda-graph+bf16`` with the network built under the
  ``channels_last`` GPU switch (:mod:`plif.switches`);
- ``spikingjelly``: the same network (the zoo's, rebuilt by :func:`plif.bench.twin.spikingjelly_twin`) in
  SpikingJelly 2.0 (multi-step; its neuron implementation is its own automatic choice, named in the
  row's note), when installed; ``spikingjelly+bf16``: its step under ``torch.autocast`` bf16 (its AMP path);
- ``spikingjelly+graph`` (CUDA only): that step captured in one CUDA graph, as ``auto+graph`` does for
  plif (SpikingJelly's documentation: a CUDA graph keeps the implementation chosen before capture);
- ``spikingjelly+cuda-graph`` / ``spikingjelly+cuda-graph+bf16`` (CUDA only): SpikingJelly's own CUDA-graph
  execution mode, as its ``train_classify --execution-mode cuda_graph`` runs it: forward, loss and
  backward captured by its ``StaticCudaGraph`` (after its warm-up calls on a side stream), the
  optimizer step, ``zero_grad(set_to_none=False)`` and ``reset_net`` eager outside the graph.

plif's variants run with the product's default ``--memory`` (``memory=None``) or the one named (``bptt`` and
``auto+none`` always with the composed layers), and
TF32 as ``plif train``'s ``tf32`` field says (on by default; it matters on CUDA only).

Static datasets feed one random image batch ``[B, C, H, W]`` (the network repeats it over T); event
datasets feed synthetic event frames ``[T, B, 2, H, W]`` (Poisson counts, mean 0.3 per pixel), not
recordings: the step's cost does not depend on the values.  On CUDA each row also gets the kernels
one step launches and their summed device time (:func:`plif.bench.kernels.profile_kernels`), and
the step's bound from the network's FLOPs and activation bytes (:mod:`plif.bench.bound`).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from ..device import set_tf32
from ..switches import switched
from ..catalog import get_dataset
from ..models import MemoryOptions, build_network
from ..models.inputs import repeat_over_time
from ..train.graph import GraphTrainer, autocast_context, capture_cuda_graph
from ..train.loop import train_step
from ..train.malloc import keep_freed_memory
from ..train.optim import adam, graph_adam
from .bound import activation_bytes, peaks_for, step_bound_ms, step_flops
from .kernels import profile_kernels
from .spikingjelly import INSTALL_HINT, spikingjelly_path, spikingjelly_unavailable
from .twin import spikingjelly_twin

__all__ = ["TrainBenchResult", "bench_train", "default_variants", "format_train_table", "VARIANTS", "CUDA_ONLY",
           "MODEL_VARIANTS", "check_model"]

VARIANTS = ("naive", "bptt", "auto", "auto+none", "auto+bf16", "auto+graph", "compile", "compile+graph", "cuda-graph",
            "cuda-graph+bf16", "cuda-graph+bf16+channels-last", "spikingjelly", "spikingjelly+bf16", "spikingjelly+graph",
            "spikingjelly+cuda-graph", "spikingjelly+cuda-graph+bf16")
CUDA_ONLY = ("auto+graph", "compile+graph", "cuda-graph", "cuda-graph+bf16", "cuda-graph+bf16+channels-last",
             "spikingjelly+graph", "spikingjelly+cuda-graph", "spikingjelly+cuda-graph+bf16")
COMPOSED = ("naive", "bptt", "auto+none")  # the composed layers (--memory none), whatever the memory asked


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
    memory: str = ""  # plif's --memory (SpikingJelly rows: "")
    precision: str = ""  # what the step's matmuls and convolutions run in: fp32, tf32 or bf16
    gflop: float | None = None  # the step's FLOPs (plif.bench.bound)
    activation_gb: float | None = None  # and its activation bytes
    bound_ms: float | None = None  # the larger of FLOPs at the peak and bytes at HBM bandwidth (CUDA)
    pct_of_bound: float | None = None  # 100 * bound_ms / ms_per_step


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


def _spikingjelly_cuda_graph_step(sj, x, y, classes: int, reset_net, amp=None):
    """SpikingJelly's own CUDA-graph training step (its ``train_classify`` with ``--execution-mode
    cuda_graph``): ``StaticCudaGraph`` over forward + loss (the same as plif's step) + backward, the
    optimizer outside the graph."""
    from contextlib import nullcontext

    from spikingjelly.activation_based._cuda_graph import StaticCudaGraph

    from ..train.loss import rate_mse_loss

    opt = adam(sj.parameters(), 1e-3)

    def forward_backward(x, y):
        with autocast_context(x.device, amp) if amp else nullcontext():
            loss, _ = rate_mse_loss(sj(x), y, classes)
        loss.backward()
        return loss

    graphed = StaticCudaGraph(forward_backward, warmup_steps=3)

    def step():
        opt.zero_grad(set_to_none=False)
        graphed(x, y)
        opt.step()
        reset_net(sj)
    return step


def _inputs(entry, T: int, b: int, dev):
    """``(x for plif, x for SpikingJelly, y)``: a static batch (SpikingJelly gets it repeated T times) or
    synthetic event frames ``[T, B, C, H, W]`` for both."""
    gen = torch.Generator().manual_seed(0)
    y = torch.randint(0, entry.num_classes, (b,), generator=gen).to(dev)
    if entry.is_event:
        x = torch.poisson(torch.full((T, b, *entry.input_shape), 0.3), generator=gen).to(dev)
        return x, x, y
    x = torch.randn(b, *entry.input_shape, generator=gen).to(dev)
    return x, x.unsqueeze(0).repeat(T, *([1] * x.dim())), y


def memory_choice(memory: str | None, v: str = "auto", entry=None, network: str | None = None,
                  T: int | None = None) -> tuple[str, object]:
    """``(name, MemoryOptions)`` of ``--memory memory``; None: what ``plif train`` picks for a step run as
    variant ``v`` (compiled inside the graph or not) of ``network`` at ``T`` on ``entry``'s dataset
    (:func:`plif.train.speed.auto_memory`)."""
    import dataclasses

    from ..train.config import TrainConfig
    from ..train.speed import auto_memory

    cfg = TrainConfig(memory=memory)
    if entry is not None:
        cfg = TrainConfig(dataset=entry.name, network=network or entry.network, T=T or entry.T, memory=memory)
    cfg = dataclasses.replace(cfg, memory=auto_memory(cfg, "graph" in v, v.startswith("compile")))
    return cfg.memory, cfg.memory_options()


MODEL_VARIANTS = ("auto", "auto+none", "auto+bf16", "auto+graph", "compile", "spikingjelly", "spikingjelly+bf16",
                  "spikingjelly+graph")
"""The variants ``--model NAME`` (a residual zoo network, not a notation string) runs."""


def check_model(model: str | None) -> None:
    """Refuse a ``--model`` that is not a residual zoo network (what the benches build) in one line."""
    from ..models.residual import RESIDUAL_ZOO

    if model is not None and model not in RESIDUAL_ZOO:
        raise ValueError(f"unknown model {model!r}; valid: {', '.join(RESIDUAL_ZOO)}")


def _model_step(v: str, model: str, entry, T: int, x, xs, y, dev, memory: str | None = None, width: int | None = None):
    """``(step, memory)`` of variant ``v`` on residual zoo network ``model`` (:mod:`plif.models.residual`) for
    ``entry``'s shape and classes: fused per ``memory`` (``auto+none``: as written), fed the static image as a
    stride-0 expand over T; the SpikingJelly rows run its twin holding the same weights."""
    from ..models.residual import RESIDUAL_ZOO
    from .residual_twin import spikingjelly_residual_twin

    amp, graph = ("bf16" if "+bf16" in v else None), v.endswith("graph")
    chosen = "none" if v == "auto+none" else (memory or "fused")
    net = RESIDUAL_ZOO[model][0](entry.input_shape, entry.num_classes, T, fused=v != "auto+none", memory=chosen,
                                 **({} if width is None else {"width": width}))
    xt = xs if entry.is_event else repeat_over_time(x, T)
    if v.startswith("spikingjelly"):
        sj, reset_net = spikingjelly_residual_twin(net)
        step, chosen = _step_fn(sj.to(dev), xs, y, entry.num_classes, capturable=graph, after=reset_net, amp=amp), None
    else:
        net = net.to(dev)
        step = _step_fn(torch.compile(net) if v == "compile" else net, xt, y, entry.num_classes, capturable=graph,
                        amp=amp)
    return (capture_cuda_graph(step, dev) if graph else step), chosen


def _build_step(v: str, entry, T: int, x, xs, y, dev, network: str | None = None, memory: str | None = None):
    """``(step, memory)``: the step of variant ``v`` (a fresh network and optimiser) on ``network``
    (default: the paper's), plif's with ``--memory memory`` (default: ``plif train``'s), and the name
    of the memory option it runs with ("none" for the composed layers, None for SpikingJelly)."""
    network = network or entry.network
    amp = "bf16" if "+bf16" in v else None
    if v.startswith("spikingjelly+cuda-graph"):
        sj, reset_net = spikingjelly_twin(build_network(network, entry.input_shape, T), str(dev))
        return _spikingjelly_cuda_graph_step(sj.to(dev), xs, y, entry.num_classes, reset_net, amp), None
    if v.startswith("spikingjelly"):
        sj, reset_net = spikingjelly_twin(build_network(network, entry.input_shape, T), str(dev))
        graph = v.endswith("graph")
        step = _step_fn(sj.to(dev), xs, y, entry.num_classes, capturable=graph, after=reset_net, amp=amp)
        return (capture_cuda_graph(step, dev) if graph else step), None
    backend = {"naive": "reference", "bptt": "bptt"}.get(v, "auto")
    with switched(channels_last=v.endswith("+channels-last")):  # read when the network is built
        net = build_network(network, entry.input_shape, T, backend=backend)
    # a plain PyTorch SNN keeps every activation; bptt and auto+none: the composed layers of --memory none
    chosen, options = ("none", MemoryOptions()) if v in COMPOSED else memory_choice(memory, v, entry, network, T)
    net.set_memory(options)
    net = net.to(dev)
    if v.startswith(("cuda-graph", "compile+graph")):  # plif train's captured step, compiled inside or not
        trainer = GraphTrainer(net, graph_adam(net.parameters(), 1e-3, dev), entry.num_classes, dev, amp=amp,
                               net=torch.compile(net) if v.startswith("compile") else None)
        net.train()
        return (lambda: trainer.train_step(x, y)), chosen
    step = _step_fn(torch.compile(net) if v == "compile" else net, x, y, entry.num_classes,
                    capturable=v.endswith("graph"), amp=amp)
    return (capture_cuda_graph(step, dev) if v.endswith("graph") else step), chosen


def _bound(r: TrainBenchResult, entry, T: int, network: str, dev, tf32: bool, memory: str | None) -> None:
    """Fill the row's memory (``memory``: the option its step ran with, from :func:`_build_step`),
    precision, FLOPs, activation bytes and, on a GPU of :data:`plif.bench.bound.PEAKS`, its bound."""
    with torch.device("meta"):
        net = build_network(network, entry.input_shape, T)
    r.memory = "" if r.variant.startswith("spikingjelly") or r.variant == "naive" else memory
    r.precision = "bf16" if "+bf16" in r.variant else ("tf32" if tf32 and dev.type == "cuda" else "fp32")
    flops = step_flops(net, r.batch, static_input=not entry.is_event)
    nbytes = activation_bytes(net, r.batch, 2 if r.precision == "bf16" else 4)
    r.gflop, r.activation_gb = flops / 1e9, nbytes / 1e9
    r.bound_ms = step_bound_ms(flops, nbytes, peaks_for(torch.cuda.get_device_name(dev)) if dev.type == "cuda"
                               else None, r.precision)
    r.pct_of_bound = None if r.bound_ms is None else 100 * r.bound_ms / r.ms_per_step


def default_variants(dev: torch.device) -> list[str]:
    """The rows of ``plif bench train`` without ``--variants``: fp32, and bf16 beside it for plif and for
    SpikingJelly's own autocast where this device runs bf16 natively (CUDA; a CPU with AVX512-BF16
    or AMX, :func:`plif.layers.precision.native_bf16`), so that each library's fastest mode is compared."""
    from ..layers.precision import native_bf16

    bf16 = dev.type == "cuda" or (dev.type == "cpu" and native_bf16())
    return (["naive", "bptt", "auto+none", "auto"] + (["auto+bf16"] if bf16 else [])
            + (["auto+graph"] if dev.type == "cuda" else []) + ["spikingjelly"] + (["spikingjelly+bf16"] if bf16 else []))


def bench_train(dataset: str = "fashion-mnist", batches=(16,), device: str = "cpu", variants=None,
                warmup: int = 2, iters: int = 5, T: int | None = None, kernels: bool = True,
                deadline: float | None = None, network: str | None = None, memory: str | None = None,
                tf32: bool = True, model: str | None = None) -> list[TrainBenchResult]:
    """Time one training step of the paper's network for ``dataset`` (or ``network``, or ``model``: a
    residual zoo network by name, :data:`MODEL_VARIANTS` only, no FLOP bound) at each batch
    size; with ``kernels`` (CUDA) also count the kernels of one step.  plif's variants run with
    ``--memory memory`` (default: ``plif train``'s) and TF32 as ``tf32`` says (set for the call,
    restored after).  Past ``deadline`` (``time.monotonic()``) the remaining rows say "not run"."""
    dev = torch.device(device)
    entry = get_dataset(dataset)
    T = T or entry.T
    network = network or entry.network
    check_model(model)
    if variants is None:
        variants = default_variants(dev)
        variants = variants if model is None else [v for v in variants if v in MODEL_VARIANTS]
    for v in variants:
        valid = VARIANTS if model is None else MODEL_VARIANTS
        if v not in valid:
            raise ValueError(f"unknown variant {v!r}{'' if model is None else f' for --model {model}'}; "
                             f"valid: {', '.join(valid)}")
        if v in CUDA_ONLY and dev.type != "cuda":
            raise ValueError(f"variant {v!r} needs a CUDA device, got {dev}")
    wants_sj = any(v.startswith("spikingjelly") for v in variants)
    sj_missing = spikingjelly_unavailable() if wants_sj else None
    sj_note = f"SpikingJelly neuron: {spikingjelly_path(dev)}" if wants_sj and not sj_missing else ""
    if dev.type == "cpu":
        keep_freed_memory()  # as plif train does on the CPU
    tf32_before = set_tf32(tf32)
    results = []
    try:
        for b in batches:
            x, xs, y = _inputs(entry, T, b, dev)
            for v in variants:
                sj = v.startswith("spikingjelly")
                if sj and sj_missing:
                    results.append(TrainBenchResult(v, b, None, None, note=f"unavailable: {sj_missing} ({INSTALL_HINT})"))
                    continue
                if deadline is not None and time.monotonic() > deadline:
                    results.append(TrainBenchResult(v, b, None, None, note="not run: time budget spent"))
                    continue
                torch.manual_seed(0)
                if model is None:
                    step, chosen = _build_step(v, entry, T, x, xs, y, dev, network, memory)
                else:
                    step, chosen = _model_step(v, model, entry, T, x, xs, y, dev, memory)
                results.append(_measure(step, v, b, dev, warmup, iters, kernels))
                results[-1].note = sj_note if sj else ""
                if model is None:
                    _bound(results[-1], entry, T, network, dev, tf32, chosen)
                else:
                    results[-1].memory = chosen or ""
                del step
    finally:
        set_tf32(tf32_before)
    return fill_ratios(results)


def _measure(step, v: str, b: int, dev, warmup: int, iters: int, kernels: bool) -> TrainBenchResult:
    """Time ``step``; on CUDA also its peak memory and (``kernels``) its kernels and their device time."""
    if dev.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(dev)
    sec = _time(step, dev, warmup, iters)
    peak = torch.cuda.max_memory_allocated(dev) / 2**20 if dev.type == "cuda" else None
    k = profile_kernels(step, dev, calls=2) if kernels else {"kernels": None, "kernel_ms": None}
    return TrainBenchResult(v, b, sec * 1e3, b / sec, peak_mem_mb=peak, kernels=k["kernels"], kernel_ms=k["kernel_ms"])


def fill_ratios(results: list[TrainBenchResult]) -> list[TrainBenchResult]:
    """Set each row's speed-up over the naive network and over SpikingJelly at the same batch size: a
    bf16 row's over ``spikingjelly+bf16`` (SpikingJelly's own autocast) where that was measured, so each
    library's bf16 is compared with the other's."""
    for r in results:
        same = {o.variant: o.ms_per_step for o in results if o.batch == r.batch and o.ms_per_step}
        if r.ms_per_step:
            r.ratio_to_naive = same["naive"] / r.ms_per_step if "naive" in same else None
            sj = "spikingjelly+bf16" if "+bf16" in r.variant and "spikingjelly+bf16" in same else "spikingjelly"
            r.ratio_to_spikingjelly = same[sj] / r.ms_per_step if sj in same else None
    return results


def format_train_table(results: list[TrainBenchResult], title: str) -> str:
    """One line per (variant, batch); kernel columns where a row has them (CUDA); the SpikingJelly
    rows' implementation as a last line."""
    kernels = any(r.kernels is not None for r in results)
    bound = any(r.bound_ms is not None for r in results)
    w = max([18] + [len(r.variant) for r in results])
    head = f"{'variant':{w}s} {'prec':>4s} {'batch':>5s} {'ms/step':>9s} {'samples/s':>10s} {'x naive':>8s} {'x SJ':>6s} {'peak MB':>8s}"
    head += f" {'kernels':>8s} {'kernel ms':>9s}" if kernels else ""
    head += f" {'bound ms':>8s} {'% bound':>7s}" if bound else ""
    lines = [title, head, "-" * len(head)]
    for r in results:
        f = lambda v, fmt: format(v, fmt) if v is not None else "-"  # noqa: E731
        if r.ms_per_step is None:
            lines.append(f"{r.variant:{w}s} {'':>4s} {r.batch:5d} {r.note}")
            continue
        lines.append(f"{r.variant:{w}s} {r.precision:>4s} {r.batch:5d} {r.ms_per_step:9.2f} {r.samples_per_s:10.0f} "
                     f"{f(r.ratio_to_naive, '8.2f'):>8s} {f(r.ratio_to_spikingjelly, '6.2f'):>6s} {f(r.peak_mem_mb, '8.0f'):>8s}"
                     + (f" {f(r.kernels, '8.0f'):>8s} {f(r.kernel_ms, '9.2f'):>9s}" if kernels else "")
                     + (f" {f(r.bound_ms, '8.2f'):>8s} {f(r.pct_of_bound, '7.1f'):>7s}" if bound else ""))
    notes = sorted({r.note for r in results if r.ms_per_step is not None and r.note})
    return "\n".join(lines + notes)
