"""``plif.fuse``: the networks researchers write themselves, at the speed of the notation's networks.

``fuse(model)`` finds every run ``conv (no bias) → BatchNorm2d → IF/LIF/PLIF [→ 2×2 max-pool]`` of a
model built from plif's layers (``TimeFolded(nn.Conv2d)``, ``TimeFolded(nn.BatchNorm2d)``, ``PLIF``,
``TimeFolded(nn.MaxPool2d)``, ...) and runs it as the fused block, through the memory plan a
:class:`~plif.models.SpikingNetwork` runs (:func:`plif.models.memory.make_plan`): the same steps,
the same fallbacks (evaluation mode, a device or dtype without kernels: the composed layers; a forward
or backward hook: the layers as written) and the same exactness.  Where it looks:

- a module's own ``forward`` (``self.sn1(self.bn1(self.conv1(x)))`` plus a shortcut) is traced with
  ``torch.fx``, plif's layers as leaves, through every submodule that is not one of plif's or
  torch's own layers; each chain of layers whose outputs have one user each (as
  ``torch.fx.experimental.optimization.fuse`` finds conv → BN) runs as one plan, and the module
  runs the traced code with those chains replaced (``forward`` of the module itself is replaced,
  its class becomes a subclass of its own, so its submodules, parameters and state dict stay);
- an ``nn.Sequential`` that FX cannot trace runs its children as one plan, and a module FX cannot
  trace (a Python branch on a tensor's value, say) keeps its forward: its submodules are fused;
- a forward that FX traces differently in training and evaluation mode (``if self.training:``)
  is not rewritten (FX would freeze one of them): its submodules are fused;
- a :class:`~plif.models.SpikingNetwork` inside (or the model itself) runs its own plan with
  ``memory`` (:meth:`~plif.models.SpikingNetwork.set_memory`).

A layer whose input is spikes (the output of a neuron, through max-pooling or flatten) keeps it as
one byte (``spike_storage``) inside a user's model too.  An input ``x.unsqueeze(0).expand(T, ...)``
(stride 0 along time: a static image fed at each step) goes through a run's first convolution
once and the fused block reads its output repeated in place, as :func:`~plif.models.build_network`'s
static input does (:func:`plif.models.memory.hoist_static`).

The model is changed in place and returned; its parameters, buffers, submodules and state dict keys
are the same objects and names, so a checkpoint of either loads into the other and an optimizer made
before ``fuse`` keeps training it.  After replacing a module that is not a layer (a block), fuse again;
a replaced layer (``convert_sync_batchnorm``) is seen at the next call.  ``fuse(model, "none")`` gives
the model back as written.  A fused model saves as a state dict, deep-copies, and pickles (it is
fused again when loaded).  A slice of a fused ``nn.Sequential`` (``model[:3]``) is the slice as written,
the same children (``plif.fuse`` it to run it fused).
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import replace

import torch
from torch import fx, nn

from ..layers import PerStepBatchNorm, SpikeConvBN, TimeFolded, TimeInvariantDropout, Voting, unwrap
from ..layers.pool_rule import max_pool_rule
from ..neurons import SpikingNeuron
from .memory import DEFAULT_MEMORY, MemoryOptions, memory_options, why_not_fused
from .plan import LayerPlan, hooked
from .structure import hoists_first_layer, keeps_binary

__all__ = ["fuse", "fused_blocks", "FusedSequential", "traced_calls"]

_BINARY_METHODS = {"flatten", "view", "reshape", "contiguous", "unflatten", "clone", "detach"}
"""Tensor methods whose output is binary where their input is (a view or copy of the same values)."""
_BINARY_FUNCTIONS = {torch.flatten, torch.reshape}


def _plif_layer(m: nn.Module) -> bool:
    """One of plif's layers (a time wrapper, a neuron, dropout, voting, a whole network): a leaf for FX."""
    from .network import SpikingNetwork

    return isinstance(m, (TimeFolded, PerStepBatchNorm, TimeInvariantDropout, Voting, SpikeConvBN, SpikingNeuron,
                          SpikingNetwork))


