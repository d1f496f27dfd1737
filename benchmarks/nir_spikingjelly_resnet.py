"""SpikingJelly's ``sew_resnet18`` (ParametricLIFNode) through ``plif.from_spikingjelly`` and NIR: the
output of each importer that can run the file against SpikingJelly's own forward (not a test: seconds
per importer on a CPU; the tests run a hand-written residual module).

    python benchmarks/nir_spikingjelly_resnet.py [--cnf ADD] [--size 16] [--T 2] [--batch 2] [--seed 0]

SpikingJelly 2.0's own NIR export (nirtorch's tracer) turns PLIF into a fixed LIF and fails on
``sew_resnet18``; here the converted model is exported by plif for each target (Norse, snnTorch,
Sinabs, generic), each file run by its importer on a random static image repeated over T, in
float32, and plif's importer also in float64 against SpikingJelly in float64 (the Norse and Sinabs
files hold a node of zeros per downsampling block, plif.deploy.nir_order).  A target whose importer
cannot run the graph prints the refusal.  The fully connected layer's
weights are scaled by 6 so that outputs are not all zero (as tests/interop does).
"""
import argparse
import time
import warnings

import torch

from plif.bench.spikingjelly import spikingjelly_model, spikingjelly_unavailable
from plif.deploy.nir_compare import framework_spikes
from plif.deploy.nir_export import NIRExportError, to_nir
from plif.deploy.nir_import import from_nir
from plif.interop import from_spikingjelly

IMPORTER = {"generic": "plif", "norse": "norse", "snntorch": "snntorch", "sinabs": "sinabs"}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cnf", default="ADD", help="SEW connect function [ADD]; AND/IAND are refused by NIR export")
    p.add_argument("--size", type=int, default=16, help="image side (3 channels) [16]")
    p.add_argument("--T", type=int, default=2)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    why = spikingjelly_unavailable()
    if why is not None:
        raise SystemExit(f"SpikingJelly unavailable: {why}")
    from spikingjelly.activation_based import functional, neuron, surrogate

    warnings.simplefilter("ignore")
    torch.manual_seed(args.seed)
    model = spikingjelly_model("sew_resnet").sew_resnet18(cnf=args.cnf, num_classes=10,
                                                          spiking_neuron=neuron.ParametricLIFNode,
                                                          surrogate_function=surrogate.ATan(), detach_reset=True)
    functional.set_step_mode(model, "m")
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.Linear):
                m.weight.mul_(6)
    model.eval()
    net = from_spikingjelly(model).eval()
    shape = (3, args.size, args.size)
    x = (torch.rand(1, args.batch, *shape) * 3).expand(args.T, args.batch, *shape).contiguous()
    with torch.no_grad():
        want = model(x)
        functional.reset_net(model)
    print(f"sew_resnet18 ({args.cnf}), input {list(x.shape)}: SpikingJelly's outputs not 0: {int((want != 0).sum())} "
          f"of {want.numel()}")
    for target, importer in IMPORTER.items():
        start = time.perf_counter()
        try:
            graph = to_nir(net, input_shape=shape, T=args.T, target=target)
        except NIRExportError as e:
            print(f"{target:<9} refused: {e}")
            continue
        _, got = framework_spikes(graph, x, importer)
        differ = int((got != want).sum()) if got.shape == want.shape else -1
        print(f"{target:<9} {len(graph.nodes)} nodes; {importer}'s outputs differing from SpikingJelly's: {differ} "
              f"of {want.numel()} ({time.perf_counter() - start:.1f} s)")
    graph = to_nir(net, input_shape=shape, T=args.T, target="generic")
    double = model.double()
    functional.reset_net(double)
    with torch.no_grad():
        want64, got64 = double(x.double()), from_nir(graph).double()(x.double())
    print(f"float64: plif's importer against SpikingJelly: {int((got64 != want64).sum())} of {want64.numel()} differ")
    try:
        import norse.torch
    except ImportError:
        return
    graph = to_nir(net, input_shape=shape, T=args.T, target="norse")
    module, state, outs = norse.torch.from_nir(graph, dt=float(graph.metadata["dt"])).double(), None, []
    with torch.no_grad():
        for x_t in x.double():
            y, state = module(x_t, state)
            outs.append(y)
    print(f"float64: Norse (its module in float64) against SpikingJelly: "
          f"{int((torch.stack(outs) != want64).sum())} of {want64.numel()} differ")


if __name__ == "__main__":
    main()
