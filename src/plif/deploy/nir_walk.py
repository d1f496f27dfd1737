"""The graph NIR export walks: one list of operations for any network plif can trace.

A notation network (:class:`~plif.models.SpikingNetwork`) is its chain of layers, with the shapes its
builder knows.  Any other ``nn.Module`` is traced with ``torch.fx`` as :func:`plif.fuse` traces it
(plif's layers and torch's are leaves, every other submodule is traced through; a fused model is read
as written) and run once on a random input ``[T, B, *input_shape]`` to learn each value's shape; a
notation network inside it is expanded into its chain.  Each :class:`Op` is then one of:

- ``layer``: a leaf module (conv, BatchNorm, neuron, pooling, linear, voting, flatten), its input the
  sum of its ``inputs``;
- ``add``: ``a + b`` of two traced values (a SEW ADD shortcut, or the sum before a Spiking ResNet
  neuron) -- no node of its own: each reader of the sum gets edges from every value summed, since a
  NIR node sums its inputs;
- ``flatten``: the per-sample dimensions flattened (``x.flatten(2)``, ``view``/``reshape`` to that);
- ``same``: the value itself (dropout and ``nn.Identity`` at inference, ``contiguous``, ``clone``).

What NIR cannot express is refused in one line naming the module and the reason (:class:`WalkError`):
a product of two values (SEW AND/IAND, a gate), a constant added, a reduction over time, a module FX
cannot trace (the innermost one that fails is named), a forward that traces differently in training
and evaluation mode.
"""
from __future__ import annotations

import copy
import operator
from dataclasses import dataclass

import torch
from torch import fx, nn

from ..layers import TimeInvariantDropout, unwrap
from ..models.network import SpikingNetwork
from ..models.structure import keeps_binary, spike_inputs
from ..neurons import SpikingNeuron

__all__ = ["Op", "WalkError", "walk", "untraceable"]

# traced operations that give their input unchanged (at inference)
_SAME_METHODS = {"contiguous", "clone", "detach"}
_RESHAPE_METHODS = {"flatten", "view", "reshape"}
_ADDS = {operator.add, torch.add}


class WalkError(ValueError):
    """A network, or a part of one, that NIR cannot express."""


@dataclass
class Op:
    """One operation of the walk (see the module docstring): ``inputs`` are indices of earlier
    operations (-1: the network's input); ``shape`` the per-sample output shape; ``spikes`` whether
    its input is spikes in evaluation mode (what spike max-pooling needs); ``qualname`` the qualified
    name, in the walked model, of the module a ``layer`` runs (``""`` for the others): which module
    made which node, for whoever compares a node with the module (:mod:`.nir_compare`)."""

    kind: str  # layer, add, flatten, same
    name: str  # the stem of its NIR node names: a layer index (notation) or the qualified name, "." -> "_"
    where: str  # what an error names: "layer 3 (c4k3s1)" or "layer1.0.conv1 (Conv2d)"
    inputs: list
    shape: tuple
    module: nn.Module | None = None
    spikes: bool = False
    qualname: str = ""


def _chain(net: SpikingNetwork, inputs: list, qualname: str = "", in_spikes: bool = False) -> list[Op]:
    """A notation network's layers as a chain, named by layer index (prefixed by ``qualname`` inside a
    module); a dropout is the value itself."""
    ops: list[Op] = []
    fed = spike_inputs(list(net.layers), training=False, spikes_in=in_spikes)
    for i, (layer, info, binary) in enumerate(zip(net.layers, net.info, fed)):
        name = f"{qualname.replace('.', '_')}_{i}" if qualname else str(i)
        where = f"{qualname}.layers.{i} ({info.token})" if qualname else f"layer {i} ({info.token})"
        kind = "same" if isinstance(layer, TimeInvariantDropout) else "layer"
        ops.append(Op(kind, name, where, inputs, tuple(info.out_shape), layer, bool(binary),
                      f"{qualname}.layers.{i}" if qualname else f"layers.{i}"))
        inputs = [len(ops) - 1]
    return ops


