"""The prepared GPU benchmark: two calls of under 9 minutes each on one H100/H200, every number into JSON.

    python benchmarks/gpu/run.py --data-dir FASHION_MNIST_GZ_DIR --out OUT_DIR [--spikingjelly-wheels DIR] \
        [--stages first|second|NAME,...]

Stages (``--stages``: a plan, stage names, or both, comma-separated; each guarded: a failing stage
records its error and the next one runs).  Every stage has a time budget: it stops starting new
measurements when its budget is nearly spent and is stopped (SIGALRM) when it is spent, keeping what
it measured, so a slow stage cannot starve the ones after it.  Budgets and plans live in
``gpu_stages.STAGES`` and ``gpu_stages.PLANS`` (``--stage-budgets name=seconds,...`` changes
budgets).  Estimates from the H200 run (commit 493dc45, ``docs/gpu/h200-2026-11-27/``), "measured"
where that run timed it; an H100 takes a little longer:

  plan first (the default; --budget 500): the checks, and Fashion-MNIST with the new defaults
  stage          budget  estimate
  (start-up)          -   10 s: Python, torch, CUDA context
  spikingjelly       20    2 s (measured 1.6 s): pip install --no-index --no-deps from the wheels folder
  grid               50   40 s (measured 35 s): kernel grid vs the reference, fp32/bf16/fp16, fresh Triton
                           compiles; cases stop after --grid-seconds
  compile           100   60 s: a narrow paper network under torch.compile(fullgraph), batch dynamic, vs
                           eager at 3 batch sizes; a cold Inductor (its first backward took > 40 s)
  sync               75   30 s: the captured step vs eager, and the step with Inductor's network inside
                           (plif train's default) vs the compiled eager step, from one seed; both
                           captured steps and evaluations and the eager step under
                           set_sync_debug_mode("error")
  neuron             35   18 s (measured 17.8 s): plif bench neuron, 3 cases x triton/bptt/reference/
                           SpikingJelly, eager call time, kernels' device time
  train              90   35 s (measured 22 s for 16 rows): Fashion-MNIST paper step, B16 and B128:
                           naive, auto, cuda-graph, cuda-graph+bf16, compile, compile+graph,
                           spikingjelly, spikingjelly+bf16, spikingjelly+graph, spikingjelly+cuda-graph
                           (+bf16: SpikingJelly's own StaticCudaGraph mode), and cuda-graph without
                           TF32; kernels, device time and the bound per step
  fuse            120   ~90 s (not yet measured; 4 Inductor compiles last): plif.fuse on networks written by hand, B16: the paper's
                           Fashion-MNIST network by hand + fuse (a stride-0 image) beside build_network's,
                           a SEW residual network fused and as written; eager, cuda-graph, compile+graph
  residual           60   20 s: one training step of sew-resnet18 (CIFAR-10, T4 B16) and the SEW 7B-Net
                           (DVS128 Gesture, T16 B16): plif, plif+bf16, SpikingJelly eager and bf16
                           (gpu_residual.py, issue 47)
  protocol         rest   the paper protocol as plif train --preset paper runs it by default for what is
                           left, at most --protocol-seconds (100: Inductor's compile, then ~15 epochs)
  expected ~340 s; every stage at its budget: ~500 s (residual takes its 60 s from the protocol)

  plan second (--stages second --budget 440): the paper networks users train for hours, B16
  spikingjelly       20    2 s
  block              90   ~150 s uncapped (h38t's estimate; cut by its budget, keeping what it measured):
                           plif bench block: the fused BN->PLIF->max-pool kernels checked against the
                           reference on the device, then against the composed ops on the Gesture and
                           CIFAR-10 block shapes, fp32 and bf16, and the backward's chunk (10 vs 20 steps)
  cifar10            90   60 s: CIFAR-10, T = 8, and per network below: auto, cuda-graph,
                           cuda-graph+bf16, cuda-graph+bf16+channels-last, spikingjelly,
                           spikingjelly+bf16, spikingjelly+cuda-graph(+bf16), compile+graph (last: one
                           Inductor compile, ~40 s); auto
                           and cuda-graph also with --memory none; kernels, device time, % of bound
  dvs128-gesture    100   70 s: DVS128 Gesture, T = 20, synthetic event frames (45 ms a step)
  bound              45   ~20 s (not yet measured): plif bench bound, the eager step against its own
                           products run alone, SpikingJelly's beside, fp32/bf16: Fashion-MNIST paper
                           B16 and DVS128 Gesture T20 B16 (issue 55)
  cifar10-dvs       100   70 s: CIFAR10-DVS, T = 20, synthetic event frames
  memory             90   55 s (measured 55.4 s): DVS128 Gesture T20 B16, naive / spikingjelly / default /
                           exact / low, a fresh process each
  expected ~380 s; every stage at its budget: ~545 s (cut by --budget: memory, last, keeps what it measured)

  not in a plan: protocol-full (520 s), all 64 epochs of the protocol, a call of its own.

The device lends 15 minutes in all and a machine start costs 1-2: run the first plan, then the
second on the same warm machine with what is left as its --budget.  Without CUDA (or with
``--dry-run``) every stage runs on the CPU at tiny sizes, so CI checks the script end to end.

Writes each stage's JSON into a work folder (``--work``; default a temporary one) and, after every
stage, packs that folder (run folders without checkpoints) into ``OUT/results.tar.gz``; ``OUT`` gets
only ``results.tar.gz``, ``summary.json`` and ``summary.txt`` (``run.sh`` adds ``log.txt``): the
device returns at most 8 files.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tarfile
import tempfile
import threading
import time
import traceback
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_stages import PLANS, STAGES  # noqa: E402
from gpu_summary import summary_lines  # noqa: E402

from plif.atomic import atomic_write_text  # noqa: E402

BUDGETS = {name: budget for name, (_, budget) in STAGES.items()}  # None: --protocol-seconds, capped by what is left
DEFAULT_STAGES = "first"
RESERVE_S = 10  # left at the end of the run for the summary and the tarball
PACKED = "results.tar.gz"


class StageTimeout(Exception):
    """Raised by the alarm when a stage's budget is spent."""


