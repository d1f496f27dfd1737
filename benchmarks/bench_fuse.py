"""``plif.fuse`` on networks written by hand: one training step (``plif train``'s: MSE on the rate, Adam)
timed in turns (A B A B ..., :func:`plif.bench.alternate.alternate`) in one process, the same weights
copied into each network.

- ``paper``: the paper's Fashion-MNIST network ``{c128k3s1-BN-PLIF-MPk2s2}*2-DP-FC2048-PLIF-DP-FC100-PLIF-APk10s10``
  written by hand with plif's layers (``benchmarks/fuse_nets.py``) and ``plif.fuse``d, fed a stride-0
  ``x.unsqueeze(0).expand(T, ...)`` image, against ``build_network``'s step of the notation (target:
  within 1.10×); the hand-written network as written beside them.
- ``residual``: a residual network with its own ``forward`` (a stem and two SEW ResNet blocks that halve
  the resolution) fused against as written (target: ≥ 1.3× faster), both fed the same CIFAR-10-shaped
  image as a stride-0 view; ``residual-frames``: the same on event frames ``[T, B, 2, H, W]`` (no static
  input to hoist: what fusing the blocks alone gives); ``sew-pool-frames``: SEW ResNet as its paper builds
  it for event data, conv → BN → PLIF → 2×2 max-pool downsampling stages and identity-shortcut blocks,
  on event frames.

With ``--bound`` each case also times the fused step's own convolutions and matrix products run alone
(:mod:`plif.bench.products`, as ``plif bench bound`` does) in the same turns: fused step / bound says
what plif adds on top of them (the shortcut's add and downsampling branch included).

    python benchmarks/bench_fuse.py [--case paper,residual] [--rounds 8] [--bound] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fuse_nets  # noqa: E402

import plif  # noqa: E402
from plif.bench.alternate import alternate  # noqa: E402
from plif.bench.products import record_products, replay  # noqa: E402
from plif.train.loop import train_step  # noqa: E402
from plif.train.optim import adam  # noqa: E402

PAPER = "{c128k3s1-BN-PLIF-MPk2s2}*2-DP-FC2048-PLIF-DP-FC100-PLIF-APk10s10"


def copy_weights(src: torch.nn.Module, dst: torch.nn.Module) -> None:
    """``src``'s parameters and buffers into ``dst``, in order (the same layers under other names)."""
    values = list(src.state_dict().values())
    keys = list(dst.state_dict())
    assert len(keys) == len(values), (len(keys), len(values))
    dst.load_state_dict(dict(zip(keys, values)))


def _step(model, x, y, classes):
    opt = adam(model.parameters(), 1e-3)
    return lambda: train_step(model, opt, x, y, classes)


def paper_case(T: int, B: int):
    """``{name: step}``: build_network's, the hand-written network fused (stride-0 input) and as written."""
    torch.manual_seed(0)
    net = plif.build_network(PAPER, (1, 28, 28), T)
    hand = fuse_nets.paper_net()
    copy_weights(net, hand)
    written = fuse_nets.paper_net()
    copy_weights(net, written)
    plif.fuse(hand)
    g = torch.Generator().manual_seed(1)
    x, y = torch.rand(B, 1, 28, 28, generator=g), torch.randint(0, 10, (B,), generator=g)
    static = x.unsqueeze(0).expand(T, *x.shape)
    return {"build_network": _step(net, x, y, 10), "by hand + plif.fuse": _step(hand, static, y, 10),
            "by hand, as written": _step(written, static, y, 10)}, ("by hand + plif.fuse", "build_network")


def residual_case(T: int, B: int, frames: bool = False, c: int = 32, size: int = 32, net=None):
    """A CIFAR-10-shaped static image fed as a stride-0 view (both networks get the same tensor), or
    with ``frames`` 2-channel event frames (nothing to hoist)."""
    torch.manual_seed(0)
    channels = 2 if frames else 3
    net = net or fuse_nets.ResNet
    written = net(c=c, size=size, in_channels=channels)
    fused = net(c=c, size=size, in_channels=channels)
    copy_weights(written, fused)
    plif.fuse(fused)
    g = torch.Generator().manual_seed(1)
    if frames:
        x = torch.poisson(torch.full((T, B, 2, size, size), 0.3), generator=g)
    else:
        image = torch.rand(B, 3, size, size, generator=g)
        x = image.unsqueeze(0).expand(T, *image.shape)
    y = torch.randint(0, 10, (B,), generator=g)
    return {"as written": _step(written, x, y, 10), "plif.fuse": _step(fused, x, y, 10)}, ("as written", "plif.fuse")


CASES = {"paper": (paper_case, 8, 16, "within 1.10x of build_network"),
         "residual": (residual_case, 4, 16, ">= 1.3x faster fused"),
         "residual-frames": (lambda T, B: residual_case(T, B, frames=True), 4, 16, "(event frames: no static input)"),
         "sew-pool-frames": (lambda T, B: residual_case(T, B, frames=True, net=fuse_nets.PoolResNet), 4, 16,
                             "(max-pool downsampling, event frames)")}


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", default="paper,residual,residual-frames,sew-pool-frames")
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--T", type=int, help="time-steps (default: 8 for paper, 4 for residual)")
    p.add_argument("--B", type=int, help="batch (default: 16)")
    p.add_argument("--threads", type=int)
    p.add_argument("--bound", action="store_true", help="also time the fused step's products alone")
    p.add_argument("--json", help="write the results here")
    a = p.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    results = {"machine": f"{torch.__version__}, {torch.get_num_threads()} threads", "cases": {}}
    for name in a.case.split(","):
        make, T, B, target = CASES[name]
        T, B = a.T or T, a.B or B
        steps, (slow, fast) = make(T, B)
        if a.bound:
            steps[fast]()  # the first step loads kernels and makes the optimizer state: not recorded
            steps["bound"] = replay(record_products(steps[fast]))
        cpu, wall = alternate(steps, a.rounds, a.warmup)
        med = {k: statistics.median(v) * 1e3 for k, v in wall.items()}
        med_cpu = {k: statistics.median(v) * 1e3 for k, v in cpu.items()}
        ratio = med[slow] / med[fast]
        print(f"\n{name} (T{T} B{B}, {a.rounds} rounds in turns; target: {target})")
        for k in steps:
            print(f"  {k:24s} {med[k]:8.1f} ms wall  {med_cpu[k]:8.1f} ms cpu")
        print(f"  {slow} / {fast}: {ratio:.3f} (wall), {med_cpu[slow] / med_cpu[fast]:.3f} (cpu)")
        if a.bound:
            print(f"  {fast} / bound: {med[fast] / med['bound']:.3f} (wall), {med_cpu[fast] / med_cpu['bound']:.3f} (cpu)")
        results["cases"][name] = {"T": T, "B": B, "wall_ms": med, "cpu_ms": med_cpu, "ratio": ratio,
                                  "ratio_of": [slow, fast], "target": target}
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))
    return results


if __name__ == "__main__":
    main()
