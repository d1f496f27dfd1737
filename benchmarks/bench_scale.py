"""Scaling of ``plif train`` under torchrun: samples/s of the cpu preset with 1 and N processes.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_scale.py [--procs 1,2] [--device cpu] [--repeat 2]
    PYTHONPATH=src .venv/bin/python benchmarks/bench_scale.py --procs 1,2,4,8 --device cuda   # N GPUs

Each measurement is one ``torchrun --standalone --nproc_per_node=N -m plif train`` of the cpu
preset (its network, T = 4, batch 64 per process) on ``--max-train-samples`` Fashion-MNIST
samples for 2 epochs; the rate is the second epoch's ``samples_per_s`` from ``metrics.jsonl``
(all processes' samples over rank 0's training time: warm caches, no start-up).  On the CPU each
process gets ``cores / N`` threads.  The process counts are interleaved ``--repeat`` times
(1, 2, 1, 2, ...) and the best rate of each is kept, so a machine shared with other work still
gives a fairer ratio.  Efficiency: ``rate(N) / (N * rate(1))``; weak scaling (the global batch
grows with N).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path


def run_once(n: int, device: str, samples: int, data_dir: str | None, out: Path, threads: int | None) -> float:
    env = dict(os.environ)
    if device == "cpu":
        env["OMP_NUM_THREADS"] = str(threads or max(1, (os.cpu_count() or 1) // n))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={n}", "-m", "plif",
           "train", "--preset", "cpu", "--epochs", "2", "--device", device, "--max-train-samples", str(samples),
           "--max-test-samples", "256", "--out", str(out)]
    if data_dir:
        cmd += ["--data-dir", data_dir]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{n} processes failed:\n{proc.stderr[-2000:]}")
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return float(rows[-1]["samples_per_s"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--procs", default="1,2", help="process counts, comma-separated [1,2]")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--samples", type=int, default=2048, help="training samples per epoch [2048]")
    p.add_argument("--repeat", type=int, default=2, help="interleaved rounds; the best of each count is kept [2]")
    p.add_argument("--threads", type=int, help="CPU threads per process [cores / processes]; on a machine "
                   "shared with other work, 1 avoids OpenMP's oversubscription stalls")
    p.add_argument("--data-dir", help="Fashion-MNIST folder [found as plif train finds it]")
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args()
    procs = [int(v) for v in args.procs.split(",")]
    best: dict[int, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeat):
            for n in procs:
                rate = run_once(n, args.device, args.samples, args.data_dir, Path(tmp) / f"r{r}-n{n}", args.threads)
                best[n] = max(best.get(n, 0.0), rate)
                print(f"round {r + 1}: {n} process(es): {rate:.0f} samples/s", flush=True)
    import torch

    base = best[procs[0]] / procs[0]
    print(f"\n{platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
          f"{args.device}, cpu preset, {args.samples} samples/epoch"
          + (f", {args.threads or 'cores / N'} threads per process" if args.device == "cpu" else ""))
    print(f"{'processes':>9}  {'samples/s':>9}  {'efficiency':>10}")
    for n in procs:
        print(f"{n:>9}  {best[n]:>9.0f}  {best[n] / (n * base):>10.0%}")
    if args.json:
        Path(args.json).write_text(json.dumps({"device": args.device, "samples": args.samples,
                                               "rates": {str(n): best[n] for n in procs},
                                               "efficiency": {str(n): best[n] / (n * base) for n in procs}},
                                              indent=1))


if __name__ == "__main__":
    main()
