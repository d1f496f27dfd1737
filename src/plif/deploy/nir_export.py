"""Export a network to NIR (Neuromorphic Intermediate Representation, ``pip install nir``).

NIR describes neurons in continuous time; the paper's neuron is its forward-Euler step with
``dt = 1`` (one time-step):

    NIR LIF:   τ dv/dt = (v_leak - v) + r I      Euler, dt = 1:  v += (1/τ) (r I - (v - v_leak))
    paper:     H_t = V_{t-1} + k (X_t - (V_{t-1} - V_reset)),  k = 1/τ

so a PLIF/LIF layer maps to ``nir.LIF(tau = 1/k, r = 1, v_leak = V_reset, v_threshold = V_th,
v_reset = V_reset)`` with the *learned* ``k = sigmoid(w)`` (τ stored in float64 as ``1/k`` so
that ``1/τ`` rounds back to the same float32 ``k``), and IF maps to ``nir.IF(r = 1, ...)``
(``dv/dt = r I``, Euler: ``v += I``).  Parameters are arrays over the layer's neurons
(per-channel τ is broadcast).  Graph metadata records ``dt = 1``, ``T`` and the spec.

Other layers: BN is folded into the conv/linear before it (conv -> ``nir.Conv2d`` with bias,
linear -> ``nir.Linear``, or ``nir.Affine`` when it gained a bias); flatten -> ``nir.Flatten``
(``start_dim = 0``: NIR shapes have no batch dimension); average pooling -> ``nir.AvgPool2d``;
dropout is the identity at inference and is left out.  NIR (1.0.x) has **no max-pooling node**:
a max-pool over spikes equals their OR, exported exactly as ``nir.SumPool2d`` followed by
``nir.Threshold(0.5)`` (max pooling of non-spike values is refused).  The voting layer (mean of
each group of ``g`` output neurons) is a fixed ``nir.Linear`` with weights ``1/g``.

Not representable, refused with an error naming the layer: soft reset, BN that does not follow a
conv/linear.  Spikes fire on ``H >= V_th`` in this project and on ``v > v_threshold`` in NIR's
text; the two differ only when the potential lands exactly on the threshold.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

from ..layers import TimeFolded, TimeInvariantDropout, Voting
from ..models import SpikingNetwork
from ..neurons import SpikingNeuron
from .bn_folding import fold_batchnorm, inner, is_batchnorm
from ..atomic import atomic_path
from .spike_inference import keeps_binary

__all__ = ["to_nir", "write_nir", "verify_nir", "export_nir", "NIRExportError"]


class NIRExportError(ValueError):
    """A layer that NIR cannot represent faithfully."""


def _nir():
    try:
        import nir
    except ImportError:
        raise RuntimeError("NIR export needs the 'nir' package: pip install nir") from None
    return nir


def _np(t: torch.Tensor, dtype=None) -> np.ndarray:
    a = t.detach().cpu().numpy()
    return a.astype(dtype) if dtype is not None else a.copy()


def _neuron_node(nir, layer: SpikingNeuron, shape: tuple, where: str):
    cfg = layer.cfg
    if not cfg.hard_reset:
        raise NIRExportError(f"{where}: soft reset (subtract V_th) has no NIR neuron; only hard reset exports")
    full = lambda v: np.full(shape, v, dtype=np.float32)  # noqa: E731
    if not cfg.leak:
        return nir.IF(r=full(1.0), v_threshold=full(cfg.v_threshold), v_reset=full(cfg.v_reset))
    probe = torch.zeros((1, 1) + tuple(shape))
    k = layer.k(probe).detach().to(torch.float32).cpu()
    tau = 1.0 / np.broadcast_to(k.numpy().astype(np.float64), shape)
    return nir.LIF(tau=np.ascontiguousarray(tau), r=full(1.0), v_leak=full(cfg.v_reset),
                   v_threshold=full(cfg.v_threshold), v_reset=full(cfg.v_reset))


def _pair(v) -> np.ndarray:
    return np.array(v if isinstance(v, (tuple, list)) else (v, v), dtype=np.int64)


def to_nir(net: SpikingNetwork):
    """The ``nir.NIRGraph`` of ``net`` (BN folded, eval mode): a chain ``input -> ... -> output``.

    Node names are ``<layer index>_<kind>``; the input node has the per-sample input shape and
    receives one frame per time-step (a static image is repeated ``T`` times).
    """
    nir = _nir()
    folded = fold_batchnorm(net)
    nodes = {"input": nir.Input(input_type={"input": np.array(folded.input_shape)})}
    shape, binary = tuple(folded.input_shape), False
    for i, (layer, info) in enumerate(zip(folded.layers, folded.info)):
        m = inner(layer)
        where = f"layer {i} ({info.token})"
        if is_batchnorm(layer):
            raise NIRExportError(f"{where}: a BatchNorm that does not follow a conv/linear cannot be folded")
        if isinstance(layer, TimeInvariantDropout):
            continue
        if isinstance(m, nn.Conv2d):
            bias = m.bias if m.bias is not None else torch.zeros(m.out_channels)
            if isinstance(m.padding, str):
                raise NIRExportError(f"{where}: string padding {m.padding!r} is not exported")
            nodes[f"{i}_conv"] = nir.Conv2d(input_shape=np.array(shape[1:]), weight=_np(m.weight),
                                            stride=_pair(m.stride), padding=_pair(m.padding),
                                            dilation=_pair(m.dilation), groups=m.groups, bias=_np(bias))
        elif isinstance(m, nn.Linear):
            nodes[f"{i}_linear"] = (nir.Linear(weight=_np(m.weight)) if m.bias is None
                                    else nir.Affine(weight=_np(m.weight), bias=_np(m.bias)))
        elif isinstance(m, nn.Flatten):
            nodes[f"{i}_flatten"] = nir.Flatten(input_type={"input": np.array(shape)}, start_dim=0, end_dim=-1)
        elif isinstance(m, nn.AvgPool2d):
            nodes[f"{i}_avgpool"] = nir.AvgPool2d(kernel_size=_pair(m.kernel_size), stride=_pair(m.stride),
                                                  padding=_pair(m.padding))
        elif isinstance(m, nn.MaxPool2d):
            if not binary:
                raise NIRExportError(f"{where}: NIR has no max-pooling node; max pooling is exported as "
                                     f"OR of spikes (SumPool2d + Threshold) only when its input is spikes")
            if m.dilation not in (1, (1, 1)) or m.ceil_mode:
                raise NIRExportError(f"{where}: only dilation=1, ceil_mode=False max pooling exports")
            nodes[f"{i}_maxpool_sum"] = nir.SumPool2d(kernel_size=_pair(m.kernel_size), stride=_pair(m.stride),
                                                      padding=_pair(m.padding))
            nodes[f"{i}_maxpool_or"] = nir.Threshold(threshold=np.full(info.out_shape, 0.5, dtype=np.float32))
        elif isinstance(m, Voting):
            g, n = m.group, shape[0]
            w = np.kron(np.eye(n // g, dtype=np.float32), np.full((1, g), 1.0 / g, dtype=np.float32))
            nodes[f"{i}_voting"] = nir.Linear(weight=w)
        elif isinstance(m, SpikingNeuron):
            nodes[f"{i}_{type(m).__name__.lower()}"] = _neuron_node(nir, m, info.out_shape, where)
        else:
            raise NIRExportError(f"{where}: no NIR mapping for {type(m).__name__}")
        binary = isinstance(layer, SpikingNeuron) or (binary and keeps_binary(layer))
        shape = tuple(info.out_shape)
    nodes["output"] = nir.Output(output_type={"output": np.array(shape)})
    names = list(nodes)
    metadata = {"source": "plif", "spec": folded.spec, "T": int(folded.T), "dt": 1.0,
                "input_shape": np.array(folded.input_shape),
                "neuron_discretisation": "forward Euler, dt=1: v += (dt/tau) (r I - (v - v_leak)); "
                                         "fire v >= v_threshold; hard reset to v_reset"}
    return nir.NIRGraph(nodes=nodes, edges=list(zip(names[:-1], names[1:])), metadata=metadata)


def write_nir(graph, path: str | Path) -> Path:
    """Write ``graph`` to ``path`` atomically (a temporary file beside it, then ``os.replace``)."""
    nir = _nir()
    with atomic_path(path) as tmp:
        nir.write(tmp, graph)
    return Path(path)


@torch.no_grad()
def verify_nir(net: SpikingNetwork, graph, samples: int = 4, seed: int = 0) -> None:
    """Import ``graph`` back and check it fires exactly like the BN-folded ``net`` on random
    input (static ``[B, *input_shape]`` repeated over T); raise ``NIRExportError`` otherwise."""
    from .nir_import import from_nir

    g = torch.Generator().manual_seed(seed)
    x = torch.randn(samples, *net.input_shape, generator=g)
    x = x.unsqueeze(0).expand(net.T, *x.shape)
    want = fold_batchnorm(net).float()(x)
    got = from_nir(graph)(x)
    # Outputs are spikes, or voting averages of spikes (multiples of 1/g): one differing spike moves
    # a value by at least 1/g, so this tolerance only absorbs the order of the voting sum.
    if want.shape != got.shape or not torch.allclose(want, got, rtol=0.0, atol=1e-5):
        diff = ("shape " + str(tuple(got.shape)) if want.shape != got.shape
                else f"{int(((want - got).abs() > 1e-5).sum())} outputs differ")
        raise NIRExportError(f"re-imported NIR graph does not reproduce the network ({diff})")


def export_nir(net: SpikingNetwork, path: str | Path, verify: bool = True) -> Path:
    """Convert, check the round trip (``verify``) and write; on any error nothing is written."""
    graph = to_nir(net)
    if verify:
        verify_nir(net, graph)
    return write_nir(graph, path)
