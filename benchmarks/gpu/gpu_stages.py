"""Every stage of the GPU script (``benchmarks/gpu/run.py`` runs them) with its time budget, the two
plans that split them into calls of under 9 minutes each, and the speed stages themselves (the
correctness stages are :mod:`gpu_checks`).  Each ``stage_x(ctx, st)`` measures one thing and returns
a JSON-able dict; ``st.deadline`` (``time.monotonic()``) is its time budget, ``st.partial`` what it
has measured so far (kept if the budget stops it).  On the CPU (``ctx.dry``) every stage runs at
tiny sizes, so CI checks the whole script.

A new stage is one function here (or anywhere importable) and one entry in :data:`STAGES`, then its
name in a plan of :data:`PLANS`."""
from __future__ import annotations

import json
import sys
import time
import traceback
from dataclasses import asdict

import torch

from gpu_checks import stage_compile, stage_grid, stage_spikingjelly, stage_sync
from gpu_residual import stage_residual
from plif.bench.memory import select_configs

DRY_CASE = ("dry-T4-B2-C8-8x8", (4, 2, 8, 8, 8))
MEMORY_CONFIGS = select_configs("naive", "spikingjelly", "default", "exact", "low")  # plif bench memory's names
TRAIN_VARIANTS = ("naive", "auto", "cuda-graph", "cuda-graph+bf16", "compile", "compile+graph", "spikingjelly",
                  "spikingjelly+bf16", "spikingjelly+graph", "spikingjelly+cuda-graph", "spikingjelly+cuda-graph+bf16")
# the paper networks users train for hours: plif's eager step, the captured one (compiled inside,
# bf16, bf16 with channels-last convolutions), SpikingJelly eager and under its own AMP (bf16
# autocast), and under its own CUDA-graph execution mode; compile+graph last, since its Inductor compile is the one cost that may not fit
NET_VARIANTS = ("auto", "cuda-graph", "cuda-graph+bf16", "cuda-graph+bf16+channels-last", "spikingjelly",
                "spikingjelly+bf16", "spikingjelly+cuda-graph", "spikingjelly+cuda-graph+bf16", "compile+graph")
NET_MEMORY_NONE = ("auto", "cuda-graph")  # also measured with --memory none (the composed layers) beside the default


def _dry_case() -> str:
    from plif.bench import neuron as bn

    bn.CASES.setdefault(*DRY_CASE)
    return DRY_CASE[0]


# ---------------------------------------------------------------------------------- speed
def stage_neuron(ctx, st) -> dict:
    """``plif bench neuron``: eager call time and the kernels' device time against the copy bound."""
    from plif.bench import neuron as bn

    if ctx.dry:
        cases, backends, reps, budget = [_dry_case()], ["cpu", "bptt"], 2, 0.5
    else:
        cases, backends, reps, budget = None, None, 10, 3.0  # every standard case and backend
    rows = bn.run_neuron_bench(cases, backends, ctx.device, torch.float32, ("fwd", "fwd+bwd"), reps, budget,
                               deadline=st.deadline)
    print(bn.format_table(rows), flush=True)
    return {"machine": bn.machine_description(ctx.device), "rows": [asdict(r) for r in rows]}


