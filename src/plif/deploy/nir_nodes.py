"""The NIR nodes of each operation of the export's walk (:mod:`.nir_walk`): neurons with their
learned ``k``, BatchNorm exactly, pooling, flatten, linear layers, voting, and the graph's edges with
a shortcut's addition as edges into the nodes that sum it.  What each node is and why:
:mod:`.nir_export`, whose functions build the graph from these."""
from __future__ import annotations

import math
import warnings

import numpy as np
import torch
from torch import nn

from ..layers import TimeInvariantDropout, Voting, unwrap
from ..neurons import SpikingNeuron
from .bn_folding import bn_scale_shift, is_batchnorm
from .nir_import import threshold_to_nir
from .nir_leak import rate_from_tau
from .nir_targets import DEFAULT_TARGET, TARGETS

__all__ = ["NIRExportError", "InexactLeakWarning", "tau_for_rate", "graph_nodes", "neuron_node"]


class NIRExportError(ValueError):
    """A layer that NIR cannot represent faithfully."""


class InexactLeakWarning(UserWarning):
    """A trained ``k`` that no float32 ``τ`` gives back at this ``dt`` (one float32 step off), allowed
    by ``allow_inexact_dt``."""


def _np(t: torch.Tensor, dtype=None) -> np.ndarray:
    a = t.detach().cpu().numpy()
    return a.astype(dtype) if dtype is not None else a.copy()


def tau_for_rate(k: np.ndarray, dt: float) -> np.ndarray:
    """Float32 ``τ`` near ``dt/k`` whose ``rate_from_tau(τ, dt)`` is closest to ``k``, entry by entry.

    For ``dt = 1``, or any power of two, this gives ``k`` back exactly (checked over the sigmoid
    range in the tests); for other ``dt`` the extra rounding of ``dt * (1/τ)`` leaves about a
    quarter of the float32 ``k`` unreachable by any τ, and those come back one float32 step off.
    """
    k = np.asarray(k, dtype=np.float32)
    base = (float(dt) / k.astype(np.float64)).astype(np.float32)
    best = base.copy()
    err = np.abs(rate_from_tau(base, dt).numpy().astype(np.float64) - k)
    down, up = base.copy(), base.copy()
    for _ in range(4):  # wider searches find nothing closer (measured for dt = 1e-4 .. 1)
        down, up = np.nextafter(down, np.float32(0)), np.nextafter(up, np.float32(np.inf))
        for cand in (down, up):
            e = np.abs(rate_from_tau(cand, dt).numpy().astype(np.float64) - k)
            better = e < err
            best[better], err[better] = cand[better], e[better]
    return best


def _tau(layer: SpikingNeuron, shape: tuple, dt: float) -> tuple[np.ndarray, bool]:
    """``(τ, exact)``: the float32 τ of the leaky ``layer``'s ``k`` at ``dt`` (:func:`tau_for_rate`)
    over its output ``shape``, and whether every ``k`` comes back from it exactly."""
    probe = torch.zeros((1, 1) + tuple(shape))
    k = np.broadcast_to(layer.k(probe).detach().to(torch.float32).cpu().numpy(), shape)
    tau = tau_for_rate(k, dt)
    return tau, bool(np.array_equal(rate_from_tau(tau, dt).numpy(), k))


def neuron_node(op) -> str | None:
    """The name of the NIR node a walk operation ``op`` (:class:`~.nir_walk.Op`) that runs a neuron
    layer exports to (``sn1_plif``, ``3_lif``), None for any other operation."""
    m = unwrap(op.module) if op.kind == "layer" else None
    return f"{op.name}_{type(m).__name__.lower()}" if isinstance(m, SpikingNeuron) else None


def _leaks_exact(ops, dt: float) -> bool:
    return all(_tau(op.module, op.shape, dt)[1] for op in ops
               if op.kind == "layer" and isinstance(op.module, SpikingNeuron) and op.module.cfg.leak)


