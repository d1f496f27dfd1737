"""Why snnTorch and Sinabs differ from plif on full-size networks: the first spiking layer, from the
neuron update's rounding alone (not a test: a measurement for docs/deployment.md).

    python benchmarks/nir_first_layer.py dvs128-gesture [--seeds 0,1,2,3,4] [--samples 2]

The network, weights, k and input are those of ``benchmarks/nir_frameworks.py`` (same seeds).  The
first spiking layer's input current ``X`` (plif's conv and BatchNorm, which every importer computes
as plif does where Norse agrees) is fed to three float32 recursions, each written as the importer
computes it:

- plif: ``H = V + k (X - V)``, spike ``H >= V_th``, ``V = 0`` where it spiked (plif's own layer);
- Sinabs through ``sinabs_from_nir``: ``v = a v + (1 - a) X`` with ``a = 1 - k`` (float32), spike
  ``v >= V_th``, reset to 0 (sinabs.layers.functional.lif);
- snnTorch's ``import_from_nir``: ``U = b U + X`` with ``b = 1 - dt/tau`` and threshold
  ``v_threshold / (dt/tau)`` (numpy float32, dt = 1e-4), spike ``U - thr > 0``, reset to 0
  (snntorch Leaky, reset_mechanism="zero").

It prints the first-layer spikes that differ from plif's; ``benchmarks/nir_frameworks.py`` prints
what the importers themselves gave (equal counts: the cause is this rounding).
"""
import argparse

import numpy as np
import torch

from plif.catalog import get_dataset
from plif.deploy.nir_export import tau_for_rate
from plif.deploy.nir_import import threshold_to_nir
from plif.deploy.synthetic import liven_
from plif.models.zoo import build_zoo
from plif.neurons import SpikingNeuron


def first_layer(name: str, seed: int, samples: int):
    """``(X [T, B, ...] into the first spiking layer, that layer, its spikes)`` as the frameworks benchmark builds them."""
    torch.manual_seed(seed)
    e = get_dataset(name)
    net = build_zoo(name)
    liven_(net, torch.randn(8, *e.input_shape))
    with torch.no_grad():
        for i, m in enumerate(net.neuron_layers()):
            m.w.fill_(0.35 * i - 0.6)
    x = torch.randn(samples, *e.input_shape).unsqueeze(0).expand(net.T, samples, *e.input_shape).contiguous()
    h = x
    with torch.no_grad():
        for layer in net.layers:
            if isinstance(layer, SpikingNeuron):
                return h, layer, layer(h)
            h = layer(h)
    raise ValueError(f"{name}: no spiking layer")


def recur(X, step):
    v, out = torch.zeros_like(X[0]), []
    for x_t in X:
        v, s = step(v, x_t)
        out.append(s)
    return torch.stack(out)


def sinabs_spikes(X, k, v_th):
    a = 1 - k  # float32, as sinabs_from_nir sets alpha_mem

    def step(v, x):
        v = a * v + (1 - a) * x
        s = (v >= v_th).float()
        return v * (1 - s), s
    return recur(X, step)


def snntorch_spikes(X, k, v_th):
    dt = 1e-4
    tau = tau_for_rate(np.array([k], dtype=np.float32), dt)  # what --for snntorch writes
    w_scale = 1.0 * dt / tau
    beta = torch.as_tensor(1 - (dt / tau))
    thr = torch.as_tensor(np.unique(threshold_to_nir(np.float32(v_th)) / np.unique(w_scale)[0])[0])

    def step(u, x):
        u = beta.clamp(0, 1) * u + x
        s = ((u - thr) > 0).float()
        return u - s * u, s
    return recur(X, step)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("networks", nargs="+")
    p.add_argument("--seeds", default="0")
    p.add_argument("--samples", type=int, default=2)
    args = p.parse_args(argv)
    for name in args.networks:
        for seed in map(int, args.seeds.split(",")):
            X, layer, want = first_layer(name, seed, args.samples)
            k = float(layer.k(X[:1]).detach().reshape(-1)[0])
            k32 = torch.tensor(k, dtype=torch.float32)
            v_th = layer.cfg.v_threshold
            for fw, got in (("sinabs", sinabs_spikes(X, k32, v_th)), ("snntorch", snntorch_spikes(X, k, v_th))):
                print(f"{name} seed {seed} first layer: {fw} {int((got != want).sum())} of {int(want.sum())} "
                      f"spikes differ", flush=True)


if __name__ == "__main__":
    main()
