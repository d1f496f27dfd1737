"""SpikingJelly 2.0's ``sew_resnet18`` (ADD, ParametricLIFNode, ATan, detach_reset) against
``plif.from_spikingjelly`` of it: one training step (plif's step: MSE on the firing rate, Adam 1e-3) at
T4 B2 3x32x32, the same weights copied in, rounds interleaved A B A B in one process; prints the median
milliseconds per step and the ratio (issue 47's target: >= 2x on the CPU).

    PYTHONPATH=src python benchmarks/bench_spikingjelly_resnet.py [--rounds 5] [--steps 3] [--no-fuse]
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch


def build(cnf: str = "ADD", num_classes: int = 10):
    from spikingjelly.activation_based import functional, neuron, surrogate

    from plif.bench.spikingjelly import spikingjelly_model

    sew_resnet18 = spikingjelly_model("sew_resnet").sew_resnet18

    torch.manual_seed(0)
    sj = sew_resnet18(cnf=cnf, num_classes=num_classes, spiking_neuron=neuron.ParametricLIFNode,
                      surrogate_function=surrogate.ATan(), detach_reset=True)
    functional.set_step_mode(sj, "m")
    return sj, functional.reset_net


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=3, help="steps per round (after one warm-up step)")
    p.add_argument("--T", type=int, default=4)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--no-fuse", action="store_true", help="the converted leaves without plif.fuse")
    a = p.parse_args()

    import plif
    from plif.train.loop import train_step
    from plif.train.optim import adam

    sj, reset = build()
    net = plif.from_spikingjelly(sj, fuse=not a.no_fuse)
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(a.T, a.batch, 3, 32, 32, generator=gen)
    y = torch.randint(0, 10, (a.batch,), generator=gen)
    runs = {}
    for name, model, after in (("spikingjelly", sj, reset), ("plif", net, None)):
        opt = adam(model.parameters(), 1e-3)

        def step(model=model, opt=opt, after=after):
            train_step(model, opt, x, y, 10)
            if after is not None:
                after(model)
        step()  # warm-up: kernels loaded, allocations made
        runs[name] = (step, [])
    for _ in range(a.rounds):
        for name, (step, times) in runs.items():
            t0 = time.perf_counter()
            for _ in range(a.steps):
                step()
            times.append((time.perf_counter() - t0) / a.steps * 1e3)
    med = {name: statistics.median(times) for name, (_, times) in runs.items()}
    print(f"sew_resnet18 ADD PLIF, one training step T{a.T} B{a.batch} 3x32x32, {a.rounds} interleaved rounds of "
          f"{a.steps}, torch {torch.__version__}, {torch.get_num_threads()} threads, fused={not a.no_fuse}")
    for name, ms in med.items():
        print(f"  {name:13s} {ms:8.1f} ms/step   (rounds: {', '.join(f'{t:.0f}' for t in runs[name][1])})")
    print(f"  speed-up      {med['spikingjelly'] / med['plif']:.2f}x")


if __name__ == "__main__":
    main()