def _neuron_node(nir, layer: SpikingNeuron, shape: tuple, where: str, dt: float, inexact: str):
    """``(node, leak exact)``: the layer's NIR neuron, and whether every ``k`` comes back at ``dt``;
    where one does not, ``inexact`` says what happens: ``refuse``, ``warn`` or ``allow`` (quietly:
    for importers that do not run plif's float32 leak anyway)."""
    cfg = layer.cfg
    if not cfg.hard_reset:
        raise NIRExportError(f"{where}: soft reset (subtract V_th) has no NIR neuron; only hard reset exports")
    full = lambda v: np.full(shape, v, dtype=np.float32)  # noqa: E731
    v_th = np.ascontiguousarray(threshold_to_nir(full(cfg.v_threshold)))
    if not cfg.leak:
        return nir.IF(r=full(1.0 / dt), v_threshold=v_th, v_reset=full(cfg.v_reset)), True
    tau, exact = _tau(layer, shape, dt)
    if not exact:
        message = (f"{where}: at dt = {dt!r} no float32 tau gives the trained k back exactly; importers (Norse, "
                   f"plif's) leak one float32 step differently, so a potential within ~1e-7 of the threshold can "
                   f"fire differently; a power-of-two dt (such as the default, {TARGETS[DEFAULT_TARGET].dt!r}, "
                   f"given to the importer too) is exact")
        if inexact == "refuse":
            raise NIRExportError(message + " (allow_inexact_dt=True, --allow-inexact-dt, exports it anyway)")
        if inexact == "warn":
            warnings.warn(message, InexactLeakWarning, stacklevel=3)
    return nir.LIF(tau=np.ascontiguousarray(tau), r=full(1.0), v_leak=full(cfg.v_reset),
                   v_threshold=v_th, v_reset=full(cfg.v_reset)), exact


def _bn_node(nir, bn: nn.Module, shape: tuple, where: str):
    """BatchNorm ``[C, H, W]`` as a 1x1 convolution of weight ``diag(α)`` and bias ``β`` (module docstring)."""
    if len(shape) != 3:
        raise NIRExportError(f"{where}: BatchNorm on features has no exact NIR form (an Affine adds its bias "
                             f"after the product, one rounding more than BatchNorm); fold it into the linear "
                             f"layer before it (bn='fold', --bn fold)")
    try:
        alpha, beta = bn_scale_shift(bn)
    except ValueError as e:
        raise NIRExportError(f"{where}: {e}") from None
    c = alpha.numel()
    weight = np.zeros((c, c, 1, 1), dtype=np.float32)
    weight[np.arange(c), np.arange(c), 0, 0] = alpha.numpy()
    return nir.Conv2d(input_shape=np.array(shape[1:]), weight=weight, stride=np.array([1, 1]),
                      padding=np.array([0, 0]), dilation=np.array([2, 2]), groups=1, bias=beta.numpy())


def _spike_or(nir, shape: tuple, dt: float):
    """A memoryless threshold neuron: ``dt/τ = 1`` makes the Euler step ``v = I``; fires iff ``I > 0.5``."""
    full = lambda v: np.full(shape, v, dtype=np.float32)  # noqa: E731
    return nir.LIF(tau=full(dt), r=full(1.0), v_leak=full(0.0), v_threshold=full(0.5), v_reset=full(0.0))


def _round_bits(x: float, bits: int) -> float:
    m, e = math.frexp(x)
    return math.ldexp(round(m * 2 ** bits), e - bits)


def _voting_nodes(nir, voting: Voting, n: int, prefix: str) -> dict:
    """``Voting`` (``mean`` of each group of ``g``: ``fl(k/g)`` for ``k`` spikes) as float32 matrix
    products that give exactly that: ``1/g = c_hi + c_lo``, each with ``24 - bits(g)`` significant
    bits, so every partial sum ``j c`` (``j <= g``) is exact in any summation order; the first node
    writes ``k c_hi`` and ``k c_lo``, the second adds them with one rounding, ``fl(k (c_hi + c_lo)) =
    fl(k/g)``.  Checked against ``voting`` itself for every ``k``; groups where no such split exists
    (``g > 260``) fall back to one node of ``1/g`` (a float32 step off), marked ``voting_mean``."""
    g, groups = voting.group, n // voting.group
    bits = 24 - g.bit_length()
    c_hi = _round_bits(1.0 / g, bits)
    c_lo = _round_bits(1.0 / g - c_hi, bits)
    k = np.arange(g + 1, dtype=np.float32)
    with torch.no_grad():
        want = voting((torch.arange(g + 1)[:, None] > torch.arange(g)[None]).float())[:, 0].numpy()
    split = np.kron(np.eye(groups, dtype=np.float32), np.ones((1, g), dtype=np.float32))
    if not np.array_equal(k * np.float32(c_hi) + k * np.float32(c_lo), want):
        return {f"{prefix}_voting_mean": nir.Affine(weight=split / np.float32(g),
                                                    bias=np.zeros(groups, dtype=np.float32))}
    parts = np.concatenate([split * np.float32(c_hi), split * np.float32(c_lo)])
    add = np.concatenate([np.eye(groups, dtype=np.float32)] * 2, axis=1)
    return {f"{prefix}_voting_parts": nir.Affine(weight=parts, bias=np.zeros(2 * groups, dtype=np.float32)),
            f"{prefix}_voting": nir.Affine(weight=add, bias=np.zeros(groups, dtype=np.float32))}


