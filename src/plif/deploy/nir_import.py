"""Read a NIR graph back into a PyTorch module that runs its discrete (forward-Euler) dynamics.

The inverse of :mod:`plif.deploy.nir_export`, with ``dt`` from the graph's metadata (1 if absent;
a ``dt`` passed in that differs from the metadata's is refused: the file was made for another step):
LIF nodes step ``H = V + k (r X - (V - v_leak))`` with ``k = float32(dt) * float32(1/τ)`` (the
same float32 product Norse forms), IF nodes ``H = V + dt r X``; both fire on NIR's ``v > v_threshold``,
run as ``H >= Θ`` with ``Θ = nextafter(v_threshold, +inf)`` in float32 (:func:`threshold_from_nir`,
which gives plif's own threshold back from a plif file), and reset hard to ``v_reset``.  ``Flatten`` counts ``start_dim``/``end_dim``
from the first per-sample dimension (NIR shapes have no batch); negative values count from the
end, as ``plif`` writes them.  A 1x1 ``Conv2d`` that only scales and shifts each channel (how plif
writes BatchNorm: weight ``diag(α)``, bias ``β``) runs through torch's BatchNorm kernel, one fused
multiply-add as the trained network's BatchNorm, where torch's convolution can round once more
(:mod:`.nir_bn`).  Feed-forward graphs of the node types the exporter writes are supported, plus
``Scale``: a node with several inputs runs on their sum, added in the order of the graph's edges
(how plif writes a residual shortcut); anything else is refused with the node's name.  Before
anything is built, :func:`~.nir_check.check_graph` refuses values and shapes that mean nothing for
their node (NaN or zero τ, weights of 1e38, a 5-D convolution weight, shapes that do not chain).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

from ..layers import TimeFolded
from ..models.inputs import is_static, repeat_over_time
from .nir_bn import ChannelAffine, bn_form
from .nir_check import NIRFileError, check_graph, check_raw_node
from .nir_edges import links, reachable
from .nir_leak import rate_from_tau
from .nir_targets import graph_meta

__all__ = ["NIRNeuron", "NIRNetwork", "from_nir", "read_nir", "read_graph", "node_order", "threshold_to_nir",
           "threshold_from_nir"]


def _t(a) -> torch.Tensor:
    return torch.as_tensor(np.asarray(a))


def threshold_to_nir(v_threshold) -> np.ndarray:
    """plif fires on ``H >= Θ``, NIR (and Norse, snnTorch) on ``v > v_threshold``: the largest
    float32 below ``Θ`` makes the two agree on every float32 potential (``H > nextafter(Θ, -inf)``
    iff ``H >= Θ``), including a potential that lands exactly on ``Θ``."""
    return np.nextafter(np.asarray(v_threshold, dtype=np.float32), np.float32(-np.inf))


def threshold_from_nir(v_threshold) -> np.ndarray:
    """The inverse of :func:`threshold_to_nir`: the ``Θ`` with ``H >= Θ`` iff ``H > v_threshold``
    in float32, so a plif -> NIR -> plif round trip gives plif's threshold back exactly."""
    return np.nextafter(np.asarray(v_threshold, dtype=np.float32), np.float32(np.inf))


