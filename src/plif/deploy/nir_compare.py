"""Run a plif NIR graph in another framework's own importer and compare its spikes with plif's,
layer by layer and step by step (what the interoperability tests and
``benchmarks/nir_frameworks.py`` check).

Frameworks: ``plif`` (:func:`~plif.deploy.nir_import.from_nir`, plif's own importer), ``norse``
(``norse.torch.from_nir(graph, dt)``, stepped with its state), ``snntorch``
(``import_from_nir``, a fresh module per sequence), ``sinabs``
(:func:`~plif.deploy.nir_sinabs.sinabs_from_nir`, batch-major ``[B*T, ...]``).  Spiking nodes
(``LIF``/``IF``) are recorded through forward hooks on the modules the importer built under the
node's name.
"""
from __future__ import annotations

import contextlib
import io
import logging
import warnings

import torch

from torch import nn

from ..models.inputs import repeat_over_time
from .bn_folding import fold_batchnorm
from .nir_export import as_trained, output_atol
from .nir_import import NIRNeuron, from_nir, graph_dt, node_order
from .nir_nodes import neuron_node
from .nir_targets import graph_meta
from .nir_walk import walk

__all__ = ["FRAMEWORKS", "plif_spikes", "neuron_calls", "framework_spikes", "compare_spikes"]

FRAMEWORKS = ("plif", "norse", "snntorch", "sinabs")


@torch.no_grad()
def plif_spikes(net: nn.Module, x: torch.Tensor, folded: bool = False) -> tuple[dict[str, torch.Tensor],
                                                                                 torch.Tensor]:
    """``{node name: [T, B, ...] spikes}`` of every neuron node the NIR export of ``net`` has (any
    module :func:`~.nir_export.to_nir` takes), from ``net``'s own forward as trained (eval mode,
    float32), or the BN-folded ``net``'s with ``folded`` (what a ``--bn fold`` graph holds), and its
    output, for frames ``x [T, B, ...]``.  Each node is the output of the neuron module the export's
    walk made it from (:attr:`~.nir_walk.Op.qualname`; a module called twice, each call), recorded
    by a forward hook."""
    ref = fold_batchnorm(net).float().eval() if folded else as_trained(net)
    calls = neuron_calls(walk(ref, tuple(x.shape[2:])))
    record: dict[str, list] = {qualname: [] for _, qualname, _ in calls}
    hooks = [ref.get_submodule(q).register_forward_hook(lambda m, a, o, q=q: record[q].append(o)) for q in record]
    try:
        out = ref(x)
    finally:
        for h in hooks:
            h.remove()
    for q, seen in record.items():
        want = sum(1 for _, qualname, _ in calls if qualname == q)
        if len(seen) != want:
            raise ValueError(f"{q or 'the model'}: ran {len(seen)} times in the forward, the export's walk calls it "
                             f"{want} times")
    return {node: record[q][k] for node, q, k in calls}, out


def neuron_calls(ops) -> list[tuple[str, str, int]]:
    """``[(node name, module's qualified name, which call of it)]`` for each neuron operation of the
    export's walk ``ops`` (:func:`~.nir_walk.walk`), in forward order."""
    out, seen = [], {}
    for op in ops:
        node = neuron_node(op)
        if node is not None:
            seen[op.qualname] = seen.get(op.qualname, -1) + 1
            out.append((node, op.qualname, seen[op.qualname]))
    return out


def _spiking_nodes(graph) -> list[str]:
    return [n for n, node in graph.nodes.items() if type(node).__name__ in ("LIF", "IF")]


def _load(graph, framework: str, batch: int):
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # nirtorch.load, called by all three
        if framework == "norse":
            import norse.torch

            root = logging.getLogger()
            was, root.disabled = root.disabled, True  # its notes about r (IF: r = 1/dt, which it ignores)
            try:
                return norse.torch.from_nir(graph, dt=graph_dt(graph))
            finally:
                root.disabled = was
        if framework == "snntorch":
            from snntorch.import_nir import import_from_nir

            return import_from_nir(graph)  # prints notes about threshold scaling: silenced above
        if framework == "sinabs":
            from .nir_sinabs import sinabs_from_nir

            return sinabs_from_nir(graph, batch_size=batch)
    raise ValueError(f"unknown framework {framework!r}; valid: {', '.join(FRAMEWORKS)}")


