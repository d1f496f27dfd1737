"""A/B: the same ``plif train`` command on two commits, alternated, in one run.

Each commit is checked out once into a detached ``git worktree`` under a temporary folder, and
the command runs with ``PYTHONPATH`` at that checkout's ``src`` (the shared interpreter and
packages stay the same, so only the code differs).  Rounds alternate A B A B ... so load from
other jobs on the machine falls on both sides alike; only the ratio of one run means anything.

Reported per run: the training samples/s that ``plif train`` itself logs (training wall time of
the epoch, evaluation excluded) and the process's CPU seconds (user + system, which moves much
less than wall time when other jobs share the cores).

``--step`` times only the training steps instead: that commit's ``plif.train.loop.train_epoch``
(what ``plif train`` runs per epoch, data loading and evaluation excluded) over STEPS batches, one
fresh process per round and side, on one thread, as CPU time per step: on a machine shared with
other jobs (load 5-13 on 2 cores here) that is the only figure that repeats.  ``--net`` picks the
network: ``cpu`` (the cpu preset's Fashion-MNIST network, T 4, batch 64, random images, built by
``build_network`` as commits since 1137611 share it), ``paper`` (the paper's Fashion-MNIST network,
T 8, batch 16, random images) or ``gesture`` (the paper's DVS128 Gesture network, T 20, batch 1,
random event frames ``[T, B, 2, 128, 128]``); for these two the network, optimiser, ``--memory`` and
``--amp`` are what that commit's own ``plif train`` set-up functions give (611aecf and later).
Reported: each side's median and range over the rounds, and the median and range of the per-round
ratios A/B.

    python benchmarks/ab_commits.py 1137611 HEAD --rounds 3
    python benchmarks/ab_commits.py 1137611 HEAD --step --rounds 5
    python benchmarks/ab_commits.py 611aecf HEAD --step --net gesture --steps 5 --rounds 5
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


# --net cpu, inside a checkout (its own plif): only APIs that 1137611 and later share (the step the
# docs/lab timings since 1137611 measured: build_network's defaults, no --amp)
_CPU_STEP = """
import json, time, torch
from plif.models import build_network
import plif.train.loop as L
try:
    from plif.train.optim import adam  # its home since the optimiser left loop.py
except ImportError:
    adam = L.adam
torch.manual_seed(0)
net = build_network("{c32k3s1-BN-PLIF-MPk2s2}*2-DP-FC512-PLIF-DP-FC100-PLIF-APk10s10", (1, 28, 28), 4).train()
opt = adam(net.parameters(), 2e-3)
batch = (torch.rand(64, 1, 28, 28), torch.randint(0, 10, (64,)))
L.train_epoch(net, opt, [batch] * 3, 10)  # warm-up
c, w = time.process_time(), time.perf_counter()
L.train_epoch(net, opt, [batch] * STEPS, 10)
print(json.dumps({"cpu_ms": 1e3 * (time.process_time() - c) / STEPS, "wall_ms": 1e3 * (time.perf_counter() - w) / STEPS}))
"""


# --net paper / gesture: (dataset, preset, T, batch) as plif train resolves them; "paper": the paper's
# Fashion-MNIST network (its zoo entry) at T 8, batch 16; "gesture": the paper's DVS128 Gesture network
# at T 20, batch 1, fed random event frames [T, B, 2, 128, 128]
NETS = {"paper": ("fashion-mnist", "paper", 8, 16), "gesture": ("dvs128-gesture", "paper", 20, 1)}

# inside a checkout (its own plif): the product's own set-up (resolve_config, resolve_speed,
# setup_model, setup_optimizer, setup_parallel: the functions plif train's session calls, in 611aecf
# and later) and its plif.train.loop.train_epoch under its --amp, on batches of the dataset's shape
_STEP = """
import inspect, json, sys, time, torch
import plif.train.loop as L
from plif.catalog import get_dataset
from plif.train.config import TrainConfig, resolve_config
from plif.train.graph import autocast_context
from plif.train.session import setup_model, setup_optimizer, setup_parallel
from plif.train.speed import resolve_speed

