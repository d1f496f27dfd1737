"""The GPU script's correctness stages (``benchmarks/gpu/gpu_stages.py`` lists every stage): SpikingJelly
installed, the kernel grid against the reference, ``torch.compile`` against eager, and the captured
steps (plain and compiled) against eager ones, free of host synchronisation.  Each ``stage_x(ctx, st)``
returns a JSON-able dict; ``st.deadline`` is its time budget, ``st.partial`` what it has so far.  On
the CPU (``ctx.dry``) each runs at tiny sizes, without capture, and compiles with ``aot_eager``."""
from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

import torch

NARROW_FMNIST = "{c8k3s1-BN-PLIF-MPk2s2}*2-DP-FC64-PLIF-DP-FC100-PLIF-APk10s10"
# the compile stage's batches: a training batch, a bigger evaluation batch, a short last batch; the dry
# run's third is 20, since on the CPU a batch under 16 recompiles (a guard of the CPU convolution's fake
# implementation, "16 <= x.size()[0]"), a second full compile the plumbing check need not pay for
COMPILE_BATCHES, DRY_COMPILE_BATCHES = (16, 64, 5), (16, 64, 20)


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


def stage_grid(ctx, st) -> dict:
    """The kernel correctness grid on the device (cases until ``--grid-seconds`` or the budget)."""
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
    st.partial.update(rows=rows)
    cases_until = min(st.deadline, time.monotonic() + ctx.args.grid_seconds)
    for i, (case, dtype) in enumerate(plan):
        if time.monotonic() > cases_until:
            skipped = len(plan) - i
            print(f"grid: {time.perf_counter() - t0:.0f}s spent, {skipped} cases not run", flush=True)
            break
        rows.append(run_case(Case(**{**asdict(case), "dtype": dtype}), backend, str(ctx.device)))
    failed = [r["case"] for r in rows if not r["ok"]]
    print(f"{len(rows) - len(failed)}/{len(rows)} cases ok" + (f"; FAILED: {failed[:20]}" if failed else ""), flush=True)
    return {"ok": not failed, "backend": backend, "backends": backend_status(), "dtypes": dtypes,
            "cases": len(rows), "not_run": skipped, "failed": failed, "rows": rows}


def _backend(ctx) -> str:
    return "aot_eager" if ctx.dry else "inductor"


def stage_compile(ctx, st) -> dict:
    """A narrow paper network under ``torch.compile(fullgraph=True)`` against eager, its batch dynamic
    from the first call (one compile: the regression of issue 10 was in the symbolic-batch graph), at
    three batch sizes; a budget of its own, since a cold Inductor takes tens of seconds."""
    import torch._inductor.config as inductor_config

    from plif.models import build_network

    torch.manual_seed(0)
    net = build_network(NARROW_FMNIST, (1, 28, 28), 4).to(ctx.device)
    torch._dynamo.reset()
    compiled = torch.compile(net, fullgraph=True, backend=_backend(ctx))

    def dynamic(x):
        torch._dynamo.mark_dynamic(x, 0)
        return compiled(x)
    rows = st.partial.setdefault("rows", [])
    with inductor_config.patch(fallback_random=True):  # dropout draws like eager
        for b in DRY_COMPILE_BATCHES if ctx.dry else COMPILE_BATCHES:
            rows.append(_compile_row(ctx, net, dynamic, b))
            print(f"compile check, batch {b}: {rows[-1]}", flush=True)
    ok = all(r["spike_mismatch"] < 0.01 and r["grad_rel_err"] < 1e-3 for r in rows)
    return {"ok": ok, "backend": _backend(ctx), "rows": rows}


def _compile_row(ctx, net, compiled, b: int) -> dict:
    x = torch.rand(b, 1, 28, 28, device=ctx.device) * 3
    outs, grads, t0 = [], [], time.perf_counter()
    for fn in (compiled, net):
        net.zero_grad(set_to_none=True)
        torch.manual_seed(b)
        out = fn(x)
        out.float().square().mean().backward()
        outs.append(out.detach())
        grads.append([p.grad.clone() for p in net.parameters()])
    grad_err = max(float((a - e).abs().max() / (e.abs().max() + 1e-12)) for a, e in zip(*grads))
    return {"batch": b, "spike_mismatch": float((outs[0] != outs[1]).float().mean()), "grad_rel_err": grad_err,
            "seconds": round(time.perf_counter() - t0, 1)}


def _step_losses(trainer, batches) -> list[float]:
    losses = []
    for x, y in batches:
        trainer.reset_totals()
        trainer.train_step(x, y)
        losses.append(trainer.totals()[0])
    return losses


