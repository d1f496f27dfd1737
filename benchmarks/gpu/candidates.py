"""GPU speed candidates (issue 30) for the prepared device run's ``candidates`` stage to measure.

Each candidate is a set of GPU switches (:mod:`plif.kernels.gpu_switches`, all off by default) and
says what its measurement decides.  The stage builds and times each step inside
``candidate.apply()`` and the baseline outside any context, alternating the two, so both share one
process, one GPU and its clocks.  ``kind`` says which measurement it needs:

- ``neuron``: the PLIF layer forward + backward at ``plif bench neuron``'s cases, as an eager call
  (wall time between CUDA events) and as device time (the call replayed in a CUDA graph, or the
  profiler's kernel time), so host and device are told apart;
- ``train``: the paper Fashion-MNIST training step at batch 16 and 128, eager ``auto`` and
  ``--cuda-graph``, with peak memory.

A winner becomes the default by changing its switch's default in ``gpu_switches``; a loser's
switch and code are removed.  Switches that change rounding (``tf32``, ``channels_last``) also
need the protocol's first epochs against the H100 run's ``protocol51_metrics.jsonl`` (within 0.3
points) before they may become defaults.

    python benchmarks/gpu/candidates.py            # list them
    python benchmarks/gpu/candidates.py --host     # host work of one eager neuron call, per dispatch path (CPU)
"""
from __future__ import annotations

import argparse
import contextlib
import time
from dataclasses import dataclass, field

import torch

from plif.kernels.gpu_switches import switched

__all__ = ["Candidate", "CANDIDATES", "host_overhead", "main"]


@dataclass(frozen=True)
class Candidate:
    name: str
    kind: str  # "neuron" or "train"
    decides: str  # one line: what its measurement decides
    switches: dict = field(default_factory=dict)

    def apply(self) -> contextlib.AbstractContextManager:
        """A context manager with this candidate's switches on (restored on exit)."""
        return switched(**self.switches)


CANDIDATES = [
    Candidate("prefetch", "neuron",
              "whether loading step t+1 while step t computes lifts the kernels' device time at all three cases "
              "(T20 128x128 from 87.7% towards >= 90% of the copy bound)", {"prefetch": True}),
    Candidate("launch-fine", "neuron",
              "whether 128-neuron programs, 1,024 of them instead of 128, cut FC T8 B64 N2048's device time "
              "(the other cases already have >= 1,024 programs and are unchanged)", {"launch": "fine"}),
    Candidate("launch-wide", "neuron",
              "whether 8 warps per 1,024-neuron program (4 neurons a thread) beat 4 warps at every case",
              {"launch": "wide"}),
    Candidate("lean-eager", "neuron",
              "how much of the small cases' eager call (0.89 ms at 28x28, 0.95 ms FC) is torch.library "
              "dispatch: device time is unchanged, the eager wall time should drop", {"lean_eager": True}),
    Candidate("neuron-all", "neuron",
              "whether prefetch, the fine table and the lean path add up (the eager call against the "
              "<= 0.4 ms / <= 0.35 ms targets)", {"prefetch": True, "launch": "fine", "lean_eager": True}),
    Candidate("step-lean-prefetch", "train",
              "whether the neuron levers move the whole step: eager auto at B16 (host-bound, 8.35 ms) and "
              "cuda-graph at B128 (device-bound, 9.37 ms)", {"prefetch": True, "lean_eager": True}),
    Candidate("tf32", "train",
              "whether TF32 matmuls speed the FC2048 layers at B128 (convolutions already allow TF32 by "
              "PyTorch's default); rounding changes, so the protocol check decides the default",
              {"tf32": True}),
    Candidate("channels-last", "train",
              "whether channels-last convolutions, BatchNorm and pooling (the neuron kernel reading them in "
              "place) beat NCHW at B16 and B128; rounding may change (cuDNN algorithms)", {"channels_last": True}),
]


def host_overhead(calls: int = 300, shape=(8, 2, 3, 2, 2)) -> dict:
    """Host CPU time (µs, best of 5 rounds, process time, one thread) of one eager PLIF call, forward and
    forward + backward, through ``plif::triton_forward`` and through the lean path, with the
    kernel launches themselves left out (no GPU needed; Triton's launcher and the CUDA driver's
    launch cost come on top on a device)."""
    from plif.kernels import triton_neuron
    from plif.neurons import NeuronConfig

    x = torch.randn(shape, requires_grad=True)
    k = torch.tensor(0.5, requires_grad=True)
    v0, g, cfg = torch.zeros(shape[1:]), torch.ones(shape), NeuronConfig()

    def fwd():
        return triton_neuron.multi_step_triton(x, k, v0, cfg)[0]

    def fwd_bwd():
        fwd().backward(g)

    def best_us(fn) -> float:
        for _ in range(20):
            fn()
        rounds = []
        for _ in range(5):
            t0 = time.process_time()
            for _ in range(calls):
                fn()
            rounds.append((time.process_time() - t0) / calls * 1e6)
        return min(rounds)

    launch, triton_neuron._launch = triton_neuron._launch, lambda *a, **kw: None
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # process time counts every thread: no idle OpenMP spinning in it
    try:
        out = {}
        for path, lean in (("op", False), ("lean", True)):
            with switched(lean_eager=lean):
                out[path] = {"fwd_us": best_us(fwd), "fwd_bwd_us": best_us(fwd_bwd)}
    finally:
        triton_neuron._launch = launch
        torch.set_num_threads(threads)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="the GPU speed candidates of issue 30")
    p.add_argument("--host", action="store_true", help="measure the host work of one eager neuron call (CPU)")
    args = p.parse_args(argv)
    for c in CANDIDATES:
        print(f"{c.name:20s} {c.kind:7s} {c.switches}\n{'':29s}{c.decides}")
    if args.host:
        for path, r in host_overhead().items():
            print(f"host, {path:4s} path: forward {r['fwd_us']:.0f} µs, forward + backward {r['fwd_bwd_us']:.0f} µs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