@torch.no_grad()
def framework_spikes(graph, x: torch.Tensor, framework: str) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """``{node name: [T, B, ...] spikes}`` of every spiking node, and the output, of ``graph`` run
    on frames ``x [T, B, ...]`` by ``framework``'s importer (ImportError if it is not installed)."""
    T, B = x.shape[:2]
    if framework == "plif":
        return _plif_importer_spikes(graph, x)
    module = _load(graph, framework, B)
    names = _spiking_nodes(graph)
    record: dict[str, list] = {n: [] for n in names}
    hooks = [module.get_submodule(n).register_forward_hook(
        lambda m, a, o, n=n: record[n].append(o[0] if isinstance(o, tuple) else o)) for n in names]
    try:
        if framework == "sinabs":
            out = module(x.transpose(0, 1).reshape(B * T, *x.shape[2:]))[0]
            unfold = lambda y: y.reshape(B, T, *y.shape[1:]).transpose(0, 1)  # noqa: E731
            return {n: unfold(v[0]) for n, v in record.items()}, unfold(out)
        outs, state = [], None
        for t in range(T):
            if framework == "norse":
                y, state = module(x[t], state)
            else:
                y = module(x[t])[0]
            outs.append(y)
        return {n: torch.stack(v) for n, v in record.items()}, torch.stack(outs)
    finally:
        for h in hooks:
            h.remove()


def _plif_importer_spikes(graph, x: torch.Tensor) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    net, out = from_nir(graph), {}
    neurons = {name for name, layer in zip(net.names, net.layers) if isinstance(layer, NIRNeuron)}
    for name, h in net.values(x):
        if name in neurons:
            out[name] = h
    return out, net(x)


def compare_spikes(net: nn.Module, graph, x: torch.Tensor, framework: str) -> list[dict]:
    """One row per neuron node of ``graph`` (``net`` exported, any module :func:`~.nir_export.to_nir`
    takes; compared with the BN-folded ``net`` unless the graph's ``metadata["bn"]`` says ``exact``):
    plif's and the framework's spike counts and the number of spikes that differ; the max-pool OR
    nodes (no plif module of their own) are left out, their effect shows in the next layer.  The last
    row, ``output``, counts output values that differ."""
    want, want_out = plif_spikes(net, x, folded=graph_meta(graph, "bn") != "exact")
    got, got_out = framework_spikes(graph, x, framework)
    rows = []
    for name, spikes in got.items():
        ref = want.get(name)
        if ref is None:  # a max-pool's OR
            continue
        same_shape = spikes.shape == ref.shape
        rows.append({"node": name, "plif": int(ref.sum()), framework: int(spikes.sum()),
                     "differ": int((spikes != ref).sum()) if same_shape else -1})
    same_shape = got_out.shape == want_out.shape
    rows.append({"node": "output", "plif": want_out.numel(), framework: got_out.numel(),
                 "differ": int((got_out != want_out).sum()) if same_shape else -1})
    return rows


def installed(framework: str) -> bool:
    """Whether ``framework``'s importer can be imported here (plif's always)."""
    import importlib.util

    module = {"plif": "plif", "norse": "norse", "snntorch": "snntorch", "sinabs": "sinabs"}[framework]
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def check_input(graph, samples: int = 2, seed: int = 0) -> torch.Tensor:
    """The input ``plif export --check`` runs a file on: ``samples`` random normal static inputs of
    the file's input shape, repeated over its ``T`` steps (as :func:`~.nir_export.verify_nir` checks
    an export), ``[T, samples, ...]``; at least 2 samples (module docstring of :mod:`.nir_targets`:
    batch 1 can take another convolution path)."""
    net = from_nir(graph)
    if net.input_shape is None:
        raise ValueError("the graph declares no input shape")
    T = net.T or 1
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(max(2, samples), *net.input_shape, generator=g)
    return repeat_over_time(x, T).contiguous()


@torch.no_grad()
def run_against_plif(graph, framework: str, x: torch.Tensor) -> dict:
    """Run ``graph`` in ``framework``'s importer and in plif's (the trained network, for a file
    plif's export verified) on ``x``: ``{"differ", "total", "first", "active"}``, the outputs that
    differ, the outputs, the first spiking node (in graph order) whose spikes differ, with how many
    (``(name, differ, spikes)``, None where none does), and plif's outputs that are not 0 (a
    network that never fires agrees with anything)."""
    want, want_out = _plif_importer_spikes(graph, x)
    got, got_out = framework_spikes(graph, x, framework)
    if got_out.shape != want_out.shape:
        raise ValueError(f"{framework} gives outputs of shape {tuple(got_out.shape)}, plif {tuple(want_out.shape)}")
    atol = output_atol(graph)  # as verify_nir
    first = None
    spiking = set(_spiking_nodes(graph))
    for name in (n for n in node_order(graph) if n in spiking):  # input to output (a file's nodes come back sorted)
        a, b = got.get(name), want.get(name)
        if a is None or b is None or a.shape != b.shape:
            continue
        n = int((a != b).sum())
        if n:
            first = (name, n, int(b.sum()))
            break
    return {"differ": int(((got_out - want_out).abs() > atol).sum()), "total": want_out.numel(), "first": first,
            "active": int((want_out != 0).sum())}