class NIRNeuron(nn.Module):
    """LIF (``tau`` given) or IF (``tau=None``) over ``[T, B, ...]`` with per-neuron parameters.

    The input gain is ``r`` for LIF and ``dt r`` for IF (NIR's ``dv/dt = r I`` over one step)."""

    def __init__(self, r, v_threshold, v_reset, tau=None, v_leak=None, dt: float = 1.0):
        super().__init__()
        gain = np.asarray(r, dtype=np.float64) * (1.0 if tau is not None else dt)
        self.register_buffer("r", _t(gain).float())
        self.register_buffer("v_threshold", _t(threshold_from_nir(v_threshold)))  # plif's Θ: fire on >=
        self.register_buffer("v_reset", _t(v_reset).float())
        self.register_buffer("k", None if tau is None else rate_from_tau(tau, dt))
        self.register_buffer("v_leak", None if v_leak is None else _t(v_leak).float())

    @torch.no_grad()
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x [T, B, ...]`` -> spikes ``[T, B, ...]``, starting from ``v_reset``."""
        dtype = x.dtype
        r, vth, vr = self.r.to(dtype), self.v_threshold.to(dtype), self.v_reset.to(dtype)
        v = vr.expand_as(x[0])
        out = torch.empty_like(x)
        for t in range(x.shape[0]):
            xt = x[t] if bool((self.r == 1).all()) else r * x[t]
            if self.k is None:
                h = v + xt  # charge (IF)
            else:
                h = v + self.k.to(dtype) * (xt - (v - self.v_leak.to(dtype)))  # charge (LIF)
            s = (h - vth >= 0).to(dtype)  # fire
            v = h * (1 - s) + vr * s  # reset (hard)
            out[t] = s
        return out


class _Threshold(nn.Module):
    def __init__(self, threshold):
        super().__init__()
        self.register_buffer("threshold", _t(threshold).float())

    def forward(self, x):
        return (x > self.threshold.to(x.dtype)).to(x.dtype)


class _Scale(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.register_buffer("scale", _t(scale).float())

    def forward(self, x):
        return x * self.scale.to(x.dtype)


def _ints(v) -> tuple:
    a = np.atleast_1d(np.asarray(v)).astype(int).tolist()
    return tuple(a * 2 if len(a) == 1 else a)


def _module(name: str, node, dt: float) -> nn.Module | None:
    kind = type(node).__name__
    if kind in ("Input", "Output"):
        return None
    if kind == "Conv2d":
        form = bn_form(node)
        if form is not None:  # a per-channel scale and shift (plif's BatchNorm): as BatchNorm computes it
            return TimeFolded(ChannelAffine(*form))
        if isinstance(node.padding, str):
            raise ValueError(f"NIR node {name!r}: string padding {node.padding!r} is not supported")
        w = _t(node.weight).float()
        conv = nn.Conv2d(w.shape[1] * int(node.groups), w.shape[0], tuple(w.shape[2:]), _ints(node.stride),
                         _ints(node.padding), _ints(node.dilation), int(node.groups), bias=True)
        conv.weight.data.copy_(w)
        conv.bias.data.copy_(_t(node.bias).float())
        return TimeFolded(conv)
    if kind in ("Linear", "Affine"):
        w = _t(node.weight).float()
        lin = nn.Linear(w.shape[1], w.shape[0], bias=kind == "Affine")
        lin.weight.data.copy_(w)
        if kind == "Affine":
            lin.bias.data.copy_(_t(node.bias).float())
        return TimeFolded(lin)
    if kind == "Flatten":
        start, end = int(node.start_dim), int(node.end_dim)
        return TimeFolded(nn.Flatten(start if start < 0 else start + 1, end if end < 0 else end + 1))
    if kind in ("AvgPool2d", "SumPool2d"):
        return TimeFolded(nn.AvgPool2d(_ints(node.kernel_size), _ints(node.stride), _ints(node.padding),
                                       count_include_pad=True, divisor_override=1 if kind == "SumPool2d" else None))
    if kind == "Threshold":
        return _Threshold(node.threshold)
    if kind == "Scale":
        return _Scale(node.scale)
    if kind == "LIF":
        return NIRNeuron(node.r, node.v_threshold, node.v_reset, tau=node.tau, v_leak=node.v_leak, dt=dt)
    if kind == "IF":
        return NIRNeuron(node.r, node.v_threshold, node.v_reset, dt=dt)
    raise ValueError(f"NIR node {name!r}: type {kind} is not supported by this importer")


def node_order(graph) -> list[str]:
    """The graph's nodes from its one ``Input`` to its ``Output``, each after every node feeding it
    (in the order of the edges where several are ready); a cycle, or a node the input does not
    reach, is refused with its name."""
    nexts, prevs = links(graph)
    starts = [n for n in graph.nodes if type(graph.nodes[n]).__name__ == "Input"]
    if len(starts) != 1:
        raise ValueError(f"NIR graph must have exactly one Input node, found {len(starts)}")
    reached = reachable(nexts, starts[0])
    if len(reached) != len(graph.nodes):
        missing = sorted(set(graph.nodes) - reached)
        raise ValueError(f"NIR graph nodes the input does not reach: {', '.join(missing)}")
    waiting = {n: len(prevs.get(n, [])) for n in graph.nodes}
    order, ready = [], [starts[0]]
    while ready:
        name = ready.pop(0)
        order.append(name)
        for b in nexts.get(name, []):
            waiting[b] -= 1
            if waiting[b] == 0:
                ready.append(b)
    if len(order) != len(graph.nodes):
        stuck = sorted(n for n in graph.nodes if n not in order)
        raise ValueError(f"NIR graph has a cycle through node {stuck[0]!r} (only feed-forward graphs are supported)")
    outputs = [n for n in order if type(graph.nodes[n]).__name__ == "Output"]
    if len(outputs) != 1 or nexts.get(outputs[0]):
        raise ValueError(f"NIR graph must have exactly one Output node that feeds nothing, found {len(outputs)}")
    return order


class NIRNetwork(nn.Module):
    """The imported graph; ``forward(x [T, B, ...] or static [B, ...]) -> [T, B, outputs]``.  Each
    layer runs on the sum of its inputs' outputs (in the order of the graph's edges; a chain has one
    input each); ``inputs[i]`` lists the positions, in ``layers``, of layer ``i``'s inputs (-1: the
    graph's input), and ``output`` those the result sums."""

    def __init__(self, layers: list[nn.Module], names: list[str], input_shape: tuple | None, T: int | None,
                 inputs: list[list[int]] | None = None, output: list[int] | None = None):
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.names = names
        self.inputs = inputs if inputs is not None else [[i - 1] for i in range(len(layers))]
        self.output = output if output is not None else [len(layers) - 1]
        self.input_shape = None if input_shape is None else tuple(input_shape)
        self.T = T

    @torch.no_grad()
    def forward(self, x: torch.Tensor, T: int | None = None) -> torch.Tensor:
        if self.input_shape is None:
            if T is not None:
                raise ValueError("the graph declares no input shape: pass frames [T, B, ...], not a static input")
            return self._run(x)
        if is_static(x, self.input_shape):
            steps = T or self.T
            if not steps:
                raise ValueError("a static input needs T (not recorded in the NIR metadata)")
            x = repeat_over_time(x, steps)
        if tuple(x.shape[2:]) != self.input_shape:
            raise ValueError(f"expected input [T, B, {', '.join(map(str, self.input_shape))}], got {tuple(x.shape)}")
        return self._run(x)

    def values(self, x: torch.Tensor):
        """Each layer's name and output ``[T, B, ...]`` in order, on frames ``x``."""
        out: list[torch.Tensor] = []
        for name, layer, inputs in zip(self.names, self.layers, self.inputs):
            out.append(layer(_sum(out, inputs, x)))
            yield name, out[-1]

    def _run(self, x: torch.Tensor) -> torch.Tensor:
        out: list[torch.Tensor] = []
        last_use = {i: j for j, inputs in enumerate(self.inputs) for i in inputs}
        for j, (layer, inputs) in enumerate(zip(self.layers, self.inputs)):
            out.append(layer(_sum(out, inputs, x)))
            for i in inputs:  # free what no later layer reads
                if i >= 0 and last_use[i] == j and i not in self.output:
                    out[i] = None
        return _sum(out, self.output, x)