def untraceable(model: nn.Module, prefix: str = "") -> tuple[str, str] | None:
    """``(qualified name, why)`` of the innermost module of ``model`` that FX cannot trace (a child
    that fails where its parent does), or None where ``model`` traces."""
    from ..models.fusion import _NotTraced, _plif_layer, _trace

    if _plif_layer(model) or not model._modules:
        return None
    try:
        _trace(model)
        return None
    except _NotTraced as e:
        for name, child in model.named_children():
            inner = untraceable(child, f"{prefix}.{name}" if prefix else name)
            if inner is not None:
                return inner
        return prefix, str(e)


def _where_fx(node: fx.Node, model: nn.Module) -> str:
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return f"the model ({type(model).__name__})"
    path, cls = list(stack.values())[-1]
    return f"{path} ({getattr(cls, '__name__', cls)})"


def _fx_name(node: fx.Node) -> str:
    """A traced function's name inside the module that calls it: ``layer1.0.add``, ``flatten``."""
    stack = node.meta.get("nn_module_stack") or {}
    path = list(stack.values())[-1][0] if stack else ""
    return f"{path}.{node.name}" if path else node.name


def _stem(qualname: str, taken: dict) -> str:
    stem = qualname.replace(".", "_") or "model"
    taken[stem] = taken.get(stem, 0) + 1
    return stem if taken[stem] == 1 else f"{stem}_call{taken[stem]}"


def walk(model: nn.Module, input_shape: tuple, T: int = 3, batch: int = 2) -> list[Op]:
    """The operations of ``model`` (eval mode) on per-sample input ``input_shape``, in forward order;
    the last one's value is the output.  A module is traced and run once on ``[T, batch, ...]``, as a
    float32 copy on the CPU (the operations hold that copy's layers)."""
    if isinstance(model, SpikingNetwork):
        return _chain(model, [-1], "", False)
    from ..models.fusion import _NotTraced, _trace, fuse

    model = fuse(copy.deepcopy(model), "none").float().cpu().eval()  # as trained: the weights a file holds
    try:
        graph = _trace(model)
    except _NotTraced as e:
        name, why = untraceable(model) or ("", str(e))
        part = model.get_submodule(name) if name else model
        where = f"{name} ({type(part).__name__})" if name else f"the model ({type(model).__name__})"
        raise WalkError(f"{where}: {why}: NIR export needs the whole forward as one graph") from None
    shapes = _shapes(model, graph, input_shape, T, batch)
    return _ops(model, graph, shapes, (T, batch))


@torch.no_grad()
def _shapes(model: nn.Module, graph: fx.Graph, input_shape: tuple, T: int, batch: int) -> dict:
    """Each node's output shape on a random input ``[T, batch, *input_shape]``."""
    gm = fx.GraphModule(model, graph)
    shapes: dict = {}

    class Recorder(fx.Interpreter):
        def run_node(self, n):
            out = super().run_node(n)
            shapes[n] = tuple(out.shape) if isinstance(out, torch.Tensor) else None
            return out

    x = torch.randn(T, batch, *input_shape, generator=torch.Generator().manual_seed(0))
    try:
        Recorder(gm).run(x)
    except Exception as e:  # noqa: BLE001 - the user's forward
        first = (str(e).strip().splitlines() or [""])[0][:160]
        raise WalkError(f"the model's forward fails on input [T, B, {', '.join(map(str, input_shape))}] "
                        f"({type(e).__name__}: {first}); is input_shape right?") from None
    return shapes


