"""Export a network to NIR (Neuromorphic Intermediate Representation, ``pip install nir``).

NIR describes neurons in continuous time; a file records the time-step ``dt`` it assumes
(``metadata["dt"]``: the one the importer named by ``plif export --for`` assumes, or ``--dt``),
the importer it is for (``metadata["target"]``), and whether it is exact: ``metadata["bn"]``
(``exact`` or ``folded``) and ``metadata["leak"]`` (``exact``: every layer's ``k`` comes back).
The paper's neuron is the forward-Euler step of NIR's LIF with ``dt/τ = k``:

    NIR LIF:   τ dv/dt = (v_leak - v) + r I      Euler:  v += (dt/τ) (r I - (v - v_leak))
    paper:     H_t = V_{t-1} + k (X_t - (V_{t-1} - V_reset)),  k = 1/τ_paper = sigmoid(w) for PLIF
    NIR IF:    dv/dt = r I                       Euler:  v += dt r I
    paper IF:  H_t = V_{t-1} + X_t

so a PLIF/LIF layer maps to ``nir.LIF(tau = dt/k, r = 1, v_leak = V_reset, ...)`` with the
*learned* ``k`` and an IF layer to ``nir.IF(r = 1/dt, ...)``: ``dt`` scales τ and the IF input gain
so that an importer stepping the file with that ``dt`` reproduces the paper's discrete dynamics.
τ is stored in float32 and chosen so that ``float32(dt) * float32(1/τ)`` (the product Norse and
this package's importer form) rounds back to ``k`` whenever a float32 τ can do that (see
:func:`tau_for_rate`).  Parameters are arrays over the layer's neurons (per-channel τ broadcast).

Other layers, written the way snnTorch's and Norse's importers (through nirtorch) run them:

- BatchNorm (eval: ``fma(x, α, β)`` per channel, :func:`~.bn_folding.bn_scale_shift`) exactly, by
  default (``bn="exact"``): the conv before it keeps its own weights (zero bias) and the BN is a
  1x1 ``nir.Conv2d`` of weight ``diag(α)`` and bias ``β`` (NIR has no BatchNorm node, and no
  importer reads a convolution's ``groups``).  plif's importer runs it as BatchNorm (:mod:`.nir_bn`):
  exact.  Norse runs it as a torch convolution, whose oneDNN kernel starts an output's
  accumulator at the bias and adds the products with fused multiply-adds, ``fma(x, α, β)``, for
  the input channels of its first block over channels, and adds the later blocks' sums to that
  afterwards, one rounding more (on the test machine: 128 channels from 16x16 frames up);
  ``plif export`` and ``--check`` measure which (:func:`~.nir_targets.importer_report`).  Its
  dilation is 2, which changes nothing for a 1x1 kernel but makes torch run it through oneDNN:
  single-threaded, torch runs an undilated 1x1 convolution of fewer than 16 samples through its
  own GEMM, which adds the bias after the product.  (A 1x3 kernel would do the same, but NIR 1.0.8
  types every kernel as square.)  BN on features (after a linear layer) has no exact form (an
  ``Affine`` adds its bias after the product) and is refused.  ``bn="fold"`` merges each BN into
  the conv/linear before it (smaller, what hardware wants, but it rounds differently: a potential
  within rounding of the threshold can fire differently; the check reports how many outputs
  change).
- flatten -> ``nir.Flatten(start_dim = -len(shape), end_dim = -1)``: NIR shapes have no batch
  dimension, while the importers apply ``start_dim`` to batched tensors as ``torch.nn.Flatten``
  does; a negative ``start_dim`` means "from the first per-sample dimension" under both readings,
  so the batch dimension is never flattened and the graph still type-checks in ``nir``.
- average pooling followed (through flatten/dropout only) by a conv/linear -> ``nir.SumPool2d``
  with its ``1/(kh kw)`` folded into that layer's weights when ``kh kw`` is a power of two
  (exact: 2x2, 4x4): Norse's importer has no ``AvgPool2d``.  Otherwise, or with padding ->
  ``nir.AvgPool2d``.
- dropout is the identity at inference and is left out.
- max pooling of spikes -> ``nir.SumPool2d`` then a memoryless threshold neuron
  ``nir.LIF(tau = dt, r = 1, v_leak = 0, v_threshold = 0.5, v_reset = 0)`` (``_maxpool_or``): with
  ``dt/τ = 1`` the Euler step sets ``v = I`` (the window's spike count), which fires iff
  ``I >= 1``, i.e. iff the window holds a spike: the OR of binary inputs is their max.  An
  ``nir.IF`` with reset to zero computes the same for non-negative integer input, but snnTorch's
  importer turns IF into a leaky neuron (β = 0.9, subtractive reset) that returns a tuple, so it
  cannot run there; NIR (1.0.x) has no max-pool node and its ``Threshold`` node runs in neither
  importer.  Max pooling of non-spike values is refused.
- the voting layer (mean of each group of ``g`` output neurons) -> two fixed ``nir.Affine`` nodes
  whose float32 arithmetic gives plif's ``mean = fl(k/g)`` exactly for every spike count ``k``
  (:func:`_voting_nodes`); one Linear of ``1/g`` would not (``0.1+...+0.1 != 0.7`` in float32).
- linear layers are ``nir.Affine`` (zero bias where plif has none, which adds exactly nothing):
  Sinabs' importer knows no ``nir.Linear``.

Not representable, refused with an error naming the layer: soft reset, BN on features (unless
folded into the linear layer before it), and, unless ``allow_inexact_dt``, a ``dt`` at which some
trained ``k`` has no float32 τ (:func:`tau_for_rate`; the default ``dt`` of Norse and of plif's
own importer are powers of two, where every ``k`` has one).  Spikes fire on ``H >= V_th`` in this project and on ``v > v_threshold`` in NIR,
Norse and snnTorch: the file holds ``v_threshold = nextafter(V_th, -inf)`` in float32
(:func:`~plif.deploy.nir_import.threshold_to_nir`), on which ``>`` and ``>=`` agree for every float32
potential, one that lands exactly on ``V_th`` included.  ``target`` (:mod:`.nir_targets`) picks the
``dt`` an importer assumes and refuses what it would run differently.
"""
from __future__ import annotations