class FusedSequential(nn.Sequential):
    """An ``nn.Sequential`` whose children run as one plan (:func:`fuse`); the same children, names
    and state dict.  ``fuse(model, "none")`` makes it an ``nn.Sequential`` again."""

    _plif_original = nn.Sequential

    def forward(self, x):
        return self._plif_run(x, *self)

    def __getitem__(self, idx):
        return _sequential_item(self, idx)


def _sequential_item(seq: nn.Sequential, idx):
    """``seq[idx]`` of a fused ``nn.Sequential``: a child as it is, or a slice as written (its class as
    written, the same children; ``plif.fuse`` it to run it fused), whose outputs are those of the slice
    of the unfused model (``nn.Sequential`` would make a fused class without its plan, or a traced
    forward that calls children the slice does not have)."""
    if not isinstance(idx, slice):
        return nn.Sequential.__getitem__(seq, idx)
    return type(seq)._plif_original(OrderedDict(list(seq._modules.items())[idx]))


# ------------------------------------------------------------------------------------ tracing
class _Tracer(fx.Tracer):
    """plif's layers (and torch's) are leaves: the graph calls them, it does not look inside."""

    def is_leaf_module(self, m: nn.Module, qualname: str) -> bool:
        return _plif_layer(m) or super().is_leaf_module(m, qualname)


class _NotTraced(Exception):
    pass


def _trace(module: nn.Module) -> fx.Graph:
    """The forward of ``module`` as an FX graph, traced in training mode; refused where FX fails or
    where evaluation mode traces another graph (a branch on ``self.training`` would be frozen)."""
    modes = [(m, m.training) for m in module.modules()]
    codes = []
    try:
        for training in (False, True):
            for m, _ in modes:
                m.training = training
            try:
                graph = _Tracer().trace(module)
            except Exception as e:  # noqa: BLE001  (FX raises TraceError, TypeError, AttributeError, ...)
                first = (str(e).strip().splitlines() or [""])[0][:120]
                raise _NotTraced(f"torch.fx cannot trace its forward ({type(e).__name__}: {first})") from None
            codes.append(graph.python_code("self").src)
    finally:
        for m, training in modes:
            m.training = training
    if codes[0] != codes[1]:
        raise _NotTraced("its forward traces differently in training and evaluation mode (torch.fx would freeze one)")
    return graph


def traced_calls(module: nn.Module) -> list[str] | None:
    """The qualified names of the modules ``module``'s forward calls, once per call and in order, traced
    as :func:`fuse` traces (plif's and torch's layers are leaves, other submodules are traced through);
    None where FX cannot trace it."""
    try:
        graph = _Tracer().trace(module)
    except Exception:  # noqa: BLE001  (FX raises TraceError, TypeError, AttributeError, ...)
        return None
    return [n.target for n in graph.nodes if n.op == "call_module"]


def _binary_nodes(graph: fx.Graph, module: nn.Module, spikes_in: bool, training: bool = True) -> dict:
    """For each node, whether its value is spikes in training mode (or, ``training=False``, in
    evaluation mode): a neuron's output, and what stays binary through max-pooling, flatten and views
    (:func:`~.structure.keeps_binary`)."""
    binary: dict = {}
    placeholders = 0
    for n in graph.nodes:
        src = n.args[0] if n.args and isinstance(n.args[0], fx.Node) else None
        fed = src is not None and binary.get(src, False)
        if n.op == "placeholder":
            binary[n] = spikes_in and placeholders == 0
            placeholders += 1
        elif n.op == "call_module":
            m = module.get_submodule(n.target)
            binary[n] = isinstance(m, SpikingNeuron) or (fed and keeps_binary(m, training=training))
        elif n.op == "call_method":
            binary[n] = fed and n.target in _BINARY_METHODS
        elif n.op == "call_function":
            binary[n] = fed and n.target in _BINARY_FUNCTIONS
        else:
            binary[n] = False
    return binary


def _chainable(n: fx.Node) -> bool:
    return n.op == "call_module" and len(n.args) == 1 and isinstance(n.args[0], fx.Node) and not n.kwargs