def _train_rows(ctx, st, dataset, plan, batches, warmup, iters, T, network=None) -> dict:
    """``plan``: ``(variant, memory, tf32)`` rows of ``plif bench train`` (memory None: ``plif train``'s
    default), one at a time (a failing one keeps the others' numbers), rows kept as they come."""
    from plif.bench.neuron import machine_description
    from plif.bench.train import TrainBenchResult, bench_train, fill_ratios, format_train_table, memory_choice

    rows, errors = [], {}
    st.partial.update(rows=rows, errors=errors)
    for v, memory, tf32 in plan:
        name = v + ("" if memory is None else f" --memory {memory}") + ("" if tf32 else " --no-tf32")
        try:
            rows += [asdict(r) for r in bench_train(dataset, batches, str(ctx.device), [v], warmup, iters, T,
                                                    deadline=st.deadline, network=network, memory=memory, tf32=tf32)]
        except Exception as e:  # noqa: BLE001
            errors[name] = f"{type(e).__name__}: {e}"
            print(f"variant {name} failed: {errors[name]}", file=sys.stderr, flush=True)
        if ctx.device.type == "cuda":
            torch.cuda.empty_cache()
    results = fill_ratios([TrainBenchResult(**r) for r in rows])
    print(format_train_table(results, f"plif bench train — {dataset} on {ctx.device}"), flush=True)
    return {"ok": not errors, "machine": machine_description(ctx.device), "dataset": dataset, "T": T,
            "network": network, "memory_default": memory_choice(None)[0], "rows": [asdict(r) for r in results],
            "errors": errors}


def stage_train(ctx, st) -> dict:
    """``plif bench train`` on the paper's Fashion-MNIST network, B16 and B128, with kernels per step
    (TF32 on, as ``plif train``; the captured step also without it)."""
    if ctx.dry:
        return _train_rows(ctx, st, "fashion-mnist", [("naive", None, True), ("auto", None, True),
                                                      ("spikingjelly", None, True)], (2,), 0, 1, 2)
    plan = [(v, None, True) for v in TRAIN_VARIANTS] + [("cuda-graph", None, False)]
    return _train_rows(ctx, st, "fashion-mnist", plan, (16, 128), 3, 20, None)


def _net_stage(dataset: str):
    def stage(ctx, st) -> dict:
        """One paper network users train for hours, batch 16 at its T, on synthetic input: every
        variant of :data:`NET_VARIANTS` with the product's --memory, and :data:`NET_MEMORY_NONE`
        with --memory none; each row with kernels, device time and its bound."""
        from plif.catalog import get_dataset

        entry = get_dataset(dataset)
        if ctx.dry:  # the dataset's CPU-sized network, one step of one sample
            plan = [("auto", None, True), ("auto", "none", True), ("spikingjelly", None, True),
                    ("spikingjelly+bf16", None, True)]
            out = _train_rows(ctx, st, dataset, plan, (1,), 0, 1, 1, entry.network_string(cpu=True))
        else:
            plan = [(v, None, True) for v in NET_VARIANTS] + [(v, "none", True) for v in NET_MEMORY_NONE]
            out = _train_rows(ctx, st, dataset, sorted(plan, key=lambda p: p[0] == "compile+graph"), (16,), 2, 5, None)
        out["input"] = (f"synthetic event frames [T, B, {', '.join(map(str, entry.input_shape))}], Poisson counts "
                        "with mean 0.3" if entry.is_event else f"one random image batch [B, "
                        f"{', '.join(map(str, entry.input_shape))}], repeated over T")
        return out
    stage.__name__ = f"stage_{dataset.replace('-', '_')}"
    return stage


def stage_bound(ctx, st) -> dict:
    """``plif bench bound``: plif's eager step against its own convolutions and matrix products run
    alone (recorded from the step), SpikingJelly's eager step beside it, fp32 and bf16, on the paper's
    Fashion-MNIST network (B16) and DVS128 Gesture's (T20 B16, synthetic event frames)."""
    from plif.bench.neuron import machine_description
    from plif.bench.step_bound import bench_step_bound, format_bound_table

    out = {"machine": machine_description(ctx.device), "networks": {}}
    st.partial.update(out)
    if ctx.dry:
        plan = [("fashion-mnist", dict(batch=2, T=2, rounds=1, warmup=0, precisions=["fp32"],
                                       network="c4k3s1-BN-PLIF-MPk2s2-FC10-PLIF"))]
    else:
        plan = [("fashion-mnist", dict(batch=16, rounds=10)), ("dvs128-gesture", dict(batch=16, rounds=5))]
    for dataset, kw in plan:
        if time.monotonic() > st.deadline - 10:
            out["networks"][dataset] = {"not run": "time budget spent"}
            continue
        rows = bench_step_bound(dataset, device=str(ctx.device), **kw)
        print(format_bound_table(rows, f"plif bench bound — {dataset} on {ctx.device}", top=5), flush=True)
        out["networks"][dataset] = {"settings": {k: v for k, v in kw.items()},
                                    "rows": [{**asdict(r), "over_bound": r.over_bound,
                                              "over_spikingjelly": r.over_spikingjelly} for r in rows]}
    return out