import copy
import math
import numbers
import warnings
from pathlib import Path

import numpy as np
import torch
from torch import nn

from ..atomic import atomic_path
from ..layers import TimeInvariantDropout, Voting, unwrap
from ..models import SpikingNetwork
from ..models.inputs import repeat_over_time
from ..models.structure import spike_inputs
from ..neurons import SpikingNeuron
from .bn_folding import bn_scale_shift, fold_batchnorm, is_batchnorm
from .nir_import import from_nir, threshold_to_nir
from .nir_leak import rate_from_tau
from .nir_targets import (BN_MODES, DEFAULT_BN, DEFAULT_TARGET, TARGETS, check_target, graph_meta, importer_summary, target_dt,
                          target_path)

__all__ = ["to_nir", "write_nir", "verify_nir", "export_nir", "export_nir_all", "tau_for_rate", "as_trained",
           "NIRExportError", "InexactLeakWarning", "InexactExportWarning"]


class NIRExportError(ValueError):
    """A layer that NIR cannot represent faithfully."""


class InexactLeakWarning(UserWarning):
    """A trained ``k`` that no float32 ``τ`` gives back at this ``dt`` (one float32 step off), allowed
    by ``allow_inexact_dt``."""


class InexactExportWarning(UserWarning):
    """A file that was asked to be inexact (``bn="fold"``, ``allow_inexact_dt``): how many outputs of
    the check differ from the network as trained."""


