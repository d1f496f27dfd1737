"""``plif bench <what>``: speed measurements; each sub-subcommand parses and calls one library function.

- ``plif bench neuron``: one neuron layer on every backend (:func:`plif.bench.neuron.run_neuron_bench`);
- ``plif bench train``: one training step of the paper's network (:func:`plif.bench.train.bench_train`);
- ``plif bench memory``: peak memory of one training step per memory configuration (:mod:`plif.bench.memory`);
- ``plif bench bound``: a training step against its own products run alone (:mod:`plif.bench.step_bound`).

A new benchmark is a module ``plif.bench.<name>`` plus an ``_add_<name>`` here, imported lazily so
that one benchmark's dependencies never slow down or break another.
"""
from __future__ import annotations

import argparse
from dataclasses import asdict

__all__ = ["register"]


def _csv(text: str) -> list[str]:
    return [t for t in (s.strip() for s in text.split(",")) if t]


def _print_backends() -> None:
    """Every neuron backend and whether it loaded (a failed fused backend shows its reason)."""
    from ..neurons import backend_status

    print("neuron backends: " + "; ".join(f"{name} {state}" for name, state in backend_status().items()))


def _run_neuron(args: argparse.Namespace) -> int:
    import torch

    _print_backends()

    from ..bench.neuron import CASES, format_table, machine_description, run_neuron_bench, write_json

    if args.threads:
        torch.set_num_threads(args.threads)
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[args.dtype]
    from ..device import pick_device

    device = pick_device(args.device or "auto")
    cases = _csv(args.cases) if args.cases else list(CASES)
    backends = _csv(args.backends) if args.backends else None
    if backends is None and args.no_spikingjelly:
        from ..bench.neuron import default_backends
        backends = [b for b in default_backends(device) if b != "spikingjelly"]
    passes = ("fwd+bwd",) if args.train_only else ("fwd", "fwd+bwd")
    rows = run_neuron_bench(cases, backends, device, dtype, passes, args.reps, args.budget,
                            log=(lambda *_: None) if args.quiet else print)
    machine = machine_description(device)
    print(f"\nplif bench neuron — {machine}, {args.dtype}\n")
    print(format_table(rows))
    if args.json:
        write_json(args.json, rows, {"machine": machine, "device": str(device), "dtype": args.dtype,
                                     "reps": args.reps, "budget_s": args.budget})
        print(f"\nwrote {args.json}")
    return 0


def _add_neuron(sub) -> None:
    p = sub.add_parser("neuron", help="time one PLIF layer (forward, forward+backward) on every backend",
                       description="Time one PLIF layer on every backend against a measured copy bound.")
    p.add_argument("--cases", help="comma-separated cases (default: all): T8-B16-C128-28x28, "
                                   "T20-B16-C128-128x128, FC-T8-B64-N2048")
    p.add_argument("--backends", help="comma-separated backends (default: the fused one for the device, "
                                      "bptt, reference, spikingjelly if installed)")
    p.add_argument("--no-spikingjelly", action="store_true", help="leave SpikingJelly out of the default backends")
    p.add_argument("--device", help="cpu or cuda (default: cuda when available)")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    p.add_argument("--reps", type=int, default=10, help="timed repetitions after one warm-up (default 10)")
    p.add_argument("--budget", type=float, default=10.0, help="seconds at most per measurement; slow ones do fewer reps")
    p.add_argument("--threads", type=int, help="CPU threads for every backend (default: torch's)")
    p.add_argument("--train-only", action="store_true", help="only forward+backward, no forward-only rows")
    p.add_argument("--json", metavar="FILE", help="also write the numbers as JSON")
    p.add_argument("--quiet", action="store_true", help="print only the final table")
    p.set_defaults(func=_run_neuron)


def _run_train(args: argparse.Namespace) -> int:
    import torch

    from ..bench.train import bench_train, format_train_table
    from ..device import pick_device

    _print_backends()
    device = str(pick_device(args.device or "auto"))
    batches = tuple(int(b) for b in _csv(args.batches))
    results = bench_train(args.dataset, batches, device, _csv(args.variants) if args.variants else None,
                          args.warmup, args.iters, args.T, memory=args.memory, tf32=args.tf32, model=args.model)
    what = args.dataset if args.model is None else f"{args.model} on {args.dataset}'s input"
    print(format_train_table(results, f"plif bench train — {what} on {device}"))
    if args.json:
        from ..bench.neuron import machine_description, write_json_data
        write_json_data(args.json, {"meta": {"machine": machine_description(torch.device(device)),
                                             "dataset": args.dataset, "model": args.model},
                                    "rows": [asdict(r) for r in results]})
        print(f"\nwrote {args.json}")
    return 0