def stage_memory(ctx, st) -> dict:
    """``plif bench memory`` on DVS128 Gesture, T20 B16: each configuration in a fresh process with its
    share of the stage's time; peaks against naive's."""
    from plif.bench.memory import bench_memory

    # the dry run: N-MNIST's smaller network (34x34 input), the same fresh-process mechanism
    network, configs, T, batch = (("nmnist", ("low",), 1, 1) if ctx.dry
                                  else ("dvs128-gesture", MEMORY_CONFIGS, 20, 16))
    rows = bench_memory([network], configs, (batch,), T, 2, str(ctx.device), threads=2 if ctx.dry else None,
                        default_rss=False, timeout=600, deadline=st.deadline)
    naive = next((r for r in rows if r.config == "naive" and r.error is None), None)
    out = {"network": network, "T": T, "batch": batch,
           "what": "CUDA max_memory_allocated" if not ctx.dry else "live peak RSS",
           "rows": [asdict(r) for r in rows],
           "vs_naive": {r.config: r.peak_mb / naive.peak_mb for r in rows if naive and r.error is None}}
    return {"ok": all(r.error is None for r in rows), **out}


def stage_block(ctx, st) -> dict:
    """The fused block's Triton kernels against the composed ops (:mod:`plif.bench.block`): a check
    against the reference on the device, then device time and % of the copy bound on the DVS128
    Gesture and CIFAR-10 block shapes, and the backward's time-chunk length (10 against 20 steps).
    The stage is ok when the check is."""
    from plif.bench.block import run_block_bench

    result = run_block_bench(ctx.device, dry=ctx.dry, deadline=st.deadline, partial=st.partial)
    return {"ok": result["check_ok"], **result}


FUSE_VARIANTS = ("eager", "cuda-graph", "compile+graph")  # the step as it runs, captured, compiled inside the capture


def _fuse_nets():
    """The hand-written networks of ``benchmarks/fuse_nets.py`` (``plif.fuse``'s CPU benchmark has them too)."""
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import fuse_nets

    return fuse_nets


def _fuse_step(model, variant: str, x, y, dev):
    """``plif train``'s step of ``model`` as ``variant`` runs it: eagerly, or captured by the graph
    trainer (with Inductor's compiled model inside for ``compile+graph``)."""
    from plif.train.graph import GraphTrainer
    from plif.train.loop import train_step
    from plif.train.optim import adam, graph_adam

    model = model.to(dev).train()
    if variant == "eager":
        opt = adam(model.parameters(), 1e-3)
        return lambda: train_step(model, opt, x, y, 10)
    trainer = GraphTrainer(model, graph_adam(model.parameters(), 1e-3, dev), 10, dev,
                           net=torch.compile(model) if variant.startswith("compile") else None)
    return lambda: trainer.train_step(x, y)