def _nir():
    try:
        import nir
    except ImportError:
        raise RuntimeError("NIR export needs the 'nir' package: pip install nir") from None
    return nir


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


def leaks_exact_at(net: SpikingNetwork, dt: float) -> bool:
    """Whether every leaky neuron layer's trained ``k`` has a float32 τ at ``dt``."""
    return all(_tau(m, info.out_shape, dt)[1] for m, info in zip(net.layers, net.info)
               if isinstance(m, SpikingNeuron) and m.cfg.leak)


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


def _folds_forward(rest) -> bool:
    """Whether a conv/linear follows with only flatten/dropout between (layers that commute with a scale)."""
    for layer in rest:
        m = unwrap(layer)
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            return True
        if not (isinstance(layer, TimeInvariantDropout) or isinstance(m, nn.Flatten)):
            return False
    return False


def _check_dt(dt) -> None:
    if dt is not None and (isinstance(dt, bool) or not isinstance(dt, numbers.Real)
                           or not (np.isfinite(dt) and dt > 0)):
        raise NIRExportError(f"dt must be a positive finite time-step (the unit the importer steps in), got {dt!r}")


def _check_network(net) -> None:
    """The exporters take a :class:`SpikingNetwork`; say what came instead (``load_run`` returns
    ``(network, config)``)."""
    if isinstance(net, SpikingNetwork):
        return
    hint = ("; load_run returns (network, config): net, _ = load_run(run)" if isinstance(net, tuple) and net
            and isinstance(net[0], SpikingNetwork) else "")
    raise TypeError(f"expected a plif SpikingNetwork (build_network, build_zoo, load_run), got "
                    f"{type(net).__name__}{hint}")


