"""The GPU script's residual stage (issue 47): one training step of plif's residual zoo beside
SpikingJelly 2.0's network of the same structure, eager and under bf16 autocast.

- ``sew-resnet18``, CIFAR-10 (3x32x32, CIFAR stem), T = 4, B = 16;
- ``sew-7b-net``, DVS128 Gesture (2x128x128 synthetic event frames, Poisson counts with mean 0.3), T = 16,
  B = 16;
each plif's zoo entry (fused by default) and its SpikingJelly twin holding the same weights
(:func:`plif.bench.residual_twin.spikingjelly_residual_twin`: SpikingJelly's ``sew_resnet18`` with the
CIFAR stem, the 7B-Net in SpikingJelly's layers as Spike-Element-Wise-ResNet writes it).

Each row: plif's training step (MSE on the firing rate, Adam; SpikingJelly's state reset after its
step), median milliseconds over ``iters`` steps after ``warmup``.  The CPU dry run: T = 2, B = 1, 8x8 images,
both networks 4 channels wide (so the ResNet has no SpikingJelly rows there).
"""
from __future__ import annotations

import statistics
import sys
import time

import torch
VARIANTS = ("plif", "plif+bf16", "spikingjelly", "spikingjelly+bf16")


def _time_step(model, x, y, classes, device, amp, warmup, iters, after=None) -> float:
    from plif.train.graph import autocast_context
    from plif.train.loop import train_step
    from plif.train.optim import adam

    opt = adam(model.parameters(), 1e-3)
    autocast = None if amp is None else (lambda: autocast_context(device, amp))
    times = []
    for i in range(warmup + iters):
        t0 = time.perf_counter()
        train_step(model, opt, x, y, classes, autocast=autocast)
        if after is not None:
            after(model)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if i >= warmup:
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def _case(ctx, name, T, B, width):
    from plif.models.residual import RESIDUAL_ZOO

    factory, dataset = RESIDUAL_ZOO[name]
    image = (3, 8, 8) if ctx.dry else (3, 32, 32)  # the dry run: CIFAR's stem on 8x8 images
    shape, classes = (image, 10) if dataset == "cifar10" else ((2, 128, 128), 11)
    gen = torch.Generator().manual_seed(0)
    if shape[0] == 3:
        x = torch.randn(B, *shape, generator=gen).unsqueeze(0).expand(T, B, *shape)
    else:
        x = torch.poisson(torch.full((T, B, *shape), 0.3), generator=gen)
    x, y = x.to(ctx.device), torch.randint(0, classes, (B,), generator=gen).to(ctx.device)
    torch.manual_seed(0)
    stem = {"stem": "cifar"} if shape[0] == 3 else {}
    net = factory(shape, classes, T, width=width, **stem).to(ctx.device)
    return net, x, y, classes


def stage_residual(ctx, st) -> dict:
    """sew-resnet18 (CIFAR-10, T4) and sew-7b-net (DVS128 Gesture, T16), B16: :data:`VARIANTS` each."""
    from plif.bench.neuron import machine_description
    from plif.bench.spikingjelly import spikingjelly_unavailable

    warmup, iters = (0, 1) if ctx.dry else (3, 10)
    # the dry run: a 4-wide ResNet, whose SpikingJelly rows it leaves out (SpikingJelly's is 64 wide)
    cases = (("sew-resnet18", 2 if ctx.dry else 4, 1 if ctx.dry else 16, 4 if ctx.dry else 64),
             ("sew-7b-net", 2 if ctx.dry else 16, 1 if ctx.dry else 16, 4 if ctx.dry else 32))
    rows, errors = [], {}
    st.partial.update(rows=rows, errors=errors)
    sj_missing = spikingjelly_unavailable()
    for name, T, B, width in cases:
        net, x, y, classes = _case(ctx, name, T, B, width)
        for v in VARIANTS:
            if time.monotonic() > st.deadline - 5:
                errors[f"{name} {v}"] = "not run: the stage's budget was spent"
                continue
            amp = "bf16" if v.endswith("+bf16") else None
            if v.startswith("spikingjelly") and name.startswith("sew-resnet") and width != 64:
                errors[f"{name} {v}"] = "not run: SpikingJelly's sew_resnet18 is 64 channels wide"
                continue
            try:
                if v.startswith("spikingjelly"):
                    if sj_missing:
                        raise RuntimeError(f"SpikingJelly unavailable: {sj_missing}")
                    from plif.bench.residual_twin import spikingjelly_residual_twin

                    sj, reset_net = spikingjelly_residual_twin(net)
                    ms = _time_step(sj.to(ctx.device), x, y, classes, ctx.device, amp, warmup, iters, reset_net)
                else:
                    ms = _time_step(net, x, y, classes, ctx.device, amp, warmup, iters)
                rows.append({"network": name, "variant": v, "T": T, "batch": B, "width": width, "ms_per_step": ms})
                print(f"{name:13s} T{T} B{B} {v:18s} {ms:9.2f} ms/step", flush=True)
            except Exception as e:  # noqa: BLE001  (one failing row keeps the others)
                errors[f"{name} {v}"] = f"{type(e).__name__}: {e}"
                print(f"{name} {v} failed: {errors[f'{name} {v}']}", file=sys.stderr, flush=True)
            if ctx.device.type == "cuda":
                torch.cuda.empty_cache()
    by = {(r["network"], r["variant"]): r["ms_per_step"] for r in rows}
    ratios = {f"{n} {v}": by[(n, "spikingjelly" + v[4:])] / by[(n, v)] for n, v in by
              if v.startswith("plif") and (n, "spikingjelly" + v[4:]) in by}
    expected = ("SpikingJelly unavailable", "not run: SpikingJelly's")
    return {"ok": not [e for e in errors.values() if not e.startswith(expected)],
            "machine": machine_description(ctx.device), "rows": rows, "errors": errors,
            "spikingjelly_over_plif": ratios}