def _add_train(sub) -> None:
    from ..train.config import MEMORY_CHOICES

    p = sub.add_parser("train", help="time one training step of the paper's network per backend",
                       description="Time forward + backward + Adam of a paper network (naive, bptt, fused, SpikingJelly); "
                                   "event datasets get synthetic event frames; on CUDA also the kernels per step.")
    p.add_argument("--dataset", default="fashion-mnist", help="zoo entry whose network is timed (default fashion-mnist)")
    p.add_argument("--batches", default="16", help="comma-separated batch sizes (default 16)")
    p.add_argument("--variants", help="comma-separated: naive, bptt, auto (plif's default: fused conv blocks), auto+none "
                                      "(--memory none: the composed layers), auto+bf16 (bf16 autocast), auto+graph (CUDA), "
                                      "compile, compile+graph (CUDA; plif train's default there), cuda-graph (CUDA), "
                                      "cuda-graph+bf16 (CUDA), cuda-graph+bf16+channels-last (CUDA), spikingjelly, "
                                      "spikingjelly+bf16, spikingjelly+graph (CUDA)")
    p.add_argument("--device", help="cpu or cuda (default: cuda when available)")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--T", type=int, help="time-steps (default: the paper's for the dataset)")
    p.add_argument("--memory", choices=MEMORY_CHOICES, help="plif's activation savings (default: plif train's)")
    p.add_argument("--tf32", action=argparse.BooleanOptionalAction, default=True,
                   help="TF32 for fp32 matmuls and convolutions on CUDA, as plif train's default (no effect on the CPU)")
    p.add_argument("--model", metavar="NAME", help="time a residual zoo network (plif zoo lists them: sew-resnet18, "
                                                   "sew-7b-net, ...) for --dataset's shape and classes instead of the "
                                                   "paper's; variants auto, auto+none, auto+bf16, compile, spikingjelly "
                                                   "(its SpikingJelly twin, the same weights), spikingjelly+bf16")
    p.add_argument("--json", metavar="FILE", help="also write the numbers as JSON")
    p.set_defaults(func=_run_train)


def _run_bound(args: argparse.Namespace) -> int:
    import torch

    from ..bench.step_bound import bench_step_bound, format_bound_table
    from ..catalog import get_dataset
    from ..device import pick_device

    device = str(pick_device(args.device or "auto"))
    entry = get_dataset(args.dataset)
    network = entry.network_string(cpu=True) if args.preset == "cpu" and args.model is None else None
    T = args.T or (4 if args.preset == "cpu" else None)
    rows = bench_step_bound(args.dataset, args.batch, T, device, _csv(args.precisions) if args.precisions else None,
                            args.rounds, args.warmup, network, args.model, args.memory, not args.no_spikingjelly)
    what = args.model or f"{args.dataset}'s {args.preset} network"
    print(format_bound_table(rows, f"plif bench bound — {what}, T={T or entry.T}, batch {args.batch}, on {device}",
                             args.top))
    if args.json:
        from dataclasses import asdict as fields

        from ..bench.neuron import machine_description, write_json_data
        write_json_data(args.json, {"meta": {"machine": machine_description(torch.device(device)), "dataset": args.dataset,
                                             "preset": args.preset, "model": args.model, "T": T or entry.T,
                                             "batch": args.batch, "rounds": args.rounds, "threads": torch.get_num_threads()},
                                    "rows": [{**fields(r), "over_bound": r.over_bound,
                                              "over_spikingjelly": r.over_spikingjelly} for r in rows]})
        print(f"\nwrote {args.json}")
    return 0


def _add_bound(sub) -> None:
    from ..train.config import MEMORY_CHOICES

    p = sub.add_parser("bound", help="a training step against its own convolutions and matrix products run alone",
                       description="Record the convolutions and matrix products of plif's training step as ATen "
                                   "sees them, time them alone in turns with the step (and SpikingJelly's step of the "
                                   "same network), in fp32 and bf16: step / bound says what plif adds on top of "
                                   "the products it must compute.")
    p.add_argument("--dataset", default="fashion-mnist", help="zoo entry whose network is timed (default fashion-mnist)")
    p.add_argument("--preset", choices=("paper", "cpu"), default="paper",
                   help="the paper's network, or the dataset's cpu network at T=4 (plif train's presets)")
    p.add_argument("--model", metavar="NAME", help="a residual zoo network (plif zoo lists them) for --dataset's input")
    p.add_argument("--batch", type=int, default=16, help="batch size (default 16)")
    p.add_argument("--T", type=int, help="time-steps (default: the preset's)")
    p.add_argument("--precisions", help="comma-separated fp32, bf16 (default: both where bf16 runs natively)")
    p.add_argument("--memory", choices=MEMORY_CHOICES, help="plif's activation savings (default: plif train's)")
    p.add_argument("--rounds", type=int, default=10, help="timed turns (default 10); medians are reported")
    p.add_argument("--warmup", type=int, default=2, help="untimed turns first (default 2)")
    p.add_argument("--top", type=int, default=0, help="list this many of each row's most frequent products")
    p.add_argument("--no-spikingjelly", action="store_true", help="leave SpikingJelly's step out")
    p.add_argument("--device", help="cpu or cuda (default: cuda when available)")
    p.add_argument("--json", metavar="FILE", help="also write the numbers as JSON")
    p.set_defaults(func=_run_bound)


def _run_memory(args: argparse.Namespace) -> int:
    import torch

    from ..bench.memory import CONFIGS, bench_memory, format_memory_table, write_results
    from ..bench.neuron import machine_description

    configs = _csv(args.configs) if args.configs else list(CONFIGS)
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown:
        raise ValueError(f"--configs: unknown {', '.join(unknown)}; valid: {', '.join(CONFIGS)}")
    batches = tuple(int(b) for b in _csv(args.batches))
    if not batches or min(batches) < 1:
        raise ValueError(f"--batches must be positive integers, got {args.batches!r}")
    from ..device import pick_device

    device = str(pick_device(args.device or "cpu"))  # a bad or unavailable device is refused before any worker starts
    threshold = args.mmap_threshold or None  # 0: glibc's default allocator only
    results = bench_memory(_csv(args.networks), configs, batches, args.T, args.steps, device, args.threads,
                           mmap_threshold=threshold, default_rss=args.default_rss)
    budget = args.budget_gib * 1024
    machine = machine_description(torch.device(device))
    what = ("CUDA allocated" if device != "cpu" else f"live peak RSS per process (mmap threshold {threshold} B)"
            if threshold else "peak RSS per process, glibc's default allocator")
    print(f"\nplif bench memory — {machine}, T={args.T}, {what}\n")
    print(format_memory_table(results, budget))
    if args.json:
        write_results(args.json, results, {"machine": machine, "device": device, "T": args.T, "steps": args.steps,
                                           "budget_mb": budget, "mmap_threshold": args.mmap_threshold})
        print(f"\nwrote {args.json}")
    return 0


def _add_memory(sub) -> None:
    from ..bench.memory import CONFIGS, LIVE_MMAP_THRESHOLD

    p = sub.add_parser("memory", help="peak memory and time of one training step per memory configuration",
                       description="Peak memory (a fresh process per configuration) and step time of forward + "
                                   "backward + Adam, for naive / SpikingJelly / plif default / plif with savings.")
    p.add_argument("--networks", default="dvs128-gesture,cifar10-dvs", help="comma-separated zoo entries")
    p.add_argument("--configs", help="comma-separated, default all: " + ", ".join(CONFIGS))
    p.add_argument("--batches", default="1,2", help="comma-separated batch sizes; two or more give the derived "
                                                   "largest batch (default 1,2)")
    p.add_argument("--T", type=int, default=20, help="time-steps (default 20)")
    p.add_argument("--steps", type=int, default=2, help="training steps per process; the first is not timed (default 2)")
    p.add_argument("--budget-gib", type=float, default=24.0, help="memory for the derived largest batch (default 24)")
    p.add_argument("--device", help="cpu (peak RSS) or cuda (max_memory_allocated); default cpu")
    p.add_argument("--threads", type=int, help="CPU threads per process (default: torch's)")
    p.add_argument("--mmap-threshold", type=int, metavar="BYTES", default=LIVE_MMAP_THRESHOLD,
                   help="glibc's MALLOC_MMAP_THRESHOLD_ in each worker, so the peak RSS follows the live "
                        f"tensors (default {LIVE_MMAP_THRESHOLD}; 0: glibc's dynamic threshold)")
    p.add_argument("--default-rss", action=argparse.BooleanOptionalAction, default=True,
                   help="also run each configuration under glibc's default allocator and show its peak RSS "
                        "beside the live peak (default yes; CPU only)")
    p.add_argument("--json", metavar="FILE", help="also write the numbers as JSON")
    p.set_defaults(func=_run_memory)


def register(subparsers) -> None:
    bench = subparsers.add_parser("bench", help="speed benchmarks", description=__doc__.split("\n\n")[0])
    sub = bench.add_subparsers(dest="bench", metavar="WHAT")
    _add_neuron(sub)
    _add_train(sub)
    _add_memory(sub)
    _add_bound(sub)
    bench.set_defaults(func=lambda args: (bench.print_help(), 2)[1])