def to_nir(net: SpikingNetwork, dt: float | None = None, target: str = DEFAULT_TARGET, bn: str = DEFAULT_BN,
           allow_inexact_dt: bool = False):
    """The ``nir.NIRGraph`` of ``net`` (eval mode): a chain ``input -> ... -> output``, for
    ``target``'s importer (:data:`~plif.deploy.nir_targets.TARGETS`, Norse by default) stepping it
    with time-step ``dt`` (> 0; default: the one that importer assumes; for Norse its own default
    1e-3 where every trained ``k`` has a float32 τ there, else the power of two ``2**-10``).  ``bn``: ``exact`` (BatchNorm as its own node, computing what the trained network
    computes) or ``fold`` (merged into the conv/linear before it; rounds differently).
    ``allow_inexact_dt``: export even where a trained ``k`` has no float32 τ at ``dt`` (a warning
    instead of :class:`NIRExportError`; targets whose importer is close, not exact, never refuse).

    Node names are ``<layer index>_<kind>``, indices of ``net``'s layers (of the folded network
    with ``bn="fold"``); the input node has the per-sample input shape and receives one frame per
    time-step (a static image is repeated ``T`` times).
    """
    nir = _nir()
    _check_network(net)
    _check_dt(dt)
    if bn not in BN_MODES:
        raise NIRExportError(f"bn must be one of {', '.join(BN_MODES)}, got {bn!r}")
    try:
        asked, dt = dt, target_dt(target, dt)
    except ValueError as e:
        raise NIRExportError(str(e)) from None
    own = TARGETS[target].importer_dt  # Norse's 1e-3: the file runs with from_nir(graph) as users call it
    if asked is None and own is not None and leaks_exact_at(net, own):
        dt = own
    # snnTorch's importer forms its leak in float64 from dt/tau, never plif's float32 k: no dt is exact there
    inexact = "allow" if not TARGETS[target].exact else "warn" if allow_inexact_dt else "refuse"
    src = fold_batchnorm(net) if bn == "fold" else net
    nodes = {"input": nir.Input(input_type={"input": np.array(src.input_shape)})}
    shape = tuple(src.input_shape)
    fed_spikes = spike_inputs(src.layers)
    leak_exact = True
    scale_next = None  # 1/(kh kw) of a sum-pool still to be folded into the next conv/linear
    for i, (layer, info, binary) in enumerate(zip(src.layers, src.info, fed_spikes)):
        m = unwrap(layer)
        where = f"layer {i} ({info.token})"
        if isinstance(layer, TimeInvariantDropout):
            continue
        if is_batchnorm(layer):
            if bn == "fold" and len(shape) != 3:
                raise NIRExportError(f"{where}: a BatchNorm on features that follows no linear layer can be "
                                     f"neither folded nor written exactly")
            nodes[f"{i}_bn"] = _bn_node(nir, m, shape, where)
        elif isinstance(m, nn.Conv2d):
            bias = m.bias if m.bias is not None else torch.zeros(m.out_channels)
            if isinstance(m.padding, str):
                raise NIRExportError(f"{where}: string padding {m.padding!r} is not exported")
            weight, scale_next = _np(m.weight) * (scale_next or 1), None
            nodes[f"{i}_conv"] = nir.Conv2d(input_shape=np.array(shape[1:]), weight=weight,
                                            stride=_pair(m.stride), padding=_pair(m.padding),
                                            dilation=_pair(m.dilation), groups=m.groups, bias=_np(bias))
        elif isinstance(m, nn.Linear):
            weight, scale_next = _np(m.weight) * (scale_next or 1), None
            bias = _np(m.bias) if m.bias is not None else np.zeros(m.out_features, dtype=weight.dtype)
            nodes[f"{i}_linear"] = nir.Affine(weight=weight, bias=bias)
        elif isinstance(m, nn.Flatten):
            nodes[f"{i}_flatten"] = nir.Flatten(input_type={"input": np.array(shape)},
                                                  start_dim=-len(shape), end_dim=-1)
        elif isinstance(m, nn.AvgPool2d):
            kernel = _pair(m.kernel_size)
            # folding 1/(kh kw) into the next weights is exact only when it is a power of two (2x2, 4x4)
            exact_fold = np.frexp(float(np.prod(kernel)))[0] == 0.5
            if _pair(m.padding).any() or m.ceil_mode or not exact_fold or not _folds_forward(src.layers[i + 1:]):
                nodes[f"{i}_avgpool"] = nir.AvgPool2d(kernel_size=kernel, stride=_pair(m.stride),
                                                      padding=_pair(m.padding))
            else:  # Norse has no AvgPool2d: a sum-pool, its 1/(kh kw) folded into the next weights
                nodes[f"{i}_avgpool_sum"] = nir.SumPool2d(kernel_size=kernel, stride=_pair(m.stride),
                                                          padding=_pair(m.padding))
                scale_next = np.float32(1.0 / float(np.prod(kernel)))
        elif isinstance(m, nn.MaxPool2d):
            if not binary:
                raise NIRExportError(f"{where}: NIR has no max-pooling node; max pooling is exported as "
                                     f"OR of spikes (SumPool2d + threshold neuron) only when its input is spikes")
            if m.dilation not in (1, (1, 1)) or m.ceil_mode:
                raise NIRExportError(f"{where}: only dilation=1, ceil_mode=False max pooling exports")
            nodes[f"{i}_maxpool_sum"] = nir.SumPool2d(kernel_size=_pair(m.kernel_size), stride=_pair(m.stride),
                                                      padding=_pair(m.padding))
            nodes[f"{i}_maxpool_or"] = _spike_or(nir, tuple(info.out_shape), dt)
        elif isinstance(m, Voting):
            nodes.update(_voting_nodes(nir, m, shape[0], str(i)))
        elif isinstance(m, SpikingNeuron):
            node, exact = _neuron_node(nir, m, info.out_shape, where, dt, inexact)
            nodes[f"{i}_{type(m).__name__.lower()}"] = node
            leak_exact = leak_exact and exact
        else:
            raise NIRExportError(f"{where}: no NIR mapping for {type(m).__name__}")
        shape = tuple(info.out_shape)
    nodes["output"] = nir.Output(output_type={"output": np.array(shape)})
    names = list(nodes)
    metadata = {"source": "plif", "spec": src.spec, "T": int(src.T), "dt": dt, "target": target,
                "bn": "folded" if bn == "fold" else "exact", "leak": "exact" if leak_exact else "inexact",
                "input_shape": np.array(src.input_shape),
                "neuron_discretisation": "forward Euler with metadata dt: LIF v += (dt/tau) (r I - (v - v_leak)), "
                                         "IF v += dt r I; fire v > v_threshold (float32: the largest float below "
                                         "plif's threshold, on which > and plif's >= agree); hard reset to v_reset"}
    graph = nir.NIRGraph(nodes=nodes, edges=list(zip(names[:-1], names[1:])), metadata=metadata)
    try:
        check_target(graph, target)
    except ValueError as e:
        raise NIRExportError(f"cannot export for {target}: {e}") from None
    graph.metadata["importers"] = importer_summary(graph)  # where it runs, for whoever reads the file
    return graph


