"""A/B: the same ``plif train`` command on two commits, alternated, in one run.

Each commit is checked out once into a detached ``git worktree`` under a temporary folder, and
the command runs with ``PYTHONPATH`` at that checkout's ``src`` (the shared interpreter and
packages stay the same, so only the code differs).  Rounds alternate A B A B ... so load from
other jobs on the machine falls on both sides alike; only the ratio of one run means anything.

Reported per run: the training samples/s that ``plif train`` itself logs (training wall time of
the epoch, evaluation excluded) and the process's CPU seconds (user + system, which moves much
less than wall time when other jobs share the cores).

``--step`` times only the training steps instead: that commit's ``plif.train.loop.train_epoch``
(what ``plif train`` runs per epoch, data loading and evaluation excluded) over STEPS batches of
the cpu preset's Fashion-MNIST network, batch 64, T 4, random images (``--step-network``,
``--step-batch``, ``--step-T`` choose others: ``--step-network paper`` is the paper's Fashion-MNIST
network), on one thread, as CPU time per step: on a machine shared with other jobs (load 5-13 on 2 cores here) that is the only figure
that repeats; the median over rounds is reported.

    python benchmarks/ab_commits.py 1137611 HEAD --rounds 3
    python benchmarks/ab_commits.py 1137611 HEAD --step --rounds 5
    python benchmarks/ab_commits.py 1137611 HEAD --step --step-network paper --step-T 8 --step-batch 16 --steps 3
    python benchmarks/ab_commits.py 1137611 HEAD -- --batch-size 32   # extra plif train options
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = "/usr/share/datasets/fashion-mnist"


def checkout(commit: str, root: Path) -> Path:
    """A detached worktree of ``commit`` under ``root`` (one per resolved commit)."""
    sha = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--verify", f"{commit}^{{commit}}"],
                         capture_output=True, text=True, check=True).stdout.strip()
    path = root / sha[:12]
    if not path.exists():
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "-q", str(path), sha], check=True)
    return path


def train_once(tree: Path, args, extra: list[str], out: Path) -> dict:
    cmd = [sys.executable, "-m", "plif", "train", "--preset", args.preset, "--dataset", args.dataset,
           "--epochs", "1", "--seed", "0", "--device", "cpu", "--max-train-samples", str(args.samples),
           "--max-test-samples", str(args.test_samples), "--out", str(out), *extra]
    if args.data_dir:
        cmd += ["--data-dir", args.data_dir]
    shutil.rmtree(out, ignore_errors=True)  # a fresh run folder each time (--keep reuses the names)
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    if args.threads:
        env["OMP_NUM_THREADS"] = str(args.threads)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"plif train failed on {tree.name}:\n{proc.stderr[-2000:]}")
    row = json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"samples_per_s": row["samples_per_s"], "train_s": row["train_time_s"], "cpu_s": cpu, "wall_s": wall}


# runs inside a checkout (its own plif): only APIs that 1137611 and later share
_STEP = """
import json, time, torch
from plif.models import build_network
import plif.train.loop as L
try:
    from plif.train.optim import adam  # its home since the optimiser left loop.py
except ImportError:
    adam = L.adam
