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
import numbers
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from ..atomic import atomic_path
from ..models import SpikingNetwork
from ..models.inputs import repeat_over_time
from .bn_folding import fold_batchnorm
from .nir_import import from_nir
from .nir_nodes import InexactLeakWarning, NIRExportError, _leaks_exact, _spike_or, graph_nodes, tau_for_rate  # noqa: F401
from .nir_targets import (BN_MODES, DEFAULT_BN, DEFAULT_TARGET, TARGETS, check_target, graph_meta, importer_summary, target_dt,
                          target_path)

__all__ = ["to_nir", "write_nir", "verify_nir", "export_nir", "export_nir_all", "tau_for_rate", "as_trained",
           "NIRExportError", "InexactLeakWarning", "InexactExportWarning"]


class InexactExportWarning(UserWarning):
    """A file that was asked to be inexact (``bn="fold"``, ``allow_inexact_dt``): how many outputs of
    the check differ from the network as trained."""


def _nir():
    try:
        import nir
    except ImportError:
        raise RuntimeError("NIR export needs the 'nir' package: pip install nir") from None
    return nir


def leaks_exact_at(net: nn.Module, dt: float, input_shape=None) -> bool:
    """Whether every leaky neuron layer's trained ``k`` has a float32 τ at ``dt`` (``input_shape``:
    a module's per-sample input, :func:`to_nir`)."""
    return _leaks_exact(_walk(net, _input_shape(net, input_shape)), dt)


def _check_dt(dt) -> None:
    if dt is not None and (isinstance(dt, bool) or not isinstance(dt, numbers.Real)
                           or not (np.isfinite(dt) and dt > 0)):
        raise NIRExportError(f"dt must be a positive finite time-step (the unit the importer steps in), got {dt!r}")


def _check_network(net) -> None:
    """The exporters take an ``nn.Module`` plif can trace (a notation network included); say what
    came instead (``load_run`` returns ``(network, config)``)."""
    if isinstance(net, nn.Module):
        return
    hint = ("; load_run returns (network, config): net, _ = load_run(run)" if isinstance(net, tuple) and net
            and isinstance(net[0], nn.Module) else "")
    raise TypeError(f"expected an nn.Module (build_network, build_zoo, load_run, a module of plif's layers), got "
                    f"{type(net).__name__}{hint}")


def _input_shape(net: nn.Module, input_shape) -> tuple:
    """The per-sample input shape: a notation network's own, else ``input_shape`` (required)."""
    own = getattr(net, "input_shape", None) if isinstance(net, SpikingNetwork) else None
    if input_shape is None:
        if own is None:
            raise NIRExportError(f"{type(net).__name__}: the input shape is not known; pass input_shape=(C, H, W) "
                                 f"(one sample, no time or batch dimension)")
        return tuple(own)
    try:
        shape = tuple(int(v) for v in input_shape)
    except (TypeError, ValueError):
        raise NIRExportError(f"input_shape must be a tuple of sizes such as (C, H, W), got {input_shape!r}") from None
    if not shape or min(shape) < 1 or any(isinstance(v, bool) or v != int(v) for v in input_shape):
        raise NIRExportError(f"input_shape must be positive sizes such as (C, H, W), got {input_shape!r}")
    if own is not None and shape != tuple(own):
        raise NIRExportError(f"input_shape {shape} differs from the network's own {tuple(own)}")
    return shape


def _steps(net: nn.Module, T) -> int | None:
    """The time-steps the network was trained with: a notation network's own, else ``T`` (None: unknown)."""
    own = getattr(net, "T", None) if isinstance(net, SpikingNetwork) else None
    if T is None:
        return None if own is None else int(own)
    if isinstance(T, bool) or not isinstance(T, numbers.Integral) or T < 1:
        raise NIRExportError(f"T must be a number of time-steps >= 1, got {T!r}")
    return int(T)


def _walk(net: nn.Module, input_shape: tuple) -> list:
    from .nir_walk import WalkError, walk

    try:
        return walk(net, input_shape)
    except WalkError as e:
        raise NIRExportError(str(e)) from None


