"""``plif spec`` (layer table for a network string) and ``plif zoo`` (the paper's networks and the residual zoo)."""
from __future__ import annotations


def _shape(text: str) -> tuple:
    from ..models.notation import MAX_INT

    try:
        if not text.isascii():  # int() takes any script's digits; the notation only ASCII ones
            raise ValueError(text)
        shape = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise ValueError(f"--input must be comma-separated integers like 1,28,28, got {text!r}") from None
    if len(shape) not in (1, 3) or not all(1 <= v <= MAX_INT for v in shape):
        raise ValueError(f"--input must be C,H,W or N with each between 1 and {MAX_INT} (2^31-1), got {text!r}")
    return shape




def run_spec(args) -> int:
    import torch

    from ..models import build_network, layer_table

    # shapes and parameter counts need no weights: meta tensors have sizes but no storage
    with torch.device("meta"):
        net = build_network(args.network, _shape(args.input), args.T, neuron=args.neuron,
                            tau0=args.tau0)
    print(layer_table(net))
    return 0


def _module_zoo() -> dict:
    """plif's networks written as modules: the residual zoo and the spiking transformers."""
    from ..models.residual import RESIDUAL_ZOO
    from ..models.spikformer import TRANSFORMER_ZOO

    return {**RESIDUAL_ZOO, **TRANSFORMER_ZOO}


def _residual_zoo(name: str | None) -> None:
    """List plif's residual zoo (:mod:`plif.models.residual`) and spiking transformers
    (:mod:`plif.models.spikformer`), or show entry ``name``'s modules."""
    import torch

    from ..catalog import get_dataset
    from ..models.residual import parameter_count

    for entry, (factory, dataset) in _module_zoo().items():
        if name not in (None, entry):
            continue
        e = get_dataset(dataset)
        with torch.device("meta"):
            net = factory(e.input_shape, e.num_classes, fused=False)
        if name:
            print(net)
        shape = "x".join(map(str, e.input_shape))
        print(f"{entry:17s} {dataset:15s} input={shape:10s} params={parameter_count(net):>12,}  "
              f"plif train --model {entry} --dataset {dataset}")


def run_zoo(args) -> int:
    from ..catalog import DATASETS
    from ..models import build_zoo, layer_table
    import torch

    if args.name in _module_zoo():
        _residual_zoo(args.name)
        return 0
    names = [args.name] if args.name else list(DATASETS)
    for name in names:
        with torch.device("meta"):  # shapes and counts only, as in plif spec: no weights allocated
            net = build_zoo(name, authors_code=args.authors_code)
        if args.name:
            print(layer_table(net))
        else:
            params = sum(p.numel() for p in net.parameters())
            print(f"{name:15s} T={net.T:<3d} input={'x'.join(map(str, net.input_shape)):10s} params={params:>12,}  {net.spec}")
    if not args.name:
        print("\nresidual networks and transformers (plif.models.residual, plif.models.spikformer; input channels and "
              "classes follow --dataset):")
        _residual_zoo(None)
    return 0


def _zoo_name(text: str) -> str:
    """An argparse ``type``: a name that is not empty or blank (``plif zoo ''`` listed everything)."""
    import argparse

    if not text.strip():
        raise argparse.ArgumentTypeError(f"{text!r}: give a dataset or residual network name, or leave it out to "
                                         "list them all")
    return text


def register(sub) -> None:
    from .checks import MAX_INT, int_in

    p = sub.add_parser("spec", help="print the layer table of a network written in the paper's notation")
    p.add_argument("network", help='e.g. "{c128k3s1-BN-PLIF-MPk2s2}*2-DP-FC2048-PLIF-DP-FC100-PLIF-APk10s10"')
    p.add_argument("--input", default="1,28,28", help="per-sample input shape C,H,W (or N) [1,28,28]")
    p.add_argument("--T", type=int_in(1, MAX_INT), default=8, help="time-steps [8]")
    from ..neurons import NEURONS

    p.add_argument("--neuron", choices=list(NEURONS), help="replace every neuron token")
    p.add_argument("--tau0", type=float, default=2.0, help="initial tau of PLIF / tau of LIF [2]")
    p.set_defaults(func=run_spec)

    z = sub.add_parser("zoo", help="list the paper's networks and the residual zoo, or show one")
    from ..catalog import DATASETS

    z.add_argument("name", nargs="?", type=_zoo_name, help=f"dataset name ({', '.join(DATASETS)}) or a residual network "
                   "(sew-resnet18, sew-7b-net, spikformer, ...: the list without a name shows them)")
    z.add_argument("--authors-code", action="store_true", help="the authors' code's variant of the network")
    z.set_defaults(func=run_zoo)
