"""Spike-only inference vs the float path on CPU: whole network and each spike-fed layer.

    python benchmarks/bench_inference.py --dataset mnist --batch 16 --std 1.0

An untrained paper network is given trained-like activity (``plif.deploy.synthetic.liven_``;
``--std``/``--shift`` move the firing rates), BN is folded, then the same network runs with
dense conv/linear layers (float path) and with gather-accumulate layers for spike inputs.  Both
produce the predictions printed as ``same predictions``.
"""
from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F
from torch import nn

from plif.deploy import fold_batchnorm, spike_fed_layers, to_spike_inference
from plif.deploy.spike_ops import gather_conv2d, gather_linear
from plif.deploy.synthetic import liven_
from plif.models import build_zoo
from plif.neurons import SpikingNeuron


def timed(fn, repeat: int) -> float:
    fn()  # warm-up
    t = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - t) / repeat * 1e3


@torch.no_grad()
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="mnist")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--std", type=float, default=1.0, help="pre-activation spread given to every layer")
    ap.add_argument("--shift", type=float, default=0.2, help="BN shift given to every layer")
    args = ap.parse_args()
    torch.manual_seed(0)
    net = build_zoo(args.dataset)
    x = torch.randn(args.batch, *net.input_shape)
    liven_(net, x, std=args.std, shift=args.shift)
    dense = fold_batchnorm(net)
    sparse = to_spike_inference(net, max_density=1.0)  # gather path everywhere spikes come in
    auto = to_spike_inference(net)  # gather below the measured crossover density, GEMM above
    print(f"{args.dataset}: T={net.T}, batch {args.batch}, {torch.get_num_threads()} threads, {net.spec}")

    # per spike-fed layer: its input density, dense vs gather time on that very input
    h = x.unsqueeze(0).expand(net.T, *x.shape)
    fed = set(spike_fed_layers(dense))
    print(f"{'layer':>5}  {'kind':12s} {'in density':>10}  {'dense ms':>9}  {'gather ms':>9}  speedup")
    for i, layer in enumerate(dense.layers):
        m = getattr(layer, "layer", None)
        if i in fed and isinstance(m, (nn.Conv2d, nn.Linear)):
            s = h.flatten(0, 1)
            if isinstance(m, nn.Linear):
                wt = m.weight.t().contiguous()
                td = timed(lambda: F.linear(s, m.weight, m.bias), args.repeat)
                tg = timed(lambda: gather_linear(s, wt, m.bias), args.repeat)
            else:
                td = timed(lambda: m(s), args.repeat)
                tg = timed(lambda: gather_conv2d(s, m.weight, m.bias, m.stride, m.padding), args.repeat)
            print(f"{i:>5}  {dense.info[i].token:12s} {float(s.mean()):>10.4f}  {td:>9.2f}  {tg:>9.2f}  {td / tg:6.2f}x")
        h = layer(h)
        if isinstance(layer, SpikingNeuron):
            print(f"{i:>5}  {'PLIF rate':12s} {float(h.mean()):>10.4f}")

    t_dense = timed(lambda: dense(x), args.repeat)
    t_sparse = timed(lambda: sparse(x), args.repeat)
    t_auto = timed(lambda: auto(x), args.repeat)
    yd, ys, ya = dense(x), sparse(x), auto(x)
    same = lambda a, b: bool(torch.equal(a.mean(0).argmax(-1), b.mean(0).argmax(-1)))  # noqa: E731
    print(f"whole network, ms per batch: float {t_dense:.1f} | spike-only (gather everywhere) {t_sparse:.1f} "
          f"({t_dense / t_sparse:.2f}x) | spike-only auto {t_auto:.1f} ({t_dense / t_auto:.2f}x)")
    print(f"same predictions: gather {same(yd, ys)}, auto {same(yd, ya)}; "
          f"output spikes differing: {int((yd != ys).sum())} / {yd.numel()}")


if __name__ == "__main__":
    main()