class Context:
    def __init__(self, args):
        self.args = args
        self.out = Path(args.out)
        self.work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="plif-gpu-"))
        self.dry = args.dry_run or not torch.cuda.is_available()
        self.device = torch.device("cpu" if self.dry else "cuda")
        self.t0 = time.perf_counter()

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0


class Stage:
    """What a stage function gets: its deadline (``time.monotonic()``) and a dict for partial results."""

    def __init__(self, budget: float):
        self.budget = budget
        # stop starting new measurements a little before the alarm, which ends the stage
        self.deadline = time.monotonic() + budget - min(5.0, 0.1 * budget)
        self.partial: dict = {}


def _write(ctx: Context, name: str, data: dict) -> None:
    atomic_write_text(ctx.work / f"{name}.json", json.dumps(data, indent=1, default=str) + "\n")


def pack(ctx: Context) -> Path:
    """Everything in the work folder but checkpoints and locks, as ``OUT/results.tar.gz`` (atomic)."""
    target = ctx.out / PACKED
    tmp = ctx.out / f".{PACKED}.tmp"
    with tarfile.open(tmp, "w:gz") as tar:
        for path in sorted(ctx.work.rglob("*")):
            rel = path.relative_to(ctx.work)
            if path.is_file() and not path.is_symlink() and "checkpoints" not in rel.parts and path.name != ".lock":
                tar.add(path, arcname=str(rel))
    os.replace(tmp, target)
    return target


def _alarm(signum, frame):
    raise StageTimeout()


def run_stage(ctx: Context, name: str, fn, budget: float) -> dict:
    """Run one stage within ``budget`` seconds; its record (result, error, seconds) is written to
    ``<work>/<name>.json``.  A stage stopped by its budget keeps its partial result."""
    print(f"\n=== {name} ({ctx.elapsed():.0f}s into the run, budget {budget:.0f}s) ===", flush=True)
    t = time.perf_counter()
    rec = {"stage": name, "ok": False, "error": None, "result": None, "budget_s": budget, "timed_out": False}
    st = Stage(budget)
    alarm = threading.current_thread() is threading.main_thread()
    if alarm:
        previous = signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, budget)
    try:
        result = fn(ctx, st)
        rec["result"] = result
        rec["ok"] = bool(result.get("ok", True)) if isinstance(result, dict) else True
    except StageTimeout:
        rec.update(error=f"stopped by its time budget of {budget:.0f}s", timed_out=True, result=st.partial or None)
    except Exception as e:  # noqa: BLE001  (one stage's failure must not lose the others)
        rec.update(error=f"{type(e).__name__}: {e}", traceback=traceback.format_exc()[-4000:], result=st.partial or None)
        print(rec["traceback"], file=sys.stderr, flush=True)
    finally:
        if alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        if ctx.device.type == "cuda":
            try:
                torch.cuda.set_sync_debug_mode("default")
                torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001  (a stage stopped mid-capture can leave the device broken)
                rec["device_after"] = f"{type(e).__name__}: {e}"
    rec["seconds"] = round(time.perf_counter() - t, 2)
    _write(ctx, name, rec)
    print(f"--- {name}: {'ok' if rec['ok'] else 'FAILED'} in {rec['seconds']:.1f}s"
          + (f" ({rec['error']})" if rec["error"] else ""), flush=True)
    return rec