def _agreement(ctx, trainer, net_g, step_e, net_e, batches) -> dict:
    """The graph trainer's steps against eager ones on a twin network, from one seed."""
    net_g.train()
    net_e.train()
    torch.manual_seed(1)
    g_losses = _step_losses(trainer, batches)
    torch.manual_seed(1)
    e_losses = [float(step_e(x, y)[0]) for x, y in batches]
    param_err = max(float((p - q).detach().abs().max()) for p, q in zip(net_g.parameters(), net_e.parameters()))
    loss_err = max(abs(a - e) / max(abs(e), 1e-12) for a, e in zip(g_losses, e_losses))
    return {"graph_losses": g_losses, "eager_losses": e_losses, "max_rel_loss_err": loss_err,
            "max_abs_param_err": param_err, "captured": not ctx.dry, "agree": loss_err < 1e-3 and param_err < 1e-3}


def _sync_free(trainer, batches, eval_batches, b: int) -> None:
    """Replay the captured training step and evaluation with any host synchronisation an error."""
    trainer.evaluate(eval_batches, batch_size=b)  # captures the evaluation graph (capture synchronises)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for x, y in batches:
            trainer.train_step(x, y)
        trainer.evaluate(eval_batches, batch_size=b, read=False)
    finally:
        torch.cuda.set_sync_debug_mode("default")


def stage_sync(ctx, st) -> dict:
    """The captured step against the eager one, and the captured step with Inductor's network inside
    (``plif train``'s default on CUDA) against the compiled eager step, each from one seed; no host
    sync in either captured step and evaluation, nor in the eager step."""
    from plif.device import set_tf32
    from plif.catalog import get_dataset
    from plif.models import build_network
    from plif.train.graph import GraphTrainer
    from plif.train.loop import train_step
    from plif.train.optim import adam, graph_adam

    entry = get_dataset("fashion-mnist")
    spec, T, b = (NARROW_FMNIST, 2, 4) if ctx.dry else (entry.network, entry.T, 16)
    dev = ctx.device
    set_tf32(True)  # plif train's default
    gen = torch.Generator(device="cpu").manual_seed(0)
    batches = [(torch.rand(n, 1, 28, 28, generator=gen).to(dev) * 3, torch.randint(0, 10, (n,), generator=gen).to(dev))
               for n in [b] * 6]
    eval_batches = [(x, y) for x, y in batches[:2]] + [(batches[2][0][:3], batches[2][1][:3])]

    def fresh():
        torch.manual_seed(0)
        return build_network(spec, (1, 28, 28), T).to(dev)
    result = st.partial
    for name, compiled in (("graph_vs_eager", False), ("compile_graph_vs_compile", True)):
        t0 = time.perf_counter()
        net_g, net_e = fresh(), fresh()
        # the dry run checks the plumbing only (the compile stage checks aot_eager's numbers)
        wrap = (lambda n: torch.compile(n, backend="eager" if ctx.dry else "inductor")) if compiled else (lambda n: n)
        trainer = GraphTrainer(net_g, graph_adam(net_g.parameters(), 1e-3, dev), 10, dev, capture=not ctx.dry,
                               net=wrap(net_g))
        opt_e, fwd_e = graph_adam(net_e.parameters(), 1e-3, dev), wrap(net_e)  # same optimiser maths, no capture
        result[name] = _agreement(ctx, trainer, net_g, lambda x, y: train_step(fwd_e, opt_e, x, y, 10), net_e, batches)
        if not ctx.dry:
            _sync_free(trainer, batches, eval_batches, b)
            result[name]["eval_after_sync_check"] = trainer.totals()
        else:
            result[name]["eval"] = trainer.evaluate(eval_batches, batch_size=b)
        result[name]["seconds"] = round(time.perf_counter() - t0, 1)
        print(f"{name}: {result[name]}", flush=True)
    agree = all(result[k]["agree"] for k in ("graph_vs_eager", "compile_graph_vs_compile"))
    if ctx.dry:
        result["sync_free"] = "skipped: set_sync_debug_mode needs CUDA"
        return {"ok": agree, **result}
    net_a = fresh()
    opt_a = adam(net_a.parameters(), 1e-3, capturable=True)
    train_step(net_a, opt_a, *batches[0], 10)  # first call: kernels compile, state is created
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for x, y in batches[1:]:
            train_step(net_a, opt_a, x, y, 10)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
    result["sync_free"] = ("ok: graph and compile+graph train steps and evaluations (padded last batch), "
                           "eager auto step")
    return {"ok": agree, **result}
