"""The prepared GPU benchmark (issue #10/#11): one invocation, every number into JSON.

    python benchmarks/gpu/run.py --data-dir FASHION_MNIST_GZ_DIR --out OUT_DIR [--spikingjelly-wheels DIR]

Stages (each guarded: a failing stage records its error and the others still run and write):

  0 spikingjelly  install SpikingJelly from the wheels folder (``pip --no-index --no-deps``), if given
  a grid          fused kernel vs the reference on the correctness grid (CUDA: fp32/bf16/fp16), and a
                  ``torch.compile(fullgraph=True)`` of a narrow paper network vs eager, 3 batch sizes
  b sync          the ``--cuda-graph`` step and evaluation under ``set_sync_debug_mode("error")``, the
                  eager ``auto`` step likewise, and a graph run vs an eager run from the same seed
  c neuron        ``plif bench neuron`` on its three standard cases
  d train         ``plif bench train`` at batch 16 and 128: naive / spikingjelly / auto / compile /
                  cuda-graph / cuda-graph+bf16, with peak memory
  e protocol      the paper protocol on Fashion-MNIST (``--preset paper --cuda-graph``) for as many
                  epochs as fit in ``--protocol-seconds`` (resumed epoch by epoch), per-epoch time
                  and test accuracy

Without CUDA (or with ``--dry-run``) every stage runs on the CPU at tiny sizes, so CI can check
the script end to end.  Writes ``OUT/<stage>.json`` as each stage ends, then ``OUT/summary.json``
and ``OUT/summary.txt``.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import time
import traceback
from dataclasses import asdict
from pathlib import Path

import torch

from plif.atomic import atomic_write_text

NARROW_FMNIST = "{c8k3s1-BN-PLIF-MPk2s2}*2-DP-FC64-PLIF-DP-FC100-PLIF-APk10s10"


class Context:
    def __init__(self, args):
        self.args = args
        self.out = Path(args.out)
        self.dry = args.dry_run or not torch.cuda.is_available()
        self.device = torch.device("cpu" if self.dry else "cuda")
        self.t0 = time.perf_counter()

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0


def _write(ctx: Context, name: str, data: dict) -> None:
    atomic_write_text(ctx.out / f"{name}.json", json.dumps(data, indent=1, default=str) + "\n")


def run_stage(ctx: Context, name: str, fn) -> dict:
    print(f"\n=== {name} ({ctx.elapsed():.0f}s into the run) ===", flush=True)
    t = time.perf_counter()
    rec = {"stage": name, "ok": False, "error": None, "result": None}
    try:
        result = fn(ctx)
        rec["result"] = result
        rec["ok"] = bool(result.get("ok", True)) if isinstance(result, dict) else True
    except Exception as e:  # noqa: BLE001  (one stage's failure must not lose the others)
        rec["error"] = f"{type(e).__name__}: {e}"
        rec["traceback"] = traceback.format_exc()[-4000:]
        print(rec["traceback"], file=sys.stderr, flush=True)
    finally:
        if ctx.device.type == "cuda":
            torch.cuda.set_sync_debug_mode("default")
    rec["seconds"] = round(time.perf_counter() - t, 2)
    _write(ctx, name, rec)
    print(f"--- {name}: {'ok' if rec['ok'] else 'FAILED'} in {rec['seconds']:.1f}s"
          + (f" ({rec['error']})" if rec["error"] else ""), flush=True)
    return rec


# ------------------------------------------------------------------------------------ stages
def stage_spikingjelly(ctx: Context) -> dict:
    wheels = ctx.args.spikingjelly_wheels
    cmd = [sys.executable, "-m", "pip", "install", "--no-index", "--no-deps", "--find-links", str(wheels), "spikingjelly"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    if proc.returncode != 0:
        raise RuntimeError(f"pip failed ({proc.returncode}): {proc.stderr[-1500:]}")
    import importlib
    import importlib.metadata

    importlib.invalidate_caches()
    return {"version": importlib.metadata.version("spikingjelly")}


def _compile_check(ctx: Context) -> dict:
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


def _compile_rows(ctx: Context, net, compiled) -> list[dict]:
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


def stage_grid(ctx: Context) -> dict:
    from plif.kernels.check import Case, case_grid, run_case
    from plif.neurons import backend_status

    backend = "cpu" if ctx.dry else "triton"
    dtypes = ["float32"] if ctx.dry else ["float32", "bfloat16", "float16"]
    # the full grid in fp32, the quick one (every flag combination) in the low-precision dtypes: each
    # (variant, dtype) is a fresh Triton compile on a machine with an empty cache
    plan = [(c, d) for d in dtypes for c in case_grid(quick=ctx.dry or d != "float32")]
    rows, t0, skipped = [], time.perf_counter(), 0
    for i, (case, dtype) in enumerate(plan):
        if time.perf_counter() - t0 > ctx.args.grid_seconds:
            skipped = len(plan) - i
            print(f"grid: time budget of {ctx.args.grid_seconds:.0f}s spent, {skipped} cases not run", flush=True)
            break
        rows.append(run_case(Case(**{**asdict(case), "dtype": dtype}), backend, str(ctx.device)))
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


def stage_sync(ctx: Context) -> dict:
    from plif.models import build_network, get_entry
    from plif.train.graph import GraphTrainer
    from plif.train.loop import train_step
    from plif.train.optim import adam, graph_adam

    entry = get_entry("fashion-mnist")
    spec, T, b = (NARROW_FMNIST, 2, 4) if ctx.dry else (entry.network, entry.T, 16)
    dev = ctx.device
    gen = torch.Generator(device="cpu").manual_seed(0)
    batches = [(torch.rand(n, 1, 28, 28, generator=gen).to(dev) * 3, torch.randint(0, 10, (n,), generator=gen).to(dev))
               for n in [b] * 6]
    result = {}

    # graph (or, on CPU, its eager twin) vs the ordinary eager step, from the same seed
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
    # no host synchronisation in the graph step, the graph evaluation, or the eager auto step
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


def stage_neuron(ctx: Context) -> dict:
    from plif.bench import neuron as bn

    if ctx.dry:
        bn.CASES["dry-T4-B2-C8-8x8"] = (4, 2, 8, 8, 8)
        cases, backends, reps, budget = ["dry-T4-B2-C8-8x8"], ["cpu", "bptt"], 2, 0.5
    else:
        cases, backends, reps, budget = None, None, 10, 3.0  # every standard case
    rows = bn.run_neuron_bench(cases, backends, ctx.device, torch.float32, ("fwd", "fwd+bwd"), reps, budget)
    print(bn.format_table(rows), flush=True)
    return {"machine": bn.machine_description(ctx.device), "rows": [asdict(r) for r in rows]}


def stage_train(ctx: Context) -> dict:
    from plif.bench.train import bench_train, fill_ratios, format_train_table
    from plif.bench.neuron import machine_description

    if ctx.dry:
        variants, batches, warmup, iters, T = ["naive", "auto"], (2,), 0, 1, 2
    else:
        variants, batches, warmup, iters, T = (["naive", "spikingjelly", "auto", "compile", "cuda-graph", "cuda-graph+bf16"],
                                               (16, 128), 3, 20, None)
    rows, errors = [], {}
    for v in variants:  # one at a time: a failing variant keeps the others' numbers
        try:
            rows += bench_train("fashion-mnist", batches, str(ctx.device), [v], warmup, iters, T)
        except Exception as e:  # noqa: BLE001
            errors[v] = f"{type(e).__name__}: {e}"
            print(f"variant {v} failed: {errors[v]}", file=sys.stderr, flush=True)
        if ctx.device.type == "cuda":
            torch.cuda.empty_cache()
    fill_ratios(rows)
    print(format_train_table(rows, f"plif bench train — fashion-mnist on {ctx.device}"), flush=True)
    return {"ok": not errors, "machine": machine_description(ctx.device), "rows": [asdict(r) for r in rows],
            "errors": errors}


def stage_protocol(ctx: Context) -> dict:
    from plif.train import TrainConfig, train
    from plif.runs import read_metrics

    budget = min(ctx.args.protocol_seconds, max(0.0, ctx.args.budget - ctx.elapsed() - 15))
    if ctx.dry:
        # t_max fixed: the cpu preset's period otherwise follows --epochs, which grows across the resumes
        base = dict(preset="cpu", max_train_samples=64, max_test_samples=32, device="cpu", t_max=2)
        max_epochs = 2
    else:
        base = dict(preset="paper", device="cuda")
        max_epochs = 64
    attempts = []
    for cuda_graph in ([False] if ctx.dry else [True, False]):
        run_dir = ctx.out / ("protocol-run" + ("-graph" if cuda_graph else ""))
        cfg = TrainConfig(dataset="fashion-mnist", data_dir=str(ctx.args.data_dir), out=str(run_dir),
                          cuda_graph=cuda_graph, epochs=1, **base)
        t = time.perf_counter()
        try:
            train(cfg, log=print)
            epochs = 1
            while epochs < max_epochs:
                last = read_metrics(run_dir)[-1]["epoch_time_s"]
                if time.perf_counter() - t + 1.3 * last + 5 > budget:
                    break
                epochs += 1
                train(dataclasses.replace(cfg, epochs=epochs), resume=True, log=print)
        except Exception as e:  # noqa: BLE001
            attempts.append({"cuda_graph": cuda_graph, "error": f"{type(e).__name__}: {e}",
                             "traceback": traceback.format_exc()[-3000:]})
            print(f"protocol with cuda_graph={cuda_graph} failed: {e}", file=sys.stderr, flush=True)
            continue
        metrics = read_metrics(run_dir)
        for m in metrics:
            print(f"epoch {m['epoch']}: {m['epoch_time_s']:.1f}s  ({m['train_time_s']:.1f}s training, "
                  f"{m['samples_per_s']:.0f} samples/s)  test {m['test_acc']:.2%}", flush=True)
        return {"ok": True, "cuda_graph": cuda_graph, "failed_attempts": attempts, "run_dir": str(run_dir),
                "budget_s": budget, "wall_s": time.perf_counter() - t,
                "epochs": [{k: m[k] for k in ("epoch", "epoch_time_s", "train_time_s", "samples_per_s", "train_acc",
                                              "test_acc", "taus", "lr")} for m in metrics]}
    return {"ok": False, "failed_attempts": attempts}


# ----------------------------------------------------------------------------------- summary
def _summary_lines(ctx: Context, recs: dict) -> list[str]:
    lines = [f"plif GPU benchmark — {'CPU DRY RUN' if ctx.dry else torch.cuda.get_device_name(0)}, "
             f"torch {torch.__version__}, {ctx.elapsed():.0f}s", ""]
    lines.append(f"{'stage':14s} {'ok':4s} {'s':>6s}  key numbers")
    for name, rec in recs.items():
        res = rec.get("result") or {}
        key = rec.get("error") or ""
        if not key and name == "grid":
            key = f"{res['cases'] - len(res['failed'])}/{res['cases']} cases ok, {res['not_run']} not run " \
                  f"({res['backend']}, {','.join(res['dtypes'])}); " \
                  f"compile: {'ok' if res['compile'].get('ok') else 'FAILED'}"
        elif not key and name == "sync":
            g = res["graph_vs_eager"]
            key = f"{res['sync_free']}; graph vs eager: loss {g['max_rel_loss_err']:.1e} rel, params {g['max_abs_param_err']:.1e} abs"
        elif not key and name == "spikingjelly":
            key = f"spikingjelly {res['version']}"
        elif not key and name == "protocol":
            ep = res.get("epochs", [])
            key = (f"{len(ep)} epochs (cuda_graph={res.get('cuda_graph')}): " +
                   ", ".join(f"{e['epoch_time_s']:.1f}s/{e['test_acc']:.2%}" for e in ep)) if ep else "no epoch"
        lines.append(f"{name:14s} {'yes' if rec['ok'] else 'NO':4s} {rec['seconds']:6.1f}  {key}")
    neuron = (recs.get("neuron") or {}).get("result") or {}
    if neuron.get("rows"):
        lines += ["", "neuron (fwd+bwd):", f"{'case':24s} {'backend':14s} {'ms':>9s} {'% bound':>8s}"]
        for r in neuron["rows"]:
            if r["pass_"] == "fwd+bwd" and r["time_ms"] is not None:
                pct = f"{r['pct_copy_bound']:.1f}" if r.get("pct_copy_bound") is not None else "-"
                lines.append(f"{r['case']:24s} {r['backend']:14s} {r['time_ms']:9.3f} {pct:>8s}")
    train = (recs.get("train") or {}).get("result") or {}
    if train.get("rows"):
        lines += ["", "train step:", f"{'variant':16s} {'batch':>5s} {'ms':>8s} {'samples/s':>10s} {'peak MB':>8s}"]
        for r in train["rows"]:
            mem = f"{r['peak_mem_mb']:.0f}" if r.get("peak_mem_mb") is not None else "-"
            if r["ms_per_step"] is None:  # not measured: the note says why (e.g. SpikingJelly unavailable)
                lines.append(f"{r['variant']:16s} {r['batch']:5d} {r.get('note', '')}")
                continue
            lines.append(f"{r['variant']:16s} {r['batch']:5d} {r['ms_per_step']:8.2f} {r['samples_per_s']:10.0f} {mem:>8s}")
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", required=True, help="folder with the Fashion-MNIST .gz files")
    p.add_argument("--out", required=True, help="folder for the JSON results (created)")
    p.add_argument("--spikingjelly-wheels", help="folder of SpikingJelly 2.0 wheels to install offline")
    p.add_argument("--dry-run", action="store_true", help="tiny CPU sizes even where CUDA is present")
    p.add_argument("--budget", type=float, default=530.0, help="seconds for the whole run (the protocol gets the rest)")
    p.add_argument("--protocol-seconds", type=float, default=240.0, help="at most this long for stage e")
    p.add_argument("--grid-seconds", type=float, default=150.0, help="stop adding grid cases after this long")
    p.add_argument("--stages", default="spikingjelly,grid,sync,neuron,train,protocol")
    args = p.parse_args(argv)
    ctx = Context(args)
    ctx.out.mkdir(parents=True, exist_ok=True)
    print(f"plif GPU benchmark: device {ctx.device}{' (dry run)' if ctx.dry else ''}, torch {torch.__version__}", flush=True)
    from plif.neurons import backend_status
    print("neuron backends: " + "; ".join(f"{k} {v}" for k, v in backend_status().items()), flush=True)
    stages = {"spikingjelly": stage_spikingjelly, "grid": stage_grid, "sync": stage_sync, "neuron": stage_neuron,
              "train": stage_train, "protocol": stage_protocol}
    wanted = [s.strip() for s in args.stages.split(",") if s.strip()]
    unknown = [s for s in wanted if s not in stages]
    if unknown:
        p.error(f"--stages: unknown {', '.join(unknown)}; valid: {', '.join(stages)}")
    if not args.spikingjelly_wheels and "spikingjelly" in wanted:
        wanted.remove("spikingjelly")
    recs = {name: run_stage(ctx, name, stages[name]) for name in wanted}
    lines = _summary_lines(ctx, recs)
    print("\n" + "\n".join(lines), flush=True)
    atomic_write_text(ctx.out / "summary.txt", "\n".join(lines) + "\n")
    _write(ctx, "summary", {"dry_run": ctx.dry, "device": str(ctx.device), "torch": torch.__version__,
                            "gpu": None if ctx.dry else torch.cuda.get_device_name(0),
                            "seconds": round(ctx.elapsed(), 1),
                            "stages": {k: {"ok": v["ok"], "error": v["error"], "seconds": v["seconds"]} for k, v in recs.items()}})
    return 0 if all(r["ok"] for r in recs.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