def _budgets(text: str | None) -> dict:
    budgets = dict(BUDGETS)
    for item in filter(None, (s.strip() for s in (text or "").split(","))):
        name, _, value = item.partition("=")
        if name not in budgets:
            raise ValueError(f"--stage-budgets: unknown stage {name!r}; valid: {', '.join(budgets)}")
        try:
            budgets[name] = float(value)
        except ValueError:
            raise ValueError(f"--stage-budgets: {item!r} is not name=seconds") from None
    return budgets


def expand_stages(text: str) -> list[str]:
    """``--stages``: plan names become their stages, in order, each stage once."""
    wanted = []
    for item in filter(None, (s.strip() for s in text.split(","))):
        if item not in PLANS and item not in STAGES:
            raise ValueError(f"--stages: unknown {item}; valid: {', '.join(PLANS)}, {', '.join(STAGES)}")
        wanted += [s for s in PLANS.get(item, (item,)) if s not in wanted]
    return wanted


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", required=True, help="folder with the Fashion-MNIST .gz files")
    p.add_argument("--out", required=True, help="folder for results.tar.gz and the summary (created)")
    p.add_argument("--work", help="folder for the stages' files before packing (default: a temporary one)")
    p.add_argument("--spikingjelly-wheels", help="folder of SpikingJelly 2.0 and loguru wheels to install offline")
    p.add_argument("--dry-run", action="store_true", help="tiny CPU sizes even where CUDA is present")
    p.add_argument("--budget", type=float, default=500.0, help="seconds for the whole run (the protocol gets the rest)")
    p.add_argument("--protocol-seconds", type=float, default=100.0, help="at most this long for the protocol stage")
    p.add_argument("--grid-seconds", type=float, default=35.0, help="stop adding grid cases after this long")
    p.add_argument("--stage-budgets", help="name=seconds,... to change stage budgets (e.g. memory=60)")
    p.add_argument("--stages", default=DEFAULT_STAGES,
                   help=f"comma-separated plans ({', '.join(f'{k}: {chr(44).join(v)}' for k, v in PLANS.items())}) "
                        f"and stage names (default {DEFAULT_STAGES}; also protocol-full)")
    return p


def main(argv=None) -> int:
    p = _parser()
    args = p.parse_args(argv)
    try:
        budgets = _budgets(args.stage_budgets)
    except ValueError as e:
        p.error(str(e))
    try:
        wanted = expand_stages(args.stages)
    except ValueError as e:
        p.error(str(e))
    if not args.spikingjelly_wheels and "spikingjelly" in wanted:
        wanted.remove("spikingjelly")
    ctx = Context(args)
    ctx.out.mkdir(parents=True, exist_ok=True)
    ctx.work.mkdir(parents=True, exist_ok=True)
    print(f"plif GPU benchmark: device {ctx.device}{' (dry run)' if ctx.dry else ''}, torch {torch.__version__}, "
          f"work folder {ctx.work}", flush=True)
    from plif.neurons import backend_status
    print("neuron backends: " + "; ".join(f"{k} {v}" for k, v in backend_status().items()), flush=True)
    recs = {}
    for name in wanted:
        left = args.budget - ctx.elapsed() - RESERVE_S
        budget = min(args.protocol_seconds if budgets[name] is None else budgets[name], left)
        if budget < 3:
            recs[name] = {"stage": name, "ok": False, "error": f"not run: {max(left, 0):.0f}s left of the run's budget",
                          "result": None, "budget_s": 0.0, "seconds": 0.0}
            _write(ctx, name, recs[name])
            continue
        recs[name] = run_stage(ctx, name, STAGES[name][0], budget)
        pack(ctx)
    header = (f"plif GPU benchmark — {'CPU DRY RUN' if ctx.dry else torch.cuda.get_device_name(0)}, "
              f"torch {torch.__version__}, {ctx.elapsed():.0f}s")
    lines = summary_lines(header, recs)
    print("\n" + "\n".join(lines), flush=True)
    summary = {"dry_run": ctx.dry, "device": str(ctx.device), "torch": torch.__version__,
               "gpu": None if ctx.dry else torch.cuda.get_device_name(0), "seconds": round(ctx.elapsed(), 1),
               "packed": PACKED, "stages": {k: {"ok": v["ok"], "error": v["error"], "seconds": v["seconds"],
                                                "budget_s": v["budget_s"]} for k, v in recs.items()}}
    for target in (ctx.work, ctx.out):
        atomic_write_text(target / "summary.txt", "\n".join(lines) + "\n")
        atomic_write_text(target / "summary.json", json.dumps(summary, indent=1) + "\n")
    pack(ctx)
    return 0 if all(r["ok"] for r in recs.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