def _ops(model: nn.Module, graph: fx.Graph, shapes: dict, lead: tuple) -> list[Op]:
    ops: list[Op] = []
    index: dict = {}  # fx node -> index of the op giving its value
    spikes: dict = {}  # fx node -> whether its value is spikes in eval mode
    taken: dict = {}
    out = None
    for n in graph.nodes:
        where = _where_fx(n, model)
        shape = shapes.get(n)
        if n.op not in ("placeholder", "output", "get_attr") and (shape is None or tuple(shape[:2]) != lead):
            raise WalkError(f"{where}: {_what(n)} gives {'no tensor' if shape is None else list(shape)} for an "
                            f"input [T={lead[0]}, B={lead[1]}, ...]: NIR runs one time-step at a time, so every "
                            f"value must keep [T, B] first (no reduction over time or batch)")
        args = [a for a in n.args if isinstance(a, fx.Node)]
        src = args[0] if args else None
        if n.op == "placeholder":
            if index:
                raise WalkError(f"the model's forward takes a second input ({n.name}): NIR has one input")
            index[n], spikes[n] = -1, False
            continue
        if n.op == "output":
            out = n.args[0]
            if not isinstance(out, fx.Node):
                raise WalkError("the model's forward returns no single tensor (a tuple or a dict): NIR has one output")
            break
        if n.op == "get_attr":
            raise WalkError(f"{where}: reads {n.target} directly in its forward: NIR has no node for a stored tensor")
        per_sample = tuple(shape[2:])
        if n.op == "call_module":
            m = model.get_submodule(n.target)
            if len(args) != 1 or len(n.args) != 1 or n.kwargs:
                raise WalkError(f"{n.target} ({type(m).__name__}): called with {len(n.args) + len(n.kwargs)} "
                                f"arguments; NIR nodes take one input")
            fed = spikes[src]
            if isinstance(m, SpikingNetwork):
                chain = _chain(m, [index[src]], n.target, fed)
                for op in chain:
                    op.inputs = [i + len(ops) if i >= 0 and op is not chain[0] else i for i in op.inputs]
                ops += chain
                index[n], spikes[n] = len(ops) - 1, True
                continue
            inner = unwrap(m)
            if isinstance(m, TimeInvariantDropout) or isinstance(inner, (nn.Identity, nn.Dropout)):
                index[n], spikes[n] = index[src], fed
                continue
            ops.append(Op("layer", _stem(n.target, taken), f"{n.target} ({type(inner).__name__})", [index[src]],
                          per_sample, m, fed, n.target))
            spikes[n] = isinstance(m, SpikingNeuron) or (fed and keeps_binary(m, training=False))
        elif n.op == "call_function" and n.target in _ADDS or n.op == "call_method" and n.target in ("add", "__add__"):
            if len(args) != 2 or len(n.args) != 2 or n.kwargs:
                raise WalkError(f"{where}: {_what(n)} adds a constant or scales a term (alpha): NIR sums node "
                                f"inputs only")
            ops.append(Op("add", _stem(_fx_name(n), taken), where,
                          [index[args[0]], index[args[1]]], per_sample))
            spikes[n] = False
        elif (n.op == "call_method" and n.target in _RESHAPE_METHODS
              or n.op == "call_function" and n.target in (torch.flatten, torch.reshape)):
            src_shape = tuple(shapes[src][2:])
            if per_sample == src_shape:
                index[n], spikes[n] = index[src], spikes[src]
                continue
            if per_sample != (int(torch.tensor(src_shape).prod()),):
                raise WalkError(f"{where}: {_what(n)} reshapes {list(src_shape)} to {list(per_sample)}: NIR "
                                f"has only Flatten (of every per-sample dimension)")
            ops.append(Op("flatten", _stem(_fx_name(n), taken), where, [index[src]], per_sample))
            spikes[n] = spikes[src]
        elif n.op == "call_method" and n.target in _SAME_METHODS and len(args) == 1:
            index[n], spikes[n] = index[src], spikes[src]
            continue
        else:
            raise WalkError(f"{where}: {_what(n)}{_why(n)}")
        index[n] = len(ops) - 1
    return ops + ([Op("same", "output", "the output", [index[out]], tuple(shapes[out][2:]))] if out in index else [])


def _what(n: fx.Node) -> str:
    target = n.target if isinstance(n.target, str) else getattr(n.target, "__name__", str(n.target))
    return {"call_method": f".{target}()", "call_function": f"{target}()", "call_module": target}.get(n.op, n.name)


def _why(n: fx.Node) -> str:
    target = n.target if isinstance(n.target, str) else getattr(n.target, "__name__", "")
    if target in ("mul", "__mul__", "imul", "sub", "rsub", "__sub__", "__rsub__", "truediv"):
        return (" combines two values by a product or a difference (SEW AND/IAND, a gate): NIR nodes only sum "
                "their inputs")
    if target in ("mean", "sum", "amax", "max"):
        return " reduces a dimension: NIR runs one time-step at a time and has no reduction node"
    return " has no NIR node"