torch.manual_seed(0)
net = build_network(NETWORK, (1, 28, 28), T_STEPS).train()
opt = adam(net.parameters(), 2e-3)
batch = (torch.rand(BATCH, 1, 28, 28), torch.randint(0, 10, (BATCH,)))
L.train_epoch(net, opt, [batch] * 3, 10)  # warm-up
c, w = time.process_time(), time.perf_counter()
L.train_epoch(net, opt, [batch] * STEPS, 10)
print(json.dumps({"cpu_ms": 1e3 * (time.process_time() - c) / STEPS, "wall_ms": 1e3 * (time.perf_counter() - w) / STEPS}))
"""


STEP_NETWORKS = {"cpu": "{c32k3s1-BN-PLIF-MPk2s2}*2-DP-FC512-PLIF-DP-FC100-PLIF-APk10s10",
                 "paper": "{c128k3s1-BN-PLIF-MPk2s2}*2-DP-FC2048-PLIF-DP-FC100-PLIF-APk10s10"}
"""``--step-network`` names: the cpu preset's and the paper's Fashion-MNIST networks."""


def step_once(tree: Path, args) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree / "src"), "OMP_NUM_THREADS": str(args.threads or 1)}
    code = (_STEP.replace("NETWORK", repr(STEP_NETWORKS.get(args.step_network, args.step_network)))
            .replace("T_STEPS", str(args.step_T)).replace("BATCH", str(args.step_batch)).replace("STEPS", str(args.steps)))
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"the step benchmark failed on {tree.name}:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("a", help="baseline commit (e.g. 1137611)")
    p.add_argument("b", help="candidate commit (e.g. HEAD)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--preset", default="cpu")
    p.add_argument("--dataset", default="fashion-mnist")
    p.add_argument("--samples", type=int, default=6400, help="--max-train-samples [6400]")
    p.add_argument("--test-samples", type=int, default=1000, help="--max-test-samples [1000]")
    p.add_argument("--data-dir", default=DEFAULT_DATA if Path(DEFAULT_DATA).is_dir() else None)
    p.add_argument("--step", action="store_true", help="time the training step alone (CPU ms per step)")
    p.add_argument("--steps", type=int, default=15, help="timed steps per --step run [15]")
    p.add_argument("--step-network", default="cpu", help="--step: cpu, paper or a network string [cpu]")
    p.add_argument("--step-T", type=int, default=4, help="--step: time-steps [4]")
    p.add_argument("--step-batch", type=int, default=64, help="--step: batch size [64]")
    p.add_argument("--threads", type=int, help="OMP_NUM_THREADS for both (default: torch's choice)")
    p.add_argument("--keep", help="folder for the checkouts and runs (default: a temporary one, removed)")
    p.add_argument("extra", nargs="*", help="more plif train options, after --")
    args = p.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.keep or tmp)
        trees = {name: checkout(c, root) for name, c in (("A", args.a), ("B", args.b))}
        for tree in trees.values():  # each checkout's C++ kernels are built (or found cached) before any timing
            subprocess.run([sys.executable, "-c", "from plif.kernels.cpu_build import load_library; load_library()"],
                           env={**os.environ, "PYTHONPATH": str(tree / "src")}, check=True)
        runs: dict[str, list[dict]] = {"A": [], "B": []}
        try:
            for r in range(args.rounds):
                for name in ("A", "B"):
                    if args.step:
                        res = step_once(trees[name], args)
                        print(f"round {r + 1} {name} {trees[name].name}: step {res['cpu_ms']:6.1f} ms CPU  "
                              f"{res['wall_ms']:6.1f} ms wall", flush=True)
                    else:
                        res = train_once(trees[name], args, args.extra, root / f"run-{name}-{r}")
                        print(f"round {r + 1} {name} {trees[name].name}: {res['samples_per_s']:7.1f} samples/s  "
                              f"train {res['train_s']:6.1f} s  cpu {res['cpu_s']:6.1f} s", flush=True)
                    runs[name].append(res)
        finally:
            if not args.keep:
                for tree in trees.values():
                    subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)],
                                   capture_output=True)
        if args.step:
            med = {n: statistics.median(x["cpu_ms"] for x in runs[n]) for n in runs}
            print(f"median CPU ms per step: A {med['A']:.1f}, B {med['B']:.1f} -> speed B/A {med['A'] / med['B']:.3f}")
            return
        med = {n: {k: statistics.median(x[k] for x in runs[n]) for k in ("samples_per_s", "cpu_s")} for n in runs}
        print(f"median samples/s: A {med['A']['samples_per_s']:.1f}, B {med['B']['samples_per_s']:.1f} "
              f"-> B/A {med['B']['samples_per_s'] / med['A']['samples_per_s']:.3f}; "
              f"CPU seconds per run: A {med['A']['cpu_s']:.1f}, B {med['B']['cpu_s']:.1f} "
              f"-> A/B {med['A']['cpu_s'] / med['B']['cpu_s']:.3f}")


if __name__ == "__main__":
    main()
