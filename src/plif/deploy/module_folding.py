"""BatchNorm folding and spike-only inference for any ``nn.Module`` plif trains, not only a network in
the paper's notation: the residual zoo, converted SpikingJelly models, networks written by hand.

The model's forward is traced with ``torch.fx`` as :func:`plif.fuse` traces it (plif's layers and
torch's are leaves, every other module is traced through).  A convolution or linear layer whose
output is read by one BatchNorm and nothing else, each called once, is a pair, as
``torch.fx.experimental.optimization.fuse`` finds conv → BN; in a copy of the model the pair's layer
becomes the folded one (:func:`plif.layers.fold_bn_into`) and its BatchNorm an identity, so the
model's own forward (shortcuts, pooling, any Python) runs unchanged.  A module FX cannot trace keeps
its forward and is searched child by child.  A notation network inside runs
:func:`plif.deploy.fold_batchnorm`'s own layer walk.

Spike-only inference (:func:`module_spike_inference`) then replaces each conv/linear layer whose
input is spikes in evaluation mode (a neuron's output, through max-pooling, flatten, views and
dropout, as :func:`plif.fuse` reads the graph) by its gather-accumulate form.
"""
from __future__ import annotations

import copy

from torch import fx, nn

from ..layers import TimeFolded, fold_bn_into, unwrap
from ..models.fusion import _binary_nodes, _name, _NotTraced, _trace, fuse

__all__ = ["conv_bn_pairs", "fold_module_batchnorm", "spike_fed_modules", "module_spike_inference", "replace_networks"]

_FOLDS_INTO = (nn.Conv2d, nn.Linear)


def _foldable_bn(m: nn.Module) -> bool:
    bn = unwrap(m)
    return isinstance(bn, nn.modules.batchnorm._BatchNorm) and bn.track_running_stats and bn.running_mean is not None


def _pairs_in_graph(graph: fx.Graph, module: nn.Module) -> list[tuple[str, str]]:
    calls: dict[str, int] = {}
    for n in graph.nodes:
        if n.op == "call_module":
            calls[n.target] = calls.get(n.target, 0) + 1
    pairs = []
    for n in graph.nodes:
        src = n.args[0] if n.op == "call_module" and len(n.args) == 1 and not n.kwargs else None
        if not isinstance(src, fx.Node) or src.op != "call_module" or len(src.users) != 1:
            continue
        if calls[n.target] != 1 or calls[src.target] != 1:
            continue  # a module called twice: folding one call would change the other
        layer, bn = module.get_submodule(src.target), module.get_submodule(n.target)
        if _synapse(layer) and _foldable_bn(bn):
            pairs.append((src.target, n.target))
    return pairs


def _synapse(m: nn.Module) -> bool:
    """A conv/linear layer, bare or time-folded: what a BN folds into, what spike-only inference gathers."""
    return type(m) in (TimeFolded, *_FOLDS_INTO) and isinstance(unwrap(m), _FOLDS_INTO)


def _per_graph(model: nn.Module, read, prefix: str = "") -> list:
    """What ``read(graph, module)`` finds (qualified names, or tuples of them) in each part of ``model``
    FX traces: the model itself, or child by child below a module it cannot trace.  A notation network
    is left to its own layer walk."""
    from ..models import SpikingNetwork

    if isinstance(model, SpikingNetwork):
        return []
    try:
        graph = _trace(model)
    except _NotTraced:
        return [x for child_name, child in model.named_children()
                for x in _per_graph(child, read, _name(prefix, child_name))]
    return [tuple(_name(prefix, t) for t in x) if isinstance(x, tuple) else _name(prefix, x) for x in read(graph, model)]


def _pairs(model: nn.Module) -> list[tuple[str, str]]:
    return _per_graph(model, _pairs_in_graph)


def conv_bn_pairs(model: nn.Module) -> list[tuple[str, str]]:
    """The qualified names ``(layer, batchnorm)`` of every pair of ``model`` that
    :func:`fold_module_batchnorm` folds, in the order of its forward (of the model as written:
    a fused model is read through a copy with its fusion undone)."""
    return _pairs(fuse(copy.deepcopy(model), "none"))


def _set(model: nn.Module, qualname: str, new: nn.Module) -> None:
    parent, _, attr = qualname.rpartition(".")
    setattr(model.get_submodule(parent) if parent else model, attr, new)


def fold_module_batchnorm(model: nn.Module) -> nn.Module:
    """A copy of ``model`` in eval mode with each BatchNorm that reads only a conv/linear layer's
    output folded into that layer (:func:`conv_bn_pairs`); the rest runs as written.  Equal to the
    model's eval output up to the rounding of the folded weights; the model is not modified."""
    out = fuse(copy.deepcopy(model), "none").eval()  # as written: the fused runs would bypass the swap
    for layer_name, bn_name in _pairs(out):
        layer, bn = out.get_submodule(layer_name), out.get_submodule(bn_name)
        folded = fold_bn_into(unwrap(layer), unwrap(bn)).eval()
        _set(out, layer_name, TimeFolded(folded) if isinstance(layer, TimeFolded) else folded)
        _set(out, bn_name, nn.Identity())
    return out.eval()


def replace_networks(model: nn.Module, convert) -> nn.Module:
    """``model`` with each notation network inside it (not ``model`` itself) replaced by ``convert(it)``:
    how :func:`plif.deploy.fold_batchnorm` and :func:`plif.deploy.to_spike_inference` give those their own
    layer walk."""
    from ..models import SpikingNetwork

    for name, m in list(model.named_modules()):
        if isinstance(m, SpikingNetwork) and name and model.get_submodule(name) is m:
            _set(model, name, convert(m))
    return model


def _spike_fed_in_graph(graph: fx.Graph, module: nn.Module) -> list[str]:
    binary = _binary_nodes(graph, module, spikes_in=False, training=False)
    fed: dict[str, bool] = {}  # a layer called twice is spike-fed only where both calls are
    for n in graph.nodes:
        if n.op == "call_module" and _synapse(module.get_submodule(n.target)):
            spikes = bool(n.args) and isinstance(n.args[0], fx.Node) and binary[n.args[0]]
            fed[n.target] = fed.get(n.target, True) and spikes
    return [t for t, spikes in fed.items() if spikes]


def _spike_fed(model: nn.Module) -> list[str]:
    return _per_graph(model, _spike_fed_in_graph)


def spike_fed_modules(model: nn.Module) -> list[str]:
    """The qualified names of ``model``'s conv/linear layers whose input is spikes in evaluation mode
    (of the model as written), in the order of its forward; a module called more than once counts
    only where every call is fed spikes."""
    return _spike_fed(fuse(copy.deepcopy(model), "none"))


def module_spike_inference(model: nn.Module, max_density: float | None = None, validate: bool = True) -> nn.Module:
    """The BN-folded eval copy of ``model`` (:func:`fold_module_batchnorm`) with each spike-fed
    ``Conv2d``/``Linear`` (:func:`spike_fed_modules`) in its gather-accumulate form; what
    :func:`plif.deploy.to_spike_inference` gives any module."""
    from .spike_ops import gather_form

    out = fold_module_batchnorm(model)
    for name in _spike_fed(out):
        layer = out.get_submodule(name)
        gather = gather_form(unwrap(layer), max_density, validate)
        _set(out, name, TimeFolded(gather) if isinstance(layer, TimeFolded) else gather)
    return out.eval()