dataset, preset, T, batch, steps = json.loads(sys.argv[1])
dev = torch.device("cpu")
cfg = resolve_config(TrainConfig(dataset=dataset, preset=preset, T=T, batch_size=batch, device="cpu", seed=0))
cfg, _ = resolve_speed(cfg, "cpu", 1)
model = setup_model(cfg, dev)
opt, _ = setup_optimizer(model, cfg, dev)
net = setup_parallel(model, cfg, dev, 1)
entry = get_dataset(dataset)
gen = torch.Generator().manual_seed(0)
if entry.is_event:  # synthetic event frames, time-major as the event pipeline hands them over
    x = torch.poisson(torch.full((T, batch, *entry.input_shape), 0.3), generator=gen)
else:  # one image batch; the network repeats it over T
    x = torch.rand(batch, *entry.input_shape, generator=gen)
batches = [(x, torch.randint(0, entry.num_classes, (batch,), generator=gen))]
kw = {"loss": cfg.loss_function()} if "loss" in inspect.signature(L.train_epoch).parameters else {}
with autocast_context(dev, cfg.amp):
    L.train_epoch(net, opt, batches * 2, cfg.num_classes, **kw)  # warm-up
    c, w = time.process_time(), time.perf_counter()
    L.train_epoch(net, opt, batches * steps, cfg.num_classes, **kw)
    cpu, wall = time.process_time() - c, time.perf_counter() - w
print(json.dumps({"cpu_ms": 1e3 * cpu / steps, "wall_ms": 1e3 * wall / steps, "network": cfg.network,
                  "memory": str(cfg.memory), "amp": cfg.amp}))
"""


def step_once(tree: Path, args) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree / "src"), "OMP_NUM_THREADS": str(args.threads or 1)}
    code = (["-c", _CPU_STEP.replace("STEPS", str(args.steps))] if args.net == "cpu" else
            ["-c", _STEP, json.dumps([*NETS[args.net], args.steps])])
    proc = subprocess.run([sys.executable, *code], env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"the step benchmark failed on {tree.name}:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def step_summary(a: list[float], b: list[float]) -> str:
    """Each side's median CPU ms per step and range, and the per-round ratios A/B (B's speed against A's;
    each round's pair ran back to back, so it shares that moment's load)."""
    ratios = [x / y for x, y in zip(a, b)]
    return (f"CPU ms per step, median [min-max] over {len(a)} rounds: A {statistics.median(a):.1f} [{min(a):.1f}-{max(a):.1f}], "
            f"B {statistics.median(b):.1f} [{min(b):.1f}-{max(b):.1f}] -> speed B/A {statistics.median(a) / statistics.median(b):.3f}; "
            f"per-round A/B median {statistics.median(ratios):.3f} [{min(ratios):.3f}-{max(ratios):.3f}]")


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
    p.add_argument("--net", choices=("cpu", *NETS), default="cpu",
                   help="--step's network: cpu (preset, B64), paper (Fashion-MNIST, T8 B16), gesture (T20 B1) [cpu]")
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
                        if r == 0 and "network" in res:
                            print(f"{name} {trees[name].name}: {res['network']} --memory {res['memory']} "
                                  f"--amp {res['amp']}", flush=True)
                        print(f"round {r + 1} {name} {trees[name].name}: step {res['cpu_ms']:7.1f} ms CPU  "
                              f"{res['wall_ms']:7.1f} ms wall", flush=True)
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
            print(step_summary([x["cpu_ms"] for x in runs["A"]], [x["cpu_ms"] for x in runs["B"]]))
            return
        med = {n: {k: statistics.median(x[k] for x in runs[n]) for k in ("samples_per_s", "cpu_s")} for n in runs}
        print(f"median samples/s: A {med['A']['samples_per_s']:.1f}, B {med['B']['samples_per_s']:.1f} "
              f"-> B/A {med['B']['samples_per_s'] / med['A']['samples_per_s']:.3f}; "
              f"CPU seconds per run: A {med['A']['cpu_s']:.1f}, B {med['B']['cpu_s']:.1f} "
              f"-> A/B {med['A']['cpu_s'] / med['B']['cpu_s']:.3f}")


if __name__ == "__main__":
    main()
