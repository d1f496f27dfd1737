"""The GPU script's stages (``benchmarks/gpu/run.py`` runs them): each ``stage_x(ctx, st)`` measures
one thing and returns a JSON-able dict; ``st.deadline`` (``time.monotonic()``) is its time budget,
``st.partial`` what it has measured so far (kept if the budget stops it).  On the CPU (``ctx.dry``)
every stage runs at tiny sizes, so CI checks the whole script."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
import traceback
from dataclasses import asdict
from pathlib import Path

import torch

NARROW_FMNIST = "{c8k3s1-BN-PLIF-MPk2s2}*2-DP-FC64-PLIF-DP-FC100-PLIF-APk10s10"
DRY_CASE = ("dry-T4-B2-C8-8x8", (4, 2, 8, 8, 8))
MEMORY_CONFIGS = ("naive", "spikingjelly", "default", "exact", "low")
TRAIN_VARIANTS = ("naive", "auto", "cuda-graph", "cuda-graph+bf16", "spikingjelly", "spikingjelly+graph", "compile",
                  "compile+graph")
DVS_VARIANTS = ("auto", "cuda-graph", "spikingjelly", "spikingjelly+graph", "naive")
CANDIDATES_FILE = Path(__file__).with_name("candidates.py")


def _dry_case() -> str:
    from plif.bench import neuron as bn

    bn.CASES.setdefault(*DRY_CASE)
    return DRY_CASE[0]


# ---------------------------------------------------------------------------- set-up and checks
def stage_spikingjelly(ctx, st) -> dict:
    """Install every wheel of the wheels folder offline, without dependencies (SpikingJelly, loguru, and
    what else the folder carries, e.g. pooch and platformdirs), and say which neuron implementation
    SpikingJelly binds."""
    wheels = sorted(str(w) for w in Path(ctx.args.spikingjelly_wheels).glob("*.whl"))
    if not any(Path(w).name.startswith("spikingjelly-") for w in wheels):
        raise FileNotFoundError(f"no spikingjelly wheel in {ctx.args.spikingjelly_wheels}")
    cmd = [sys.executable, "-m", "pip", "install", "--no-index", "--no-deps", *wheels]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=max(5.0, st.deadline - time.monotonic()))
    if proc.returncode != 0:
        raise RuntimeError(f"pip failed ({proc.returncode}): {proc.stderr[-1500:]}")
    import importlib
    import importlib.metadata

    importlib.invalidate_caches()
    from plif.bench.spikingjelly import spikingjelly_path, spikingjelly_unavailable

    return {"version": importlib.metadata.version("spikingjelly"), "wheels": [Path(w).name for w in wheels],
            "unavailable": spikingjelly_unavailable(),
            "plif_neuron": spikingjelly_path(ctx.device)}


def _compile_check(ctx) -> dict:
    """A narrow paper network compiled with fullgraph vs eager at three batch sizes."""
    import torch._inductor.config as inductor_config

    from plif.models import build_network

    torch.manual_seed(0)
    net = build_network(NARROW_FMNIST, (1, 28, 28), 4).to(ctx.device)
    torch._dynamo.reset()
    compiled = torch.compile(net, fullgraph=True, backend="aot_eager" if ctx.dry else "inductor")
    with inductor_config.patch(fallback_random=True):  # dropout draws like eager
        rows = _compile_rows(ctx, net, compiled)
    ok = all(r["spike_mismatch"] < 0.01 and r["grad_rel_err"] < 1e-3 for r in rows)
    return {"ok": ok, "backend": "aot_eager" if ctx.dry else "inductor", "rows": rows}


def _compile_rows(ctx, net, compiled) -> list[dict]:
    rows = []
    for b in (16, 64, 5):
        x = torch.rand(b, 1, 28, 28, device=ctx.device) * 3
        outs, grads = [], []
        for fn in (compiled, net):
            net.zero_grad(set_to_none=True)
            torch.manual_seed(b)
            out = fn(x)
            out.float().square().mean().backward()
            outs.append(out.detach())
            grads.append([p.grad.clone() for p in net.parameters()])
        grad_err = max(float((a - e).abs().max() / (e.abs().max() + 1e-12)) for a, e in zip(*grads))
        rows.append({"batch": b, "spike_mismatch": float((outs[0] != outs[1]).float().mean()), "grad_rel_err": grad_err})
    return rows


def stage_grid(ctx, st) -> dict:
    """The kernel correctness grid on the device (cases until ``--grid-seconds``), then torch.compile."""
    from plif.kernels.check import Case, case_grid, run_case
    from plif.neurons import backend_status

    backend = "cpu" if ctx.dry else "triton"
    dtypes = ["float32"] if ctx.dry else ["float32", "bfloat16", "float16"]
    # the full grid in fp32, the quick one (every flag combination) in the low-precision dtypes: each
    # (variant, dtype) is a fresh Triton compile on a machine with an empty cache
    plan = [(c, d) for d in dtypes for c in case_grid(quick=ctx.dry or d != "float32")]
    if ctx.dry:
        plan = plan[::4]  # the script's plumbing; the grid itself is tests/kernels' business
    rows, t0, skipped = [], time.perf_counter(), 0
    cases_until = min(st.deadline, time.monotonic() + ctx.args.grid_seconds)
    for i, (case, dtype) in enumerate(plan):
        if time.monotonic() > cases_until:
            skipped = len(plan) - i
            print(f"grid: {time.perf_counter() - t0:.0f}s spent, {skipped} cases not run", flush=True)
            break
        rows.append(run_case(Case(**{**asdict(case), "dtype": dtype}), backend, str(ctx.device)))
    st.partial.update(cases=len(rows), rows=rows)
    failed = [r["case"] for r in rows if not r["ok"]]
    print(f"{len(rows) - len(failed)}/{len(rows)} cases ok" + (f"; FAILED: {failed[:20]}" if failed else ""), flush=True)
    try:
        comp = _compile_check(ctx)
    except Exception as e:  # noqa: BLE001
        comp = {"ok": False, "error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()[-3000:]}
    print(f"compile check: {comp}", flush=True)
    return {"ok": not failed and comp["ok"], "backend": backend, "backends": backend_status(), "dtypes": dtypes,
            "cases": len(rows), "not_run": skipped, "failed": failed, "rows": rows, "compile": comp}


def _step_losses(trainer, batches) -> list[float]:
    losses = []
    for x, y in batches:
        trainer.reset_totals()
        trainer.train_step(x, y)
        losses.append(trainer.totals()[0])
    return losses


def stage_sync(ctx, st) -> dict:
    """The graph step against the eager one from one seed; no host sync in graph or eager steps."""
    from plif.data.catalog import get_dataset
    from plif.models import build_network
    from plif.train.graph import GraphTrainer
    from plif.train.loop import train_step
    from plif.train.optim import adam, graph_adam

    entry = get_dataset("fashion-mnist")
    spec, T, b = (NARROW_FMNIST, 2, 4) if ctx.dry else (entry.network, entry.T, 16)
    dev = ctx.device
    gen = torch.Generator(device="cpu").manual_seed(0)
    batches = [(torch.rand(n, 1, 28, 28, generator=gen).to(dev) * 3, torch.randint(0, 10, (n,), generator=gen).to(dev))
               for n in [b] * 6]
    result = {}

    def fresh():
        torch.manual_seed(0)
        return build_network(spec, (1, 28, 28), T).to(dev)
    net_g, net_e = fresh(), fresh()
    trainer = GraphTrainer(net_g, graph_adam(net_g.parameters(), 1e-3, dev), 10, dev, capture=not ctx.dry)
    opt_e = graph_adam(net_e.parameters(), 1e-3, dev)  # same optimiser maths, no capture
    net_g.train()
    net_e.train()
    torch.manual_seed(1)
    g_losses = _step_losses(trainer, batches)
    torch.manual_seed(1)
    e_losses = [float(train_step(net_e, opt_e, x, y, 10)[0]) for x, y in batches]
    param_err = max(float((p - q).detach().abs().max()) for p, q in zip(net_g.parameters(), net_e.parameters()))
    loss_err = max(abs(a - e) / max(abs(e), 1e-12) for a, e in zip(g_losses, e_losses))
    result["graph_vs_eager"] = {"graph_losses": g_losses, "eager_losses": e_losses, "max_rel_loss_err": loss_err,
                                "max_abs_param_err": param_err, "captured": not ctx.dry}
    agree = loss_err < 1e-3 and param_err < 1e-3
    if ctx.dry:
        result["sync_free"] = "skipped: set_sync_debug_mode needs CUDA"
        return {"ok": agree, **result}
    eval_batches = [(x, y) for x, y in batches[:2]] + [(batches[2][0][:3], batches[2][1][:3])]
    trainer.evaluate(eval_batches, batch_size=b)  # captures the evaluation graph (capture synchronises)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    for x, y in batches:
        trainer.train_step(x, y)
    trainer.evaluate(eval_batches, batch_size=b, read=False)
    torch.cuda.set_sync_debug_mode("default")
    result["eval_after_sync_check"] = trainer.totals()
    net_a = fresh()
    opt_a = adam(net_a.parameters(), 1e-3, capturable=True)
    train_step(net_a, opt_a, *batches[0], 10)  # first call: kernels compile, state is created
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    for x, y in batches[1:]:
        train_step(net_a, opt_a, x, y, 10)
    torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
    result["sync_free"] = "ok: graph train step, graph evaluation (padded last batch) and eager auto step"
    return {"ok": agree, **result}


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


def _train_rows(ctx, st, dataset, variants, batches, warmup, iters, T) -> dict:
    """One variant at a time (a failing one keeps the others' numbers), rows kept as they come."""
    from plif.bench.neuron import machine_description
    from plif.bench.train import bench_train, fill_ratios, format_train_table

    rows, errors = [], {}
    st.partial.update(rows=rows, errors=errors)
    for v in variants:
        try:
            rows += [asdict(r) for r in bench_train(dataset, batches, str(ctx.device), [v], warmup, iters, T,
                                                    deadline=st.deadline)]
        except Exception as e:  # noqa: BLE001
            errors[v] = f"{type(e).__name__}: {e}"
            print(f"variant {v} failed: {errors[v]}", file=sys.stderr, flush=True)
        if ctx.device.type == "cuda":
            torch.cuda.empty_cache()
    from plif.bench.train import TrainBenchResult

    results = fill_ratios([TrainBenchResult(**r) for r in rows])
    print(format_train_table(results, f"plif bench train — {dataset} on {ctx.device}"), flush=True)
    return {"ok": not errors, "machine": machine_description(ctx.device), "dataset": dataset, "T": T,
            "rows": [asdict(r) for r in results], "errors": errors}


def stage_train(ctx, st) -> dict:
    """``plif bench train`` on the paper's Fashion-MNIST network, B16 and B128, with kernels per step."""
    if ctx.dry:
        return _train_rows(ctx, st, "fashion-mnist", ["naive", "auto", "spikingjelly"], (2,), 0, 1, 2)
    return _train_rows(ctx, st, "fashion-mnist", TRAIN_VARIANTS, (16, 128), 3, 20, None)


def stage_dvs(ctx, st) -> dict:
    """The DVS128 Gesture training step, T20 B16, on synthetic event frames (the step's cost does not
    depend on the events' values): plif auto and cuda-graph against SpikingJelly and naive."""
    if ctx.dry:
        out = _train_rows(ctx, st, "dvs128-gesture", ["auto", "spikingjelly", "naive"], (1,), 0, 1, 1)
    else:
        out = _train_rows(ctx, st, "dvs128-gesture", DVS_VARIANTS, (16,), 2, 5, 20)
    out["input"] = "synthetic event frames [T, B, 2, 128, 128], Poisson counts with mean 0.3"
    return out


def stage_memory(ctx, st) -> dict:
    """``plif bench memory`` on DVS128 Gesture, T20 B16: each configuration in a fresh process with its
    share of the stage's time; peaks against naive's."""
    from plif.bench.memory import bench_memory

    # the dry run: N-MNIST's smaller network (34x34 input), the same fresh-process mechanism
    network, configs, T, batch = (("nmnist", ("naive", "low"), 1, 1) if ctx.dry
                                  else ("dvs128-gesture", MEMORY_CONFIGS, 20, 16))
    rows = bench_memory([network], configs, (batch,), T, 2, str(ctx.device), threads=2 if ctx.dry else None,
                        default_rss=False, timeout=600, deadline=st.deadline)
    naive = next((r for r in rows if r.config == "naive" and r.error is None), None)
    out = {"network": network, "T": T, "batch": batch,
           "what": "CUDA max_memory_allocated" if not ctx.dry else "live peak RSS",
           "rows": [asdict(r) for r in rows],
           "vs_naive": {r.config: r.peak_mb / naive.peak_mb for r in rows if naive and r.error is None}}
    return {"ok": all(r.error is None for r in rows), **out}


def load_candidates(path: Path) -> tuple[list, str]:
    """``(CANDIDATES, note)`` from the candidates file; an absent file is no candidates, not a failure."""
    if not path.is_file():
        return [], f"no candidates ({path.name} absent)"
    spec = importlib.util.spec_from_file_location("plif_gpu_candidates", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # a dataclass in the file looks its module up there while it is built
    spec.loader.exec_module(mod)
    cands = list(getattr(mod, "CANDIDATES", []))
    return cands, "" if cands else f"no candidates ({path.name} lists none)"


def stage_candidates(ctx, st) -> dict:
    """Each candidate of ``candidates.py`` (issue #30) against the baseline, alternated in this process."""
    from plif.bench.candidates import run_candidates

    cands, note = load_candidates(Path(ctx.args.candidates))
    if ctx.args.candidate:
        wanted = set(ctx.args.candidate.split(","))
        cands = [c for c in cands if getattr(c, "name", None) in wanted]
    listed = [{"name": getattr(c, "name", None), "kind": getattr(c, "kind", None), "decides": getattr(c, "decides", None)}
              for c in cands]
    if not cands:
        print(note or "no candidates selected", flush=True)
        return {"note": note or "no candidates selected", "candidates": [], "rows": []}
    kw = (dict(neuron_cases=[_dry_case()], train_batches=(2,), T=1, rounds=2, train_network=NARROW_FMNIST)
          if ctx.dry else {})
    rows = run_candidates(cands, ctx.device, st.deadline, **kw)
    return {"ok": not any(r.note.startswith(("failed", "not a candidate")) for r in rows), "candidates": listed,
            "rows": [asdict(r) for r in rows]}


# ------------------------------------------------------------------------------- protocol
def _protocol(ctx, st, epochs: int) -> dict:
    """The paper protocol on Fashion-MNIST (``--preset paper --cuda-graph``) in one ``plif train`` run,
    stopped by ``--time-limit`` after the last epoch that fits the stage's time; eager if the graph
    run fails."""
    from plif.train import TrainConfig
    from plif.runs import read_metrics
    from plif.train.run import train_status
    from plif.train.stopping import job_age

    if ctx.dry:  # t_max fixed: the cpu preset's period otherwise follows --epochs
        base = dict(preset="cpu", max_train_samples=64, max_test_samples=32, device="cpu", t_max=2)
        epochs = min(epochs, 2)
    else:
        base = dict(preset="paper", device="cuda")
    attempts = []
    for cuda_graph in ([False] if ctx.dry else [True, False]):
        left = st.deadline - time.monotonic()
        run_dir = ctx.work / ("protocol-run" + ("-graph" if cuda_graph else ""))
        cfg = TrainConfig(dataset="fashion-mnist", data_dir=str(ctx.args.data_dir), out=str(run_dir),
                          cuda_graph=cuda_graph, epochs=epochs, time_limit=f"{job_age() + max(left, 1):.0f}", **base)
        t = time.perf_counter()
        try:
            _, stopped = train_status(cfg, log=print)
        except Exception as e:  # noqa: BLE001
            attempts.append({"cuda_graph": cuda_graph, "error": f"{type(e).__name__}: {e}",
                             "traceback": traceback.format_exc()[-3000:]})
            print(f"protocol with cuda_graph={cuda_graph} failed: {e}", file=sys.stderr, flush=True)
            continue
        metrics = read_metrics(run_dir)
        return {"ok": True, "cuda_graph": cuda_graph, "failed_attempts": attempts, "run_dir": run_dir.name,
                "budget_s": left, "wall_s": time.perf_counter() - t, "stopped": stopped, "epochs_planned": epochs,
                "epochs": [{k: m[k] for k in ("epoch", "epoch_time_s", "train_time_s", "samples_per_s", "train_acc",
                                              "test_acc", "taus", "lr")} for m in metrics]}
    return {"ok": False, "failed_attempts": attempts}


def stage_protocol(ctx, st) -> dict:
    """As many epochs of the 64-epoch paper protocol as fit the stage's time: ``protocol`` gets what the
    run has left, ``protocol-full`` (all 64 epochs, about 460 s on an H100) a call of its own."""
    return _protocol(ctx, st, 64)


STAGES = {"spikingjelly": stage_spikingjelly, "grid": stage_grid, "sync": stage_sync, "neuron": stage_neuron,
          "train": stage_train, "memory": stage_memory, "dvs": stage_dvs, "candidates": stage_candidates,
          "protocol": stage_protocol, "protocol-full": stage_protocol}
