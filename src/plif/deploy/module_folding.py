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
from ..models.fusion import _binary_nodes, _NotTraced, _trace, fuse

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
        if isinstance(unwrap(layer), _FOLDS_INTO) and type(layer) in (TimeFolded, *_FOLDS_INTO) and _foldable_bn(bn):
            pairs.append((src.target, n.target))
    return pairs


def _pairs(model: nn.Module, prefix: str = "") -> list[tuple[str, str]]:
    from ..models import SpikingNetwork

    if isinstance(model, SpikingNetwork):
        return []  # its own layer walk (plif.deploy.fold_batchnorm) folds it
    name = lambda t: f"{prefix}.{t}" if prefix else t  # noqa: E731
    try:
        graph = _trace(model)
    except _NotTraced:
        return [p for child_name, child in model.named_children() for p in _pairs(child, name(child_name))]
    return [(name(a), name(b)) for a, b in _pairs_in_graph(graph, model)]


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


def _spike_fed(model: nn.Module, prefix: str = "") -> list[str]:
    from ..models import SpikingNetwork

    if isinstance(model, SpikingNetwork):
        return []  # its own structure walk (plif.deploy.to_spike_inference)
    name = lambda t: f"{prefix}.{t}" if prefix else t  # noqa: E731
    try:
        graph = _trace(model)
    except _NotTraced:
        return [p for child_name, child in model.named_children() for p in _spike_fed(child, name(child_name))]
    binary = _binary_nodes(graph, model, spikes_in=False, training=False)
    fed: dict[str, bool] = {}  # a layer called twice is spike-fed only where both calls are
    for n in graph.nodes:
        if n.op == "call_module" and isinstance(unwrap(model.get_submodule(n.target)), _FOLDS_INTO) \
                and type(model.get_submodule(n.target)) in (TimeFolded, *_FOLDS_INTO):
            spikes = bool(n.args) and isinstance(n.args[0], fx.Node) and binary[n.args[0]]
            fed[n.target] = fed.get(n.target, True) and spikes
    return [name(t) for t, spikes in fed.items() if spikes]


def spike_fed_modules(model: nn.Module) -> list[str]:
    """The qualified names of ``model``'s conv/linear layers whose input is spikes in evaluation mode
    (of the model as written), in the order of its forward; a module called more than once counts
    only where every call is fed spikes."""
    return _spike_fed(fuse(copy.deepcopy(model), "none"))


def module_spike_inference(model: nn.Module, max_density: float | None = None, validate: bool = True) -> nn.Module:
    """The BN-folded eval copy of ``model`` (:func:`fold_module_batchnorm`) with each spike-fed
    ``Conv2d``/``Linear`` (:func:`spike_fed_modules`) in its gather-accumulate form; what
    :func:`plif.deploy.to_spike_inference` gives any module."""
    from .spike_ops import DEFAULT_MAX_DENSITY, DEFAULT_MAX_DENSITY_CONV, GatherConv2d, GatherLinear

    out = fold_module_batchnorm(model)
    for name in _spike_fed(out):
        layer = out.get_submodule(name)
        syn = unwrap(layer)
        if isinstance(syn, nn.Linear):
            gather = GatherLinear(syn, DEFAULT_MAX_DENSITY if max_density is None else max_density, validate)
        else:
            gather = GatherConv2d(syn, DEFAULT_MAX_DENSITY_CONV if max_density is None else max_density, validate)
        _set(out, name, TimeFolded(gather) if isinstance(layer, TimeFolded) else gather)
    return out.eval()