def _scaling(input_scaling) -> dict:
    """``{"input_mean": [C], "input_std": [C]}`` for the metadata from ``(mean, std)`` (per channel,
    or one value each); ``{}`` for None."""
    if input_scaling is None:
        return {}
    try:
        mean, std = input_scaling
        mean = np.atleast_1d(np.asarray(mean, dtype=np.float64))
        std = np.atleast_1d(np.asarray(std, dtype=np.float64))
    except (TypeError, ValueError):
        raise NIRExportError(f"input_scaling must be (mean, std), per channel or one value each, got "
                             f"{input_scaling!r}") from None
    if mean.ndim != 1 or std.ndim != 1 or not (np.isfinite(mean).all() and np.isfinite(std).all() and (std > 0).all()):
        raise NIRExportError(f"input_scaling must be finite (mean, std) with std > 0, got {input_scaling!r}")
    return {"input_mean": mean, "input_std": std,
            "input": "each channel c of an image in [0, 1] (pixel / 255) as (x - input_mean[c]) / input_std[c], "
                     "the input the network was trained on, fed at every time-step"}


def to_nir(net: nn.Module, dt: float | None = None, target: str = DEFAULT_TARGET, bn: str = DEFAULT_BN,
           allow_inexact_dt: bool = False, *, input_shape=None, T: int | None = None, input_scaling=None):
    """The ``nir.NIRGraph`` of ``net`` (eval mode): a notation network, or any ``nn.Module`` plif can
    trace (:mod:`.nir_walk`: the residual zoo, a converted SpikingJelly model, a network written with
    plif's layers), for ``target``'s importer (:data:`~plif.deploy.nir_targets.TARGETS`, Norse by
    default) stepping it with time-step ``dt`` (> 0; default: the one that importer assumes; for Norse
    its own default 1e-3 where every trained ``k`` has a float32 τ there, else the power of two
    ``2**-10``).  ``bn``: ``exact`` (BatchNorm as its own node, computing what the trained network
    computes) or ``fold`` (merged into the conv/linear before it; rounds differently).
    ``allow_inexact_dt``: export even where a trained ``k`` has no float32 τ at ``dt`` (a warning
    instead of :class:`NIRExportError`; targets whose importer is close, not exact, never refuse).
    ``input_shape``: the per-sample input ``(C, H, W)`` (a notation network knows its own; required
    for any other module); ``T``: the time-steps it was trained with (recorded in the metadata; a
    notation network's own); ``input_scaling``: ``(mean, std)`` per channel the training input was
    normalised with, recorded in the metadata (``input_mean``, ``input_std``) so that whoever feeds
    the file knows what input it expects.

    Node names are ``<layer>_<kind>``: the layer's index in a notation network (of the folded
    network with ``bn="fold"``), its qualified name with ``_`` for ``.`` in a module; the input node
    has the per-sample input shape and receives one frame per time-step (a static image is repeated
    ``T`` times).  A shortcut that adds two values (SEW ADD, or the sum before a Spiking ResNet neuron)
    has no node: each node reading the sum has an edge from every value summed (a NIR node sums its
    inputs); a sum that is the output goes through an identity node ``output_sum`` (importers return
    one node's value).  A sum of three or more values not all spike counts is refused (NIR fixes no
    order to add them).  Norse's and Sinabs' importers run nodes depth first: where two branches with
    layers of their own meet (a downsampling shortcut), their files hold a node of zeros that makes
    the join wait (:func:`~plif.deploy.nir_order.order_for_depth_first`), or the export is refused
    where none fits.
    """
    _check_network(net)
    _check_dt(dt)
    _check_bn(bn)
    try:
        asked, dt = dt, target_dt(target, dt)
    except ValueError as e:
        raise NIRExportError(str(e)) from None
    return _graph(net, _walked(net, bn, input_shape, T, input_scaling), target, asked, dt, bn, allow_inexact_dt)


def _check_bn(bn) -> None:
    if bn not in BN_MODES:
        raise NIRExportError(f"bn must be one of {', '.join(BN_MODES)}, got {bn!r}")