def _chains(graph: fx.Graph) -> list[list[fx.Node]]:
    """Maximal chains of module calls, each one's only input the one before, whose output has no
    other user: the runs a plan may take (the last node's output may have any number of users)."""
    def follows(p: fx.Node) -> bool:
        return _chainable(p) and len(p.users) == 1
    out = []
    for n in graph.nodes:
        if not _chainable(n) or (follows(n.args[0]) and next(iter(n.args[0].users)) is n):
            continue
        chain = [n]
        while len(chain[-1].users) == 1 and _chainable(u := next(iter(chain[-1].users))) and u.args[0] is chain[-1]:
            chain.append(u)
        out.append(chain)
    return out


def _name(prefix: str, target: str) -> str:
    return f"{prefix}.{target}" if prefix else target


def _explain_chain(names, layers, run: LayerPlan, lines: list[str], users=None) -> None:
    """One line for each convolution of a run of ``layers`` (qualified ``names``) that did not fuse,
    and for each fused run that runs as written while it has a hook, and for each max-pool that a
    block before it or the spike pool does not take (:func:`_explain_pool`).  ``users``: for each
    layer, the names of what reads its output (an FX graph's chain ends where that is not one
    module: the graph says why there)."""
    covered, ends = set(), set()
    for a, b in run.fused(layers):
        covered.update(range(a, b))
        ends.add(b)
        seen = [(names[j], kind) for j in range(a, b) if (kind := hooked([layers[j]]))]
        if seen:
            lines.append(f"{' → '.join(names[a:b])}: runs as written while {seen[0][0]} has {seen[0][1]}")
    for i, layer in enumerate(layers):
        if i not in covered and isinstance(layer, TimeFolded) and isinstance(layer.layer, nn.MaxPool2d):
            _explain_pool(names[i], layer.layer, i in ends, run.opts, lines)
    for i, layer in enumerate(layers):
        if i in covered or not run.opts.fused_block or not isinstance(unwrap(layer), nn.modules.conv._ConvNd):
            continue
        why = why_not_fused(layers, i)
        ended = {"no BatchNorm follows the convolution": (i, "convolution", "BatchNorm"),
                 "no neuron follows the BatchNorm": (i + 1, "BatchNorm", "neuron")}.get(why)
        if ended and users is not None and users[ended[0]]:
            readers = users[ended[0]]
            why = (f"the {ended[1]}'s output is used {len(readers)} times ({', '.join(readers)})" if len(readers) > 1
                   else f"the {ended[1]}'s output goes to {readers[0]}, not a {ended[2]} module")
        lines.append(f"{' → '.join(names[i:i + 3])}: not fused: {why}")


def _explain_pool(name: str, pool: nn.MaxPool2d, after_block: bool, opts: MemoryOptions, lines: list[str]) -> None:
    """The line for a max-pool that a fused block (``after_block``: it follows one) or the spike pool
    does not take, saying how it runs (:func:`~plif.layers.pool_rule.max_pool_rule`)."""
    rule = max_pool_rule(pool)
    how = ("as written" if not opts.spike_storage or rule.spike else "as the spike pool (two-byte saved offsets)")
    if after_block:
        lines.append(f"{name}: a max-pool the fused block does not take: {rule.fused}; runs after the block, {how}")
    elif opts.spike_storage and rule.spike:
        lines.append(f"{name}: runs as written, not as the spike pool: {rule.spike}")