def _sum(values: list, inputs: list[int], x: torch.Tensor) -> torch.Tensor:
    total = None
    for i in inputs:
        v = x if i < 0 else values[i]
        total = v if total is None else total + v
    return total


def graph_dt(graph, dt: float | None = None) -> float:
    """The time-step to step ``graph`` with: its ``metadata["dt"]``, else ``dt``, else 1.

    A ``dt`` that differs from the metadata's is an error: τ and the IF gain were scaled for the
    file's step, so any other step changes every neuron's leak (``plif export --for``)."""
    recorded = graph_meta(graph, "dt")
    if recorded is not None and dt is not None and float(dt) != float(recorded):
        raise ValueError(f"the NIR graph was exported for dt = {float(recorded):g} (metadata['dt']), "
                         f"not dt = {float(dt):g}: step it with the file's dt or export again for yours")
    return float(recorded if recorded is not None else (1.0 if dt is None else dt))


def from_nir(graph, dt: float | None = None) -> NIRNetwork:
    """Build a :class:`NIRNetwork` from a ``nir.NIRGraph``, stepped with :func:`graph_dt`; a graph
    whose values or shapes mean nothing is refused first (:func:`~.nir_check.check_graph`)."""
    check_graph(graph, 1.0 if dt is None else dt)
    dt = graph_dt(graph, dt)
    order = node_order(graph)
    prevs: dict[str, list[str]] = {}
    for a, b in graph.edges:
        prevs.setdefault(b, []).append(a)
    layers, names, inputs, position = [], [], [], {order[0]: [-1]}
    for name in order[1:]:
        feeding = [i for p in prevs.get(name, []) for i in position[p]]
        m = _module(name, graph.nodes[name], dt)
        if m is None:  # Output (or a second Input: refused above): the sum of what feeds it
            position[name] = feeding
            continue
        layers.append(m)
        names.append(name)
        inputs.append(feeding)
        position[name] = [len(layers) - 1]
    declared = graph.nodes[order[0]].input_type["input"]
    shape = None if declared is None else tuple(int(s) for s in np.asarray(declared).tolist())
    T = graph_meta(graph, "T")
    return NIRNetwork(layers, names, shape, None if T is None else int(T), inputs,
                      position[next(n for n in order if type(graph.nodes[n]).__name__ == "Output")]).eval()