@dataclass
class _Walked:
    """What every target's graph of one network is made from: the network walked (BN-folded with
    ``bn="fold"``), its walk, and what the metadata records of it."""

    src: nn.Module
    ops: list
    shape_in: tuple
    steps: int | None
    scaling: dict


def _walked(net: nn.Module, bn: str, input_shape, T, input_scaling) -> _Walked:
    shape_in, steps, scaling = _input_shape(net, input_shape), _steps(net, T), _scaling(input_scaling)
    src = fold_batchnorm(net) if bn == "fold" else net
    return _Walked(src, _walk(src, shape_in), shape_in, steps, scaling)


def _graph(net: nn.Module, w: _Walked, target: str, asked: float | None, dt: float, bn: str,
           allow_inexact_dt: bool):
    """:func:`to_nir`'s graph for ``target`` from the walk ``w`` (``asked``: the ``dt`` the caller gave,
    ``dt``: :func:`~.nir_targets.target_dt`'s); ``w`` is not changed, so one walk serves every target."""
    nir = _nir()
    own = TARGETS[target].importer_dt  # Norse's 1e-3: the file runs with from_nir(graph) as users call it
    if asked is None and own is not None and _leaks_exact(w.ops, own):
        dt = own
    # snnTorch's importer forms its leak in float64 from dt/tau, never plif's float32 k: no dt is exact there
    inexact = "allow" if not TARGETS[target].exact else "warn" if allow_inexact_dt else "refuse"
    nodes, edges, leak_exact = graph_nodes(nir, w.ops, w.shape_in, dt, inexact, bn)
    metadata = {"source": "plif", "dt": dt, "target": target,
                "bn": "folded" if bn == "fold" else "exact", "leak": "exact" if leak_exact else "inexact",
                "input_shape": np.array(w.shape_in), **w.scaling,
                "neuron_discretisation": "forward Euler with metadata dt: LIF v += (dt/tau) (r I - (v - v_leak)), "
                                         "IF v += dt r I; fire v > v_threshold (float32: the largest float below "
                                         "plif's threshold, on which > and plif's >= agree); hard reset to v_reset"}
    if isinstance(w.src, SpikingNetwork):
        metadata["spec"] = w.src.spec
    else:
        metadata["model"] = f"{type(net).__module__}.{type(net).__qualname__}"
    if w.steps is not None:
        metadata["T"] = w.steps
    graph = nir.NIRGraph(nodes=nodes, edges=edges, metadata=metadata)
    if target in ("norse", "sinabs"):  # nirtorch.load runs nodes depth first: joins of two branches wait
        from .nir_order import order_for_depth_first

        order_for_depth_first(nir, graph)
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


def as_trained(net: nn.Module) -> nn.Module:
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


VERIFY_T = 4
"""The time-steps :func:`verify_nir` runs where the file records no ``T``."""


def verify_nir(net: nn.Module, graph, samples: int = 4, seed: int = 0) -> tuple[int, int]:
    """Import ``graph`` back and run it and ``net`` as trained (eval mode, float32, BN unfolded) on
    random input (static ``[samples, *input_shape]`` repeated over T, both from the graph's
    metadata; :data:`VERIFY_T` steps where it records no T): ``(outputs that differ, outputs)``.  A
    graph whose metadata says it is exact (``bn`` and ``leak`` ``exact``) must reproduce ``net`` bit
    for bit: otherwise ``NIRExportError``."""
    return _verify_against(net, graph, samples, seed, {})


def _verify_against(net: nn.Module, graph, samples: int, seed: int, outputs: dict) -> tuple[int, int]:
    """:func:`verify_nir`, ``net``'s output on each check input kept in ``outputs`` (the files of
    :func:`export_nir_all` share their input: one forward of ``net`` for all of them)."""
    g = torch.Generator().manual_seed(seed)
    shape = tuple(int(v) for v in np.asarray(graph_meta(graph, "input_shape")).tolist())
    T = int(graph_meta(graph, "T") or VERIFY_T)
    x = repeat_over_time(torch.randn(samples, *shape, generator=g), T)
    if (shape, T, samples, seed) not in outputs:
        with torch.no_grad():
            outputs[shape, T, samples, seed] = as_trained(net)(x)
    want = outputs[shape, T, samples, seed]
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