def write_nir(graph, path: str | Path) -> Path:
    """Write ``graph`` to ``path`` atomically (a temporary file beside it, then ``os.replace``)."""
    nir = _nir()
    with atomic_path(path) as tmp:
        nir.write(tmp, graph)
    return Path(path)


def as_trained(net: SpikingNetwork) -> SpikingNetwork:
    """``net`` in eval mode and float32, as a copy unless it is that already (``net`` is not changed)."""
    if not net.training and all(p.dtype == torch.float32 for p in net.parameters()):
        return net
    return copy.deepcopy(net).float().eval()


@torch.no_grad()
def output_atol(graph) -> float:
    """How far a re-imported ``graph``'s outputs may be from the network's: outputs are spikes or voting
    means, exact (:func:`_voting_nodes`) unless a group too large for the exact split fell back to
    1/g, where one differing spike still moves a value by 1/g >> this."""
    return 1e-5 if any(name.endswith("_voting_mean") for name in graph.nodes) else 0.0


def verify_nir(net: SpikingNetwork, graph, samples: int = 4, seed: int = 0) -> tuple[int, int]:
    """Import ``graph`` back and run it and ``net`` as trained (eval mode, float32, BN unfolded) on
    random input (static ``[samples, *input_shape]`` repeated over T): ``(outputs that differ,
    outputs)``.  A graph whose metadata says it is exact (``bn`` and ``leak`` ``exact``) must
    reproduce ``net`` bit for bit: otherwise ``NIRExportError``."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(samples, *net.input_shape, generator=g)
    x = repeat_over_time(x, net.T)
    want = as_trained(net)(x)
    got = from_nir(graph)(x)
    if want.shape != got.shape:
        raise NIRExportError(f"re-imported NIR graph gives outputs of shape {tuple(got.shape)}, the network "
                             f"{tuple(want.shape)}")
    atol = output_atol(graph)
    differ = int(((want - got).abs() > atol).sum())
    if differ and graph_meta(graph, "bn") == "exact" and graph_meta(graph, "leak") == "exact":
        raise NIRExportError(f"re-imported NIR graph does not reproduce the network ({differ} of {want.numel()} "
                             f"outputs differ)")
    return differ, want.numel()


def export_nir(net: SpikingNetwork, path: str | Path, verify: bool = True, dt: float | None = None,
               target: str = DEFAULT_TARGET, bn: str = DEFAULT_BN, allow_inexact_dt: bool = False) -> Path:
    """Convert for ``target`` and time-step ``dt`` (:func:`to_nir`, the same defaults), check the
    round trip against ``net`` as trained (``verify``) and write; on any error nothing is written.
    A file asked to be inexact (``bn="fold"``, or an inexact ``dt`` allowed) that changes outputs of
    the check gives an :class:`InexactExportWarning` saying how many.

    Example (needs the ``nir`` package): the file for Norse, read back by plif's own importer:

    >>> import tempfile, torch
    >>> from pathlib import Path
    >>> from plif import build_network
    >>> from plif.deploy import export_nir, read_nir
    >>> net = build_network("c4k3s1-BN-PLIF-MPk4s4-FC20-PLIF-APk10s10", (2, 16, 16), T=5).eval()
    >>> path = export_nir(net, Path(tempfile.mkdtemp()) / "net.nir")
    >>> frames = torch.rand(5, 3, 2, 16, 16)
    >>> torch.equal(read_nir(path)(frames), net(frames))
    True
    """
    graph = to_nir(net, dt, target, bn, allow_inexact_dt)
    if verify:
        _verify(net, graph, bn)
    return write_nir(graph, path)


def _verify(net: SpikingNetwork, graph, bn: str) -> None:
    """:func:`verify_nir`, and an :class:`InexactExportWarning` saying how many outputs of the check
    a file asked to be inexact changes."""
    differ, total = verify_nir(net, graph)
    if differ:
        causes = [c for c, on in (("BN folding", bn == "fold"),
                                  ("the inexact leak", graph_meta(graph, "leak") != "exact")) if on]
        why = " and ".join(causes) or "the importer's rounding"
        warnings.warn(f"{why} changes {differ} of {total} outputs of the check (random input, "
                      f"{total // int(net.T)} values per step, T = {net.T}) from the network as trained",
                      InexactExportWarning, stacklevel=3)


def export_nir_all(net: SpikingNetwork, path: str | Path, verify: bool = True, bn: str = DEFAULT_BN,
                   allow_inexact_dt: bool = False) -> dict[str, Path | str]:
    """One file per importer (:data:`~plif.deploy.nir_targets.TARGETS`, each at its own ``dt``),
    named after it (:func:`~plif.deploy.nir_targets.target_path`: ``model.nir`` ->
    ``model.norse.nir``, ``model.snntorch.nir``, ...): a dict from each target to the file written,
    or to why that importer cannot run the network.  Every file is converted and checked before any is written
    (each atomically); a network no importer can run is an :class:`NIRExportError`.  Notes of
    :func:`export_nir` name their target.

    Example (needs the ``nir`` package):

    >>> import tempfile
    >>> from pathlib import Path
    >>> from plif import build_network
    >>> from plif.deploy import export_nir_all
    >>> net = build_network("c4k3s1-BN-PLIF-MPk4s4-FC20-PLIF-APk10s10", (2, 16, 16), T=5).eval()
    >>> files = export_nir_all(net, Path(tempfile.mkdtemp()) / "net.nir")
    >>> sorted(path.name for path in files.values())
    ['net.generic.nir', 'net.norse.nir', 'net.sinabs.nir', 'net.snntorch.nir']
    """
    graphs, out = {}, {}
    for target in TARGETS:
        with warnings.catch_warnings(record=True) as notes:
            warnings.simplefilter("always", InexactLeakWarning)
            warnings.simplefilter("always", InexactExportWarning)
            try:
                graphs[target] = to_nir(net, None, target, bn, allow_inexact_dt)
                if verify:
                    _verify(net, graphs[target], bn)
            except NIRExportError as e:
                graphs.pop(target, None)
                out[target] = str(e)
        for note in notes:  # re-issued outside the recording, naming the file's target
            ours = issubclass(note.category, (InexactLeakWarning, InexactExportWarning))
            warnings.warn(f"{target}: {note.message}" if ours else note.message, note.category, stacklevel=2)
    if not graphs:
        raise NIRExportError("no importer can run this network: " + "; ".join(out.values()))
    for target, graph in graphs.items():
        out[target] = write_nir(graph, target_path(path, target))
    return {target: out[target] for target in TARGETS}