def read_graph(path: str | Path):
    """The ``nir.NIRGraph`` in the ``.nir`` file ``path``, checked (:func:`~.nir_check.check_graph`,
    then NIR's own type check); a missing, unreadable or meaningless file is one error naming it
    (and the node and field where there is one)."""
    import nir

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"NIR file {path} not found")
    with np.errstate(all="ignore"):  # a zero stride divides by zero in nir: the checks say so
        try:
            graph = nir.read(path, type_check=False)
        except Exception as e:  # h5py / nir raise many types for damaged files
            raise NIRFileError(f"{path}: {_unreadable(path, e)}") from None
    try:
        check_graph(graph)
    except NIRFileError as e:
        raise NIRFileError(f"{path}: {e}") from None
    try:  # what nir.read does by default (it also adds Input/Output nodes a graph lacks)
        graph.infer_types()
        graph.check_types()
    except Exception as e:  # noqa: BLE001
        raise NIRFileError(f"{path}: NIR's type check refuses it ({type(e).__name__}: {e})") from None
    return graph


def _unreadable(path: Path, error: Exception) -> str:
    """Why ``nir.read`` failed: the node (and field) whose data NIR could not take, where one is to blame."""
    import h5py
    from nir.serialization import read_node

    def reason(e):
        return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__

    try:
        with h5py.File(path, "r") as f:
            for name, group in f["node"]["nodes"].items():
                try:
                    read_node(group)
                except Exception as e:  # noqa: BLE001
                    fields = {k: v[()] for k, v in group.items() if isinstance(v, h5py.Dataset)}
                    return check_raw_node(name, fields) or f"node {name!r}: NIR cannot read it ({reason(e)})"
    except Exception:  # noqa: BLE001 - not even HDF5: say what nir.read said
        pass
    return f"not a readable NIR file ({reason(error)})"


def read_nir(path: str | Path, dt: float | None = None) -> NIRNetwork:
    """Read a ``.nir`` file written by :func:`plif.deploy.nir_export.write_nir` (or any chain of supported nodes)."""
    # checked twice on purpose: read_graph checks the file as written, before NIR's type inference runs
    # on it; from_nir checks what inference made of it (an Input node added before a root, types filled
    # in) and time constants against the dt it is stepped with
    graph = read_graph(path)
    try:
        return from_nir(graph, dt)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None
