"""Step time of the memory configurations, alternated in one process (the ratio is what counts).

``plif bench memory`` times each configuration in its own process, one after the other, so other
jobs' load moves its times by 2-4x.  Here one process builds every configuration of one zoo
network and runs one training step of each in turn (``plif.train.loop.train_step``, the step of
``plif train``), ``--rounds`` times after a warm-up round, and reports for each the median wall
and CPU (process) seconds per step and the ratio to the first configuration.

    python benchmarks/memory_step_time.py --network dvs128-gesture --configs default,exact,low --batch 1
    python benchmarks/memory_step_time.py --configs none,default --batch 2 --rounds 5   # fused vs composed

Freed memory stays in the process, as in ``plif train`` on the CPU (``plif.train.malloc``).
"""
from __future__ import annotations

import argparse
import statistics
from functools import partial

import torch

from plif.bench.alternate import alternate
from plif.catalog import get_dataset
from plif.models import MEMORY_PRESETS, build_zoo
from plif.train.loop import train_step
from plif.train.malloc import keep_freed_memory
from plif.train.optim import adam


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--network", default="dvs128-gesture")
    p.add_argument("--configs", default="default,exact,low", help="'default' or --memory presets, comma-separated")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--T", type=int, default=20)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    keep_freed_memory()
    entry = get_dataset(args.network)
    configs = args.configs.split(",")
    g = torch.Generator().manual_seed(0)
    x = torch.poisson(torch.full((args.T, args.batch, *entry.input_shape), 0.3), generator=g)
    y = torch.randint(0, entry.num_classes, (args.batch,), generator=g)
    steps = {}
    for c in configs:
        torch.manual_seed(0)
        net = build_zoo(args.network, T=args.T)
        if c != "default":
            net.set_memory(MEMORY_PRESETS[c])
        net.train()
        steps[c] = partial(train_step, net, adam(net.parameters(), 1e-3), x, y, entry.num_classes,
                           list(net.parameters()))
    cpu, wall = alternate(steps, args.rounds)  # a warm-up round first
    ref_w, ref_c = statistics.median(wall[configs[0]]), statistics.median(cpu[configs[0]])
    print(f"{args.network}, T={args.T}, B={args.batch}, {torch.get_num_threads()} threads, "
          f"torch {torch.__version__}, median of {args.rounds} alternated rounds")
    print("| configuration | wall s/step | CPU s/step | wall vs first | CPU vs first |")
    print("|---|---|---|---|---|")
    for c in configs:
        w, u = statistics.median(wall[c]), statistics.median(cpu[c])
        print(f"| {c} | {w:.2f} | {u:.2f} | {w / ref_w:.2f}x | {u / ref_c:.2f}x |")


if __name__ == "__main__":
    main()