def _fuse_graph(module: nn.Module, graph: fx.Graph, prefix: str, opts: MemoryOptions, spikes_in: bool,
                lines: list[str]) -> None:
    """Replace each chain of ``graph`` whose plan saves something by one call of its plan, and make
    the code the module's forward."""
    binary = _binary_nodes(graph, module, spikes_in)
    runs = {}
    chains = [(chain, chain[0].args[0]) for chain in _chains(graph)]  # before any is replaced
    for chain, fed_by in chains:
        layers = [module.get_submodule(n.target) for n in chain]
        first = chain is chains[0][0]  # the network's first block, where chunk_first_block chunks
        run = LayerPlan([n.target for n in chain], opts if first else replace(opts, chunk_first_block=False), binary[fed_by])
        steps = run.plan(layers)
        _explain_chain([_name(prefix, n.target) for n in chain], layers, run, lines,
                       [[u.name for u in n.users] for n in chain])
        if all(step is layers[a] for a, _, step in steps) and not (first and hoists_first_layer(layers)):
            continue  # nothing to save: the layers run as written
        name = f"_plif_run_{len(runs)}"
        runs[name] = run
        with graph.inserting_before(chain[0]):
            live = [graph.get_attr(n.target) for n in chain]  # the layers as they are at each call
        with graph.inserting_after(chain[-1]):
            call = graph.call_module(name, (chain[0].args[0], *live))  # the input, itself maybe a run
        chain[-1].replace_all_uses_with(call)
        for n in reversed(chain):
            graph.erase_node(n)
    if not runs:
        return
    graph.lint()
    code = graph.python_code("self")
    scope = dict(code.globals)
    exec(compile(code.src, f"<plif.fuse: {type(module).__qualname__}.forward>", "exec"), scope)
    cls = type(module)
    attrs = {"forward": scope["forward"], "_plif_original": cls, "__module__": cls.__module__,
             "__reduce_ex__": _reduce_ex, "__doc__": cls.__doc__}
    if isinstance(module, nn.Sequential):  # a slice is the slice as written
        attrs["__getitem__"] = _sequential_item
    module.__class__ = type(cls.__name__, (cls,), attrs)
    module._plif_runs = list(runs.values())
    module._plif_opts = opts
    module._plif_spikes_in = spikes_in
    for name, run in runs.items():
        setattr(module, name, run)


def _reduce_ex(self, protocol):
    """Pickled (and deep-copied) as the module as written, fused again when loaded."""
    state = {k: v for k, v in self.__dict__.items() if not k.startswith("_plif_")}
    return _refuse, (type(self)._plif_original, state, self._plif_opts, self._plif_spikes_in)


def _refuse(cls, state, opts, spikes_in):
    module = cls.__new__(cls)
    module.__setstate__(state) if hasattr(module, "__setstate__") else module.__dict__.update(state)
    _fuse(module, "", opts, spikes_in, [])
    return module


# ------------------------------------------------------------------------------------ the walk
def _fuse(module: nn.Module, prefix: str, opts: MemoryOptions, spikes_in: bool, lines: list[str]) -> None:
    if _plif_layer(module) or not module._modules:
        return  # one of plif's layers (a network has its own plan) or a leaf of torch's
    try:
        graph = _trace(module)
    except _NotTraced as e:
        if type(module) is nn.Sequential:
            return _fuse_sequential(module, prefix, opts, spikes_in, lines)
        lines.append(f"{prefix or 'the model'}: {e}: its submodules are fused, it runs as written")
        for name, child in module.named_children():
            _fuse(child, _name(prefix, name), opts, False, lines)
        return
    _fuse_graph(module, graph, prefix, opts, spikes_in, lines)


def _fuse_sequential(seq: nn.Sequential, prefix: str, opts: MemoryOptions, spikes_in: bool, lines) -> None:
    """An ``nn.Sequential`` FX cannot trace (a child can't be): its children as one plan, each child
    that is a container fused in turn."""
    from .structure import spike_inputs

    layers, names = list(seq), list(seq._modules)
    fed = spike_inputs(layers, training=True, spikes_in=spikes_in)
    for name, child, binary in zip(names, layers, fed):
        _fuse(child, _name(prefix, name), opts, binary, lines)
    run = LayerPlan(names, opts if not prefix else replace(opts, chunk_first_block=False), spikes_in)
    seq.__class__ = FusedSequential
    seq._plif_run = run
    seq._plif_runs = [run]
    _explain_chain([_name(prefix, n) for n in names], layers, run, lines)