def _pair(v) -> np.ndarray:
    return np.array(v if isinstance(v, (tuple, list)) else (v, v), dtype=np.int64)


def _folds_forward(ops, j: int, users: dict) -> bool:
    """Whether op ``j``'s value reaches a conv/linear through flatten/dropout only (operations that
    commute with a scale), each read by that one operation alone."""
    while len(users.get(j, ())) == 1:
        j = users[j][0]
        op = ops[j]
        if op.kind == "layer" and isinstance(unwrap(op.module), (nn.Conv2d, nn.Linear)):
            return len(op.inputs) == 1
        passes = op.kind == "layer" and (isinstance(op.module, TimeInvariantDropout)
                                         or isinstance(unwrap(op.module), (nn.Flatten, nn.Dropout, nn.Identity)))
        if op.kind not in ("flatten", "same") and not passes:
            return False
    return False


def graph_nodes(nir, ops, shape_in: tuple, dt: float, inexact: str, bn: str) -> tuple[dict, list, bool]:
    """``(nodes, edges, every leak exact)`` of the walk's operations ``ops``: each operation's value is
    a list of nodes whose sum it is (``sources``), so an addition is only edges."""
    nodes = {"input": nir.Input(input_type={"input": np.array(shape_in)})}
    edges: list = []
    counts = {"input": False}  # node -> whether its value is a spike count (exact in any order of summation)
    sources: dict = {-1: ["input"]}
    scale: dict = {}  # op -> 1/(kh kw) of a sum-pool still to be folded into the next conv/linear
    users: dict = {}
    for j, op in enumerate(ops):
        for i in op.inputs:
            users.setdefault(i, []).append(j)
    leak_exact = True
    for j, op in enumerate(ops):
        ins = [s for i in op.inputs for s in sources[i]]
        if len(set(ins)) != len(ins):
            raise NIRExportError(f"{op.where}: adds a value to itself (x + x): NIR edges carry each value once")
        if op.kind in ("same", "add"):
            sources[j] = ins
            if op.kind == "same" and len(op.inputs) == 1 and op.inputs[0] in scale:
                scale[j] = scale[op.inputs[0]]
            continue
        shape = tuple(ops[op.inputs[0]].shape) if op.inputs[0] >= 0 else shape_in
        whole = [s for s in ins if counts[s]]
        if len(ins) > 2 and len(whole) < len(ins) and len(whole) > 1:  # the spike counts summed first, exactly
            name = f"{op.name}_sum"
            nodes[name], counts[name] = _identity_node(nir, shape, op.where), True
            edges += [(s, name) for s in whole]
            ins = [s for s in ins if not counts[s]] + [name]
        if len(ins) > 2 and not all(counts[s] for s in ins):
            raise NIRExportError(f"{op.where}: reads a sum of {len(ins)} values, not all spike counts: NIR fixes no "
                                 f"order to add them, so importers would round it differently")
        if op.kind == "flatten":
            made = [(op.name, nir.Flatten(input_type={"input": np.array(shape)}, start_dim=-len(shape), end_dim=-1))]
            is_count = all(counts[s] for s in ins)
            if op.inputs[0] in scale:
                scale[j] = scale[op.inputs[0]]
        else:
            pending = scale.get(op.inputs[0]) if len(op.inputs) == 1 else None
            made, exact, is_count, carry = _layer_nodes(nir, op, shape, dt, inexact, bn, pending,
                                                        _folds_forward(ops, j, users))
            leak_exact = leak_exact and exact
            if carry is not None:
                scale[j] = carry
            if not made:
                sources[j] = ins
                continue
            is_count = is_count or (all(counts[s] for s in ins) and _keeps_counts(op.module))
        for name, node in made:
            if name in nodes:
                raise NIRExportError(f"{op.where}: a second node named {name!r}")
            nodes[name] = node
            counts[name] = False
        edges += [(s, made[0][0]) for s in ins] + [(a, b) for (a, _), (b, _) in zip(made, made[1:])]
        counts[made[-1][0]] = is_count
        sources[j] = [made[-1][0]]
    out = sources[len(ops) - 1]
    if len(out) > 1:  # importers return one node's value: the sum through an identity node
        nodes["output_sum"] = _identity_node(nir, tuple(ops[-1].shape), ops[-1].where)
        edges += [(s, "output_sum") for s in out]
        out = ["output_sum"]
    nodes["output"] = nir.Output(output_type={"output": np.array(ops[-1].shape)})
    edges.append((out[0], "output"))
    return nodes, edges, leak_exact


