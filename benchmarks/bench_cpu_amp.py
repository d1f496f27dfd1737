"""CPU training step in fp32 against bf16 autocast (``plif train --amp bf16``), alternated in one process.

The cpu preset's Fashion-MNIST network (``--network`` for another, ``paper`` for the dataset's zoo
network), batch 64, T = 4, random images (an event dataset: synthetic event frames, as ``plif bench
train`` feeds them), ``plif train``'s default ``--memory``: two copies built from the same seed, each with its own Adam, run ``plif train``'s step
(:func:`plif.train.loop.train_step`) in turns fp32, bf16, fp32, bf16, ... so load from other jobs
falls on both alike.  Reported: CPU time per step (``time.thread_time`` with one thread, where
the whole step runs on the calling thread; ``time.process_time`` with more, which counts
OpenMP's spinning too) and wall time, median and min over the rounds, and the median of the
per-round ratios.  ``--profile`` adds the operators that take the most CPU time in one step of
each, to show where bf16 gains or loses (oneDNN's convolutions, BatchNorm, the neuron kernel).

    python benchmarks/bench_cpu_amp.py                      # 1 thread, 8 rounds
    python benchmarks/bench_cpu_amp.py --threads 2 --memory exact --profile
    python benchmarks/bench_cpu_amp.py --network paper --batch 16 --T 8 --threads 2 --rounds 8
    python benchmarks/bench_cpu_amp.py --dataset dvs128-gesture --network paper --batch 2 --T 20 --threads 2
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from plif.bench.alternate import alternate
from plif.bench.neuron import machine_description
from plif.bench.train import _inputs
from plif.catalog import get_dataset
from plif.layers.precision import native_bf16
from plif.models import MEMORY_PRESETS, build_network
from plif.models.memory import DEFAULT_MEMORY
from plif.train.loop import train_step
from plif.train.malloc import keep_freed_memory
from plif.train.optim import adam


def make_step(network: str, input_shape, T: int, memory: str, x, y, classes: int, amp: bool):
    torch.manual_seed(0)
    net = build_network(network, input_shape, T, memory=MEMORY_PRESETS[memory])
    opt = adam(net.parameters(), 1e-3)
    params = list(net.parameters())
    autocast = (lambda: torch.autocast("cpu", torch.bfloat16, cache_enabled=False)) if amp else None
    return lambda: train_step(net, opt, x, y, classes, params, autocast=autocast)


def profile(step, label: str, rows: int) -> None:
    from torch.profiler import ProfilerActivity, profile as torch_profile

    with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        step()
    print(f"\n--- {label}: operators by self CPU time (one step)")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dataset", default="fashion-mnist")
    p.add_argument("--network", help="network string, or 'paper' for the dataset's zoo network [its cpu preset network]")
    p.add_argument("--T", type=int, default=4)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--memory", default=DEFAULT_MEMORY, choices=sorted(MEMORY_PRESETS))
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--profile", action="store_true", help="also show the top operators of one step of each")
    p.add_argument("--json", metavar="FILE", help="also write the numbers as JSON")
    args = p.parse_args(argv)

    torch.set_num_threads(args.threads)
    keep_freed_memory()  # as plif train does on the CPU
    clock = time.thread_time if args.threads == 1 else time.process_time
    entry = get_dataset(args.dataset)
    network = {None: entry.cpu_network, "paper": entry.network}.get(args.network, args.network)
    x, _, y = _inputs(entry, args.T, args.batch, torch.device("cpu"))
    steps = {name: make_step(network, entry.input_shape, args.T, args.memory, x, y, entry.num_classes, name == "bf16")
             for name in ("fp32", "bf16")}
    cpu, wall = alternate(steps, args.rounds, args.warmup, clock)
    ratios = [b / a for a, b in zip(cpu["fp32"], cpu["bf16"])]
    wall_ratios = [b / a for a, b in zip(wall["fp32"], wall["bf16"])]  # what a user waits: the step with 2+ threads
    machine = machine_description(torch.device("cpu"))
    cpu_flags = ""
    try:
        flags = open("/proc/cpuinfo").read().split("flags", 1)[1].split("\n", 1)[0]
        cpu_flags = ", ".join(f for f in ("avx512f", "avx512_bf16", "amx_bf16") if f" {f}" in flags) or "none of them"
    except (OSError, IndexError):
        pass
    print(f"{machine}\nbf16-relevant CPU flags: {cpu_flags}; ATen's CPU capability: "
          f"{torch.backends.cpu.get_cpu_capability()}; native bf16 (plif.layers.precision.native_bf16): {native_bf16()}")
    print(f"network {network}, T={args.T}, batch {args.batch}, --memory {args.memory}, {args.threads} thread(s), "
          f"{args.rounds} alternated rounds")
    print(f"{'':6s} {'CPU ms median':>14s} {'CPU ms min':>11s} {'wall ms median':>15s}")
    for name in steps:
        print(f"{name:6s} {statistics.median(cpu[name]) * 1e3:14.1f} {min(cpu[name]) * 1e3:11.1f} "
              f"{statistics.median(wall[name]) * 1e3:15.1f}")
    print(f"bf16 / fp32 CPU time: median of per-round ratios {statistics.median(ratios):.2f} "
          f"(range {min(ratios):.2f}-{max(ratios):.2f}); wall time: {statistics.median(wall_ratios):.2f} "
          f"(range {min(wall_ratios):.2f}-{max(wall_ratios):.2f})")
    if args.profile:
        for name, step in steps.items():
            profile(step, name, 12)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine, "cpu_flags": cpu_flags, "network": network, "T": args.T,
                       "batch": args.batch, "memory": args.memory, "threads": args.threads,
                       "native_bf16": native_bf16(), "cpu_s": cpu, "wall_s": wall, "ratio_median": statistics.median(ratios),
                       "wall_ratio_median": statistics.median(wall_ratios)}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
