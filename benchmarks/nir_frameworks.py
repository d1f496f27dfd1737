"""Full-size zoo networks through NIR into Norse, snnTorch and Sinabs (and plif's own importer):
spike counts per layer and the spikes that differ from plif's (not a test: minutes on a CPU; the
tests run narrow versions).

    python benchmarks/nir_frameworks.py dvs128-gesture cifar10-dvs [--samples 2] [--T 20] [--seeds 0,1,2]
                                        [--frameworks plif,norse,snntorch,sinabs] [--old-threshold] [--bn fold]

Weights are random (one network per ``--seeds`` entry), rescaled by ``liven_`` so that every layer
fires (BatchNorm statistics calibrated on a random batch), with a different learned-like
``k = sigmoid(w)`` per layer.  Whether an importer that rounds differently from plif (snnTorch,
Sinabs) hits a potential within its rounding of the threshold depends on the weights: compare seeds.  ``--old-threshold`` writes ``v_threshold = V_th`` as plif did before
(NIR's ``>`` then misses every potential exactly on the threshold).  The spikes are compared with
the network as trained, or with ``--bn fold`` with the BN-folded network that file holds.
"""
import argparse
import time

import numpy as np
import torch

from plif.deploy.nir_compare import compare_spikes
from plif.deploy.nir_export import to_nir
from plif.deploy.nir_targets import DEFAULT_TARGET
from plif.deploy.synthetic import liven_
from plif.catalog import get_dataset
from plif.models.zoo import build_zoo


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("networks", nargs="+", help="zoo names (mnist, cifar10, dvs128-gesture, ...)")
    p.add_argument("--samples", type=int, default=2)
    p.add_argument("--T", type=int, default=None, help="time-steps [the zoo's]")
    p.add_argument("--seeds", default="0", help="comma-separated seeds of the random weights and input [0]")
    p.add_argument("--frameworks", default="norse,snntorch,sinabs", help="importers: plif (plif.deploy.from_nir, "
                   "on the default file), norse, snntorch, sinabs [norse,snntorch,sinabs]")
    p.add_argument("--old-threshold", action="store_true")
    p.add_argument("--bn", choices=("exact", "fold"), default="exact", help="how the export writes BatchNorm")
    args = p.parse_args(argv)
    for name in args.networks:
        for seed in map(int, args.seeds.split(",")):
            compare(name, seed, args)


def compare(name, seed, args):
    torch.manual_seed(seed)
    e = get_dataset(name)
    net = build_zoo(name, T=args.T)
    liven_(net, torch.randn(8, *e.input_shape))
    with torch.no_grad():
        for i, m in enumerate(net.neuron_layers()):
            m.w.fill_(0.35 * i - 0.6)
    x = torch.randn(args.samples, *e.input_shape).unsqueeze(0).expand(net.T, args.samples, *e.input_shape)
    for fw in args.frameworks.split(","):
        # plif's importer runs the default file (Norse's)
        graph = to_nir(net, target=DEFAULT_TARGET if fw == "plif" else fw, bn=args.bn)
        if args.old_threshold:
            for node in graph.nodes.values():
                if type(node).__name__ in ("LIF", "IF") and not np.all(node.v_threshold == 0.5):
                    node.v_threshold = np.nextafter(node.v_threshold, np.float32(np.inf))
        t0 = time.perf_counter()
        rows = compare_spikes(net, graph, x.contiguous(), fw)
        print(f"{name} seed {seed} T={net.T} B={args.samples} {fw} ({time.perf_counter() - t0:.0f} s)"
              f"{' old threshold' if args.old_threshold else ''}", flush=True)
        for r in rows:
            print(f"  {r['node']:>16}  plif {r['plif']:>9}  {fw} {r[fw]:>9}  differ {r['differ']}", flush=True)

if __name__ == "__main__":
    main()