def _unfuse(model: nn.Module) -> None:
    for m in model.modules():
        original = getattr(type(m), "_plif_original", None)
        if original is not None:
            for k in [k for k in m.__dict__ if k.startswith("_plif_")]:
                del m.__dict__[k]
            m.__class__ = original


def fuse(model: nn.Module, memory=DEFAULT_MEMORY, explain: bool = False):
    """Run every ``conv (no bias) → BatchNorm2d → IF/LIF/PLIF [→ 2×2 max-pool]`` of ``model`` as the
    fused block, with the activation savings of ``memory`` (a name of
    :data:`~plif.models.MEMORY_PRESETS`, what ``plif train --memory`` takes, or a
    :class:`~plif.models.MemoryOptions`); in place, returning ``model`` (with ``explain``,
    ``(model, lines)``: one line for each candidate that did not fuse, saying why).  Where and how:
    :mod:`plif.models.fusion`.  A static input fed as ``x.unsqueeze(0).expand(T, *x.shape)`` (stride 0
    along time) goes through the first convolution once, as a notation network's static input does.

    Example: a residual block written by hand, fused; the same parameters, state dict and spikes:

    >>> import torch
    >>> from torch import nn
    >>> import plif
    >>> from plif.layers import TimeFolded
    >>> class Block(nn.Module):
    ...     def __init__(self, c):
    ...         super().__init__()
    ...         self.conv1 = TimeFolded(nn.Conv2d(c, c, 3, padding=1, bias=False))
    ...         self.bn1 = TimeFolded(nn.BatchNorm2d(c))
    ...         self.sn1 = plif.PLIF()
    ...         self.conv2 = TimeFolded(nn.Conv2d(c, c, 3, padding=1, bias=False))
    ...         self.bn2 = TimeFolded(nn.BatchNorm2d(c))
    ...         self.sn2 = plif.PLIF()
    ...     def forward(self, x):
    ...         out = self.sn1(self.bn1(self.conv1(x)))
    ...         return self.sn2(self.bn2(self.conv2(out)) + x)   # the shortcut before the neuron
    >>> block = Block(4)
    >>> keys = list(block.state_dict())
    >>> block, why = plif.fuse(block, explain=True)
    >>> plif.fused_blocks(block)
    [('conv1', 'bn1', 'sn1')]
    >>> why
    ["conv2 → bn2: not fused: the BatchNorm's output goes to add, not a neuron module"]
    >>> list(block.state_dict()) == keys
    True
    >>> block(torch.rand(4, 2, 4, 8, 8)).shape               # [T, B, C, H, W]
    torch.Size([4, 2, 4, 8, 8])
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"plif.fuse(model): model takes a torch.nn.Module, got {type(model).__name__}")
    opts = memory_options(memory)
    lines: list[str] = []
    _unfuse(model)
    from .network import SpikingNetwork

    for m in model.modules():
        if isinstance(m, SpikingNetwork):  # a notation network inside (or the model): its own plan, these options
            m.set_memory(opts)
    if opts.any():
        _fuse(model, "", opts, False, lines)
        if not model.training:
            lines.append("the model is in evaluation mode: its fused runs run as written until .train()")
    return (model, lines) if explain else model


def fused_blocks(model: nn.Module) -> list[tuple[str, ...]]:
    """The qualified names of each run of ``model`` that :func:`fuse` runs as the fused block, in
    order: ``[("conv1", "bn1", "sn1"), ("layer1.0.conv1", "layer1.0.bn1", "layer1.0.sn1"), ...]``
    (four names where a 2×2 max-pool is fused too); empty for a model not fused."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"plif.fused_blocks(model): model takes a torch.nn.Module (one plif.fuse ran on), "
                        f"got {type(model).__name__}")
    out = []
    for prefix, m in model.named_modules():
        for run in m.__dict__.get("_plif_runs", ()):  # fuse's runs, or a notation network's own
            names = list(m._modules) if isinstance(m, FusedSequential) else run.names
            layers = [m.get_submodule(n) for n in names]
            out += [tuple(_name(prefix, n) for n in names[a:b]) for a, b in run.fused(layers)]
    return out