def _keeps_counts(m: nn.Module) -> bool:
    """Whether integer-valued input stays integer-valued (a sum of spikes through flatten/pooling by sum)."""
    return isinstance(unwrap(m), (nn.Flatten, nn.MaxPool2d, nn.Identity))


def _identity_node(nir, shape: tuple, where: str):
    """A node whose output is its (summed) input exactly: a 1x1 convolution of the identity (plif's
    importer runs it as BatchNorm of scale 1, shift 0) or an identity ``Affine``."""
    if len(shape) == 3:
        c = shape[0]
        weight = np.zeros((c, c, 1, 1), dtype=np.float32)
        weight[np.arange(c), np.arange(c), 0, 0] = 1.0
        return nir.Conv2d(input_shape=np.array(shape[1:]), weight=weight, stride=np.array([1, 1]),
                          padding=np.array([0, 0]), dilation=np.array([2, 2]), groups=1,
                          bias=np.zeros(c, dtype=np.float32))
    if len(shape) == 1:
        return nir.Affine(weight=np.eye(shape[0], dtype=np.float32), bias=np.zeros(shape[0], dtype=np.float32))
    raise NIRExportError(f"{where}: a sum of shape {list(shape)} as the output has no identity node in NIR")


def _layer_nodes(nir, op, shape: tuple, dt: float, inexact: str, bn: str, scale_in, folds_forward: bool):
    """``(nodes [(name, node)], leak exact, output is a spike count, scale for the next conv/linear)``
    of one layer ``op`` on input ``shape``; no nodes for a layer that is the identity at inference."""
    layer, where, i, out_shape = op.module, op.where, op.name, tuple(op.shape)
    m = unwrap(layer)
    if isinstance(layer, TimeInvariantDropout) or isinstance(m, (nn.Dropout, nn.Identity)):
        return [], True, False, scale_in
    if is_batchnorm(layer):
        if bn == "fold" and len(shape) != 3:
            raise NIRExportError(f"{where}: a BatchNorm on features that follows no linear layer can be "
                                 f"neither folded nor written exactly")
        return [(f"{i}_bn", _bn_node(nir, m, shape, where))], True, False, None
    if isinstance(m, nn.Conv2d):
        bias = m.bias if m.bias is not None else torch.zeros(m.out_channels)
        if isinstance(m.padding, str):
            raise NIRExportError(f"{where}: string padding {m.padding!r} is not exported")
        weight = _np(m.weight) * (scale_in or 1)
        return [(f"{i}_conv", nir.Conv2d(input_shape=np.array(shape[1:]), weight=weight, stride=_pair(m.stride),
                                         padding=_pair(m.padding), dilation=_pair(m.dilation), groups=m.groups,
                                         bias=_np(bias)))], True, False, None
    if isinstance(m, nn.Linear):
        weight = _np(m.weight) * (scale_in or 1)
        bias = _np(m.bias) if m.bias is not None else np.zeros(m.out_features, dtype=weight.dtype)
        return [(f"{i}_linear", nir.Affine(weight=weight, bias=bias))], True, False, None
    if isinstance(m, nn.Flatten):
        if out_shape != (int(np.prod(shape)),):
            raise NIRExportError(f"{where}: flattens {list(shape)} to {list(out_shape)}; NIR's Flatten here takes "
                                 f"every per-sample dimension")
        node = nir.Flatten(input_type={"input": np.array(shape)}, start_dim=-len(shape), end_dim=-1)
        return [(f"{i}_flatten", node)], True, False, scale_in
    if isinstance(m, (nn.AvgPool2d, nn.AdaptiveAvgPool2d)):
        return _avg_pool(nir, m, shape, out_shape, where, i, folds_forward)
    if isinstance(m, nn.MaxPool2d):
        if not op.spikes:
            raise NIRExportError(f"{where}: NIR has no max-pooling node; max pooling is exported as "
                                 f"OR of spikes (SumPool2d + threshold neuron) only when its input is spikes")
        if m.dilation not in (1, (1, 1)) or m.ceil_mode:
            raise NIRExportError(f"{where}: only dilation=1, ceil_mode=False max pooling exports")
        return [(f"{i}_maxpool_sum", _window_sum(nir, m, shape)),
                (f"{i}_maxpool_or", _spike_or(nir, out_shape, dt))], True, True, None
    if isinstance(m, Voting):
        return list(_voting_nodes(nir, m, shape[0], str(i)).items()), True, False, None
    if isinstance(m, SpikingNeuron):
        node, exact = _neuron_node(nir, m, out_shape, where, dt, inexact)
        return [(neuron_node(op), node)], exact, True, None
    raise NIRExportError(f"{where}: no NIR mapping for {type(m).__name__}")


