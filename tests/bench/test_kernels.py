"""Kernel counts and device time from profiler events; without CUDA the result says so."""
from types import SimpleNamespace

import torch
from torch.autograd import DeviceType

from plif.bench.kernels import profile_kernels, summarize_kernels


def _event(name, us, device=DeviceType.CUDA):
    return SimpleNamespace(name=name, device_type=device,
                           time_range=SimpleNamespace(elapsed_us=lambda: us))


def test_kernels_are_counted_per_call_and_copies_apart():
    events = [_event("_forward_kernel", 100.0), _event("_backward_kernel", 300.0), _event("Memcpy HtoD", 50.0),
              _event("Memset (Device)", 5.0), _event("aten::add", 999.0, DeviceType.CPU),
              _event("_forward_kernel", 100.0), _event("_backward_kernel", 300.0)]
    got = summarize_kernels(events, calls=2)
    assert got["kernels"] == 2 and got["copies"] == 1 and got["kernel_ms"] == 0.4
    assert [t["name"] for t in got["top"]] == ["_backward_kernel", "_forward_kernel"]
    assert got["top"][0] == {"name": "_backward_kernel", "count": 1.0, "ms": 0.3}


def test_without_cuda_it_says_so():
    calls = []
    got = profile_kernels(lambda: calls.append(1), torch.device("cpu"))
    assert got["note"] == "needs CUDA" and got["kernels"] is None and not calls
