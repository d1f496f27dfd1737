"""What one call runs on the GPU: how many kernels it launches and how long they run on the device.

The eager time of a small call (CUDA events around it, or the wall clock) counts the host as well:
Python, autograd and dispatch for every kernel.  ``torch.profiler`` records each kernel the device
runs (launched eagerly or replayed from a CUDA graph) with its start and end on the GPU, so the sum
of their durations is the device's own time, and their number is what a fused or graphed step must
bring down.  Memory copies and fills are counted apart from kernels.  Without CUDA there is nothing
to record: the result says "needs CUDA".
"""
from __future__ import annotations

from typing import Callable, Iterable

import torch

__all__ = ["profile_kernels", "summarize_kernels"]

NEEDS_CUDA = "needs CUDA"


def summarize_kernels(events: Iterable, calls: int, top: int = 5) -> dict:
    """Per call: kernels, their summed device milliseconds, copies/fills, and the ``top`` kernels by
    time, from profiler events (``device_type``, ``name``, ``time_range.elapsed_us()``)."""
    from torch.autograd import DeviceType

    kernels, copies, by_name = 0, 0, {}
    total_us = 0.0
    for e in events:
        if e.device_type != DeviceType.CUDA:
            continue
        if e.name.startswith(("Memcpy", "Memset")):
            copies += 1
            continue
        us = e.time_range.elapsed_us()
        kernels += 1
        total_us += us
        n, t = by_name.get(e.name, (0, 0.0))
        by_name[e.name] = (n + 1, t + us)
    ranked = sorted(by_name.items(), key=lambda kv: -kv[1][1])[:top]
    return {"kernels": kernels / calls, "kernel_ms": total_us / 1e3 / calls, "copies": copies / calls,
            "top": [{"name": name[:120], "count": n / calls, "ms": t / 1e3 / calls} for name, (n, t) in ranked],
            "note": ""}


def profile_kernels(fn: Callable[[], object], device: torch.device, calls: int = 3) -> dict:
    """Run ``fn`` once to warm it, then ``calls`` times under ``torch.profiler``; see
    :func:`summarize_kernels`.  On a device other than CUDA: ``{"note": "needs CUDA"}`` and no counts."""
    if torch.device(device).type != "cuda":
        return {"kernels": None, "kernel_ms": None, "copies": None, "top": [], "note": NEEDS_CUDA}
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize(device)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize(device)
    return summarize_kernels(prof.events(), calls)