def _avg_pool(nir, m: nn.Module, shape: tuple, out_shape: tuple, where: str, i: str, folds_forward: bool):
    """Average pooling: a ``SumPool2d`` whose ``1/(kh kw)`` is folded into the next conv/linear where
    that is exact (a power of two, no padding), else ``AvgPool2d``; an adaptive pool as the fixed
    pool it is on this input (refused where its windows differ in size)."""
    if isinstance(m, nn.AdaptiveAvgPool2d):
        (h, w), (oh, ow) = shape[1:], out_shape[1:]
        if h % oh or w % ow:
            raise NIRExportError(f"{where}: adaptive average pooling from {h}x{w} to {oh}x{ow} has windows of "
                                 f"different sizes; NIR's pools have one window")
        kernel = stride = np.array([h // oh, w // ow], dtype=np.int64)
        padding, ceil = np.array([0, 0], dtype=np.int64), False
    else:
        kernel, stride, padding, ceil = _pair(m.kernel_size), _pair(m.stride), _pair(m.padding), m.ceil_mode
    # folding 1/(kh kw) into the next weights is exact only when it is a power of two (2x2, 4x4)
    exact_fold = np.frexp(float(np.prod(kernel)))[0] == 0.5
    if padding.any() or ceil or not exact_fold or not folds_forward:
        return [(f"{i}_avgpool", nir.AvgPool2d(kernel_size=kernel, stride=stride, padding=padding))], True, False, None
    # Norse has no AvgPool2d: a sum-pool, its 1/(kh kw) folded into the next weights
    return ([(f"{i}_avgpool_sum", nir.SumPool2d(kernel_size=kernel, stride=stride, padding=padding))], True, False,
            np.float32(1.0 / float(np.prod(kernel))))


def _window_sum(nir, m: nn.MaxPool2d, shape: tuple):
    """The spike count of each max-pool window: ``SumPool2d``, or with padding (which nirtorch's
    ``SumPool2d`` ignores) a convolution of ones on each channel's own window, exact on spike counts."""
    kernel, stride, padding = _pair(m.kernel_size), _pair(m.stride), _pair(m.padding)
    if not padding.any():
        return nir.SumPool2d(kernel_size=kernel, stride=stride, padding=padding)
    c = shape[0]
    weight = np.zeros((c, c, *kernel), dtype=np.float32)
    weight[np.arange(c), np.arange(c)] = 1.0
    return nir.Conv2d(input_shape=np.array(shape[1:]), weight=weight, stride=stride, padding=padding,
                      dilation=np.array([1, 1]), groups=1, bias=np.zeros(c, dtype=np.float32))