def export_nir(net: nn.Module, path: str | Path, verify: bool = True, dt: float | None = None,
               target: str = DEFAULT_TARGET, bn: str = DEFAULT_BN, allow_inexact_dt: bool = False, *,
               input_shape=None, T: int | None = None, input_scaling=None) -> Path:
    """Convert for ``target`` and time-step ``dt`` (:func:`to_nir`, the same defaults; ``input_shape``,
    ``T`` and ``input_scaling`` as there: a module other than a notation network needs
    ``input_shape``), check the round trip against ``net`` as trained (``verify``) and write; on any
    error nothing is written.  A file asked to be inexact (``bn="fold"``, or an inexact ``dt``
    allowed) that changes outputs of the check gives an :class:`InexactExportWarning` saying how many.

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
    graph = to_nir(net, dt, target, bn, allow_inexact_dt, input_shape=input_shape, T=T, input_scaling=input_scaling)
    if verify:
        _verify(net, graph, bn)
    return write_nir(graph, path)


def _verify(net: nn.Module, graph, bn: str, outputs: dict | None = None) -> None:
    """:func:`verify_nir` (``net``'s outputs kept in ``outputs``, :func:`_verify_against`), and an
    :class:`InexactExportWarning` saying how many outputs of the check a file asked to be inexact changes."""
    differ, total = _verify_against(net, graph, 4, 0, {} if outputs is None else outputs)
    if differ:
        causes = [c for c, on in (("BN folding", bn == "fold"),
                                  ("the inexact leak", graph_meta(graph, "leak") != "exact")) if on]
        why = " and ".join(causes) or "the importer's rounding"
        T = int(graph_meta(graph, "T") or VERIFY_T)
        warnings.warn(f"{why} changes {differ} of {total} outputs of the check (random input, "
                      f"{total // T} values per step, T = {T}) from the network as trained",
                      InexactExportWarning, stacklevel=3)


def export_nir_all(net: nn.Module, path: str | Path, verify: bool = True, bn: str = DEFAULT_BN,
                   allow_inexact_dt: bool = False, *, input_shape=None, T: int | None = None,
                   input_scaling=None) -> dict[str, Path | str]:
    """One file per importer (:data:`~plif.deploy.nir_targets.TARGETS`, each at its own ``dt``),
    named after it (:func:`~plif.deploy.nir_targets.target_path`: ``model.nir`` ->
    ``model.norse.nir``, ``model.snntorch.nir``, ...): a dict from each target to the file written,
    or to why that importer cannot run the network.  Every file is converted and checked before any is written
    (each atomically); a network no importer can run is an :class:`NIRExportError`.  Notes of
    :func:`export_nir` name their target.  ``input_shape``, ``T``, ``input_scaling``: as :func:`to_nir`'s.

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
    _check_network(net)
    _check_bn(bn)
    walked = _walked(net, bn, input_shape, T, input_scaling)  # one walk, every target's graph from it
    graphs, out, outputs = {}, {}, {}
    for target in TARGETS:
        with warnings.catch_warnings(record=True) as notes:
            warnings.simplefilter("always", InexactLeakWarning)
            warnings.simplefilter("always", InexactExportWarning)
            try:
                graphs[target] = _graph(net, walked, target, None, target_dt(target), bn, allow_inexact_dt)
                if verify:
                    _verify(net, graphs[target], bn, outputs)
            except NIRExportError as e:
                graphs.pop(target, None)
                out[target] = str(e)
        for note in notes:  # re-issued outside the recording, naming the file's target
            ours = issubclass(note.category, (InexactLeakWarning, InexactExportWarning))
            warnings.warn(f"{target}: {note.message}" if ours else note.message, note.category, stacklevel=2)
    if not graphs:
        why = set(out.values())
        raise NIRExportError(why.pop() if len(why) == 1  # the network itself: one reason for every importer
                             else "no importer can run this network: " + "; ".join(out.values()))
    for target, graph in graphs.items():
        out[target] = write_nir(graph, target_path(path, target))
    return {target: out[target] for target in TARGETS}