def stage_fuse(ctx, st) -> dict:
    """``plif.fuse`` on networks written by hand (issue 46), B16: the paper's Fashion-MNIST network
    written with plif's layers and fused, fed a static image as a stride-0 view, beside
    ``build_network``'s (T = 8), and a residual network with its own forward (a stem, two
    downsampling blocks; T = 4 event frames) fused and as written; each as :data:`FUSE_VARIANTS`,
    ms per step (the memory mode is ``fused`` throughout).  Ratios: by hand / notation, as written / fused."""
    import plif
    from plif.bench.neuron import machine_description

    nets = _fuse_nets()
    dev = ctx.device
    T, B, c, size, hidden, variants, warmup, iters = ((2, 2, 4, 8, 16, ("eager",), 0, 1) if ctx.dry
                                                      else (8, 16, 32, 32, 2048, FUSE_VARIANTS, 3, 10))
    g = torch.Generator().manual_seed(0)
    image, frames = torch.rand(B, 1, 28, 28, generator=g).to(dev), torch.poisson(
        torch.full((T // 2 or 1, B, 2, size, size), 0.3), generator=g).to(dev)
    y = torch.randint(0, 10, (B,), generator=g).to(dev)
    paper = (f"{{c{c}k3s1-BN-PLIF-MPk2s2}}*2-DP-FC{hidden}-PLIF-DP-FC100-PLIF-APk10s10" if ctx.dry
             else "{c128k3s1-BN-PLIF-MPk2s2}*2-DP-FC2048-PLIF-DP-FC100-PLIF-APk10s10")
    by_hand = dict(c=c, hidden=hidden) if ctx.dry else {}
    cases = {
        "paper, build_network": (lambda: plif.build_network(paper, (1, 28, 28), T), image),
        "paper, by hand + plif.fuse": (lambda: plif.fuse(nets.StaticInput(nets.paper_net(**by_hand), T)), image),
        "residual, as written": (lambda: nets.ResNet(c=c, size=size, in_channels=2), frames),
        "residual, plif.fuse": (lambda: plif.fuse(nets.ResNet(c=c, size=size, in_channels=2)), frames),
    }
    rows, errors = [], {}
    st.partial.update(rows=rows, errors=errors)
    for v in variants:
        for name, (make, x) in cases.items():
            if time.monotonic() > st.deadline - 5:
                errors[f"{name} {v}"] = "not run: the stage's time budget was spent"
                continue
            try:
                torch.manual_seed(0)
                step = _fuse_step(make(), v, x, y, dev)
                for _ in range(warmup):
                    step()
                if dev.type == "cuda":
                    torch.cuda.synchronize(dev)
                t0 = time.perf_counter()
                for _ in range(iters):
                    step()
                if dev.type == "cuda":
                    torch.cuda.synchronize(dev)
                rows.append({"network": name, "variant": v, "ms_per_step": (time.perf_counter() - t0) / iters * 1e3})
            except Exception as e:  # noqa: BLE001
                errors[f"{name} {v}"] = f"{type(e).__name__}: {e}"
                print(f"fuse {name} {v} failed: {errors[f'{name} {v}']}", file=sys.stderr, flush=True)
            if dev.type == "cuda":
                torch.cuda.empty_cache()
    ms = {(r["network"], r["variant"]): r["ms_per_step"] for r in rows}
    ratios = {v: {k: ms[a, v] / ms[b, v] for k, a, b in (
        ("paper by hand / build_network", "paper, by hand + plif.fuse", "paper, build_network"),
        ("residual as written / fused", "residual, as written", "residual, plif.fuse")) if (a, v) in ms and (b, v) in ms}
        for v in variants}
    for r in rows:
        print(f"{r['network']:30s} {r['variant']:14s} {r['ms_per_step']:9.2f} ms", flush=True)
    return {"ok": not errors, "machine": machine_description(dev), "T": T, "B": B, "rows": rows, "ratios": ratios,
            "errors": errors}


# ------------------------------------------------------------------------------- protocol
def _protocol(ctx, st, epochs: int) -> dict:
    """The paper protocol on Fashion-MNIST as ``plif train --preset paper`` runs it by default (on CUDA
    the compiled network inside the captured step, TF32) in one run, stopped by ``--time-limit`` after
    the last epoch that fits the stage's time; eagerly if that run fails.  The first epoch includes
    Inductor's compile."""
    from plif.runs import read_metrics
    from plif.train import TrainConfig
    from plif.train.run import train_status
    from plif.train.stopping import job_age

    if ctx.dry:  # t_max fixed: the cpu preset's period otherwise follows --epochs
        base = dict(preset="cpu", max_train_samples=64, max_test_samples=32, device="cpu", t_max=2)
        epochs = min(epochs, 2)
    else:
        base = dict(preset="paper", device="cuda")
    attempts = []
    for name, fallback in (("default", {}), ("eager", {"cuda_graph": False, "compile": False}))[:1 if ctx.dry else 2]:
        left = st.deadline - time.monotonic()
        run_dir = ctx.work / ("protocol-run" + ("" if name == "default" else f"-{name}"))
        cfg = TrainConfig(dataset="fashion-mnist", data_dir=str(ctx.args.data_dir), out=str(run_dir), epochs=epochs,
                          time_limit=f"{job_age() + max(left, 1):.0f}", **base, **fallback)
        t = time.perf_counter()
        try:
            _, stopped = train_status(cfg, log=print)
        except Exception as e:  # noqa: BLE001
            attempts.append({"attempt": name, "error": f"{type(e).__name__}: {e}",
                             "traceback": traceback.format_exc()[-3000:]})
            print(f"protocol ({name}) failed: {e}", file=sys.stderr, flush=True)
            continue
        ran = json.loads((run_dir / "config.json").read_text())
        metrics = read_metrics(run_dir)
        return {"ok": True, "attempt": name, "ran": {k: ran[k] for k in ("cuda_graph", "compile", "tf32", "amp", "memory")},
                "failed_attempts": attempts, "run_dir": run_dir.name, "budget_s": left,
                "wall_s": time.perf_counter() - t, "stopped": stopped, "epochs_planned": epochs,
                "epochs": [{k: m[k] for k in ("epoch", "epoch_time_s", "train_time_s", "samples_per_s", "train_acc",
                                              "test_acc", "taus", "lr")} for m in metrics]}
    return {"ok": False, "failed_attempts": attempts}


def stage_protocol(ctx, st) -> dict:
    """As many epochs of the 64-epoch paper protocol as fit the stage's time: ``protocol`` gets what the
    run has left, ``protocol-full`` (all 64 epochs) a call of its own."""
    return _protocol(ctx, st, 64)


# name: (stage, budget in seconds; None: what the run has left, at most --protocol-seconds)
STAGES = {
    "spikingjelly": (stage_spikingjelly, 20),
    "grid": (stage_grid, 50),
    "compile": (stage_compile, 100),
    "sync": (stage_sync, 75),
    "neuron": (stage_neuron, 35),
    "train": (stage_train, 90),
    "fuse": (stage_fuse, 120),  # its compile+graph rows come last: a budget cut keeps the rest
    "protocol": (stage_protocol, None),
    "block": (stage_block, 90),
    "cifar10": (_net_stage("cifar10"), 90),
    "dvs128-gesture": (_net_stage("dvs128-gesture"), 100),
    "cifar10-dvs": (_net_stage("cifar10-dvs"), 100),
    "memory": (stage_memory, 90),
    "protocol-full": (stage_protocol, 520),
    "residual": (stage_residual, 60),  # issue 47: the residual zoo beside SpikingJelly (gpu_residual.py)
    "bound": (stage_bound, 45),  # issue 55: the step against its own products alone
}

# Two device calls of under 9 minutes each (the device has 15 in all, a machine start costs 1-2):
# "first" checks and times Fashion-MNIST with the new defaults, "second" the three big paper networks.
PLANS = {
    "first": ("spikingjelly", "grid", "compile", "sync", "neuron", "train", "fuse", "residual", "protocol"),
    "second": ("spikingjelly", "block", "cifar10", "dvs128-gesture", "bound", "cifar10-dvs", "memory"),
}
