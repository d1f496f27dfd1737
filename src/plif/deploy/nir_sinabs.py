"""Run a plif NIR file in Sinabs (SynSense's toolchain, ``pip install sinabs``; 3.1.3 tested).

``sinabs.from_nir`` alone builds every ``LIF``/``IF`` node as a neuron plif's is not: several spikes
per step (``MultiSpike``), reset by subtraction, leak ``exp(-1/τ)`` on unscaled input (``r``
ignored), ``IF`` clamped at ``-v_threshold``; and it fails on every LIF node after a convolution:
its LIF branch tests ``if any(node.v_leak) != 0`` (the parenthesis closes early), and Python's
``any`` over a ``[C, H, W]`` array takes the truth value of ``[H, W]`` arrays ("ambiguous").  No
file can avoid it: NIR's LIF keeps every parameter in its layer's shape and has no reshape node.  Sinabs' own LIF layer *can* run plif's neuron:
``SingleSpike`` fires on ``v >= θ`` (plif's ``>=``, so ``θ`` is plif's threshold, not the file's
NIR value), ``MembraneReset`` is the hard reset and ``norm_input`` steps ``v = α v + (1 - α) I``,
plif's ``H = V + k (X - V)`` with ``α = 1 - k`` (set as the decay itself, ``train_alphas``),
equal up to float32 rounding: ``(1 - α) I + α v`` is not evaluated as ``v + k (I - v)``.
:func:`sinabs_from_nir` imports through ``sinabs.from_nir`` and then sets every neuron layer so.
"""
from __future__ import annotations

import copy

import numpy as np
import torch

from .nir_import import graph_dt, threshold_from_nir
from .nir_leak import rate_from_tau

__all__ = ["sinabs_from_nir"]


def sinabs_from_nir(graph, batch_size: int):
    """``sinabs.from_nir(graph, batch_size)`` with each neuron layer running plif's neuron.

    ``graph`` must be exported with ``--for sinabs`` (``dt = 1``: Sinabs steps in time-steps and
    ignores ``r``).  The module takes ``[B*T, ...]`` (batch-major, as Sinabs' ``Squeeze`` layers
    do) and returns ``(output, state)`` like every nirtorch graph.
    """
    try:
        import sinabs
        import sinabs.layers as sl
        from sinabs.activation import MembraneReset, SingleSpike
    except ImportError:
        raise RuntimeError("running NIR in Sinabs needs sinabs: pip install --no-deps sinabs==3.1.3 pbr") from None
    if graph_dt(graph) != 1.0:
        raise ValueError(f"Sinabs steps in time-steps (dt = 1); this graph is for dt = {graph_dt(graph):g}: "
                         f"export it --for sinabs")
    shown = copy.deepcopy(graph)
    for node in shown.nodes.values():
        if type(node).__name__ == "LIF":  # Sinabs 3.1 checks v_leak == 0 with any(), which needs 1-D
            node.v_leak = np.ravel(node.v_leak)
    module = sinabs.from_nir(shown, batch_size=batch_size)
    for name, node in graph.nodes.items():
        kind = type(node).__name__
        if kind not in ("LIF", "IF"):
            continue
        layer = module.get_submodule(name)
        if not isinstance(layer, (sl.LIFSqueeze, sl.IAFSqueeze)):
            raise ValueError(f"node {name!r}: Sinabs built {type(layer).__name__}, not a LIF/IAF layer")
        layer.spike_fn, layer.reset_fn, layer.min_v_mem = SingleSpike, MembraneReset(), None
        layer.spike_threshold.data = torch.from_numpy(threshold_from_nir(node.v_threshold))
        if kind == "LIF":  # the decay itself (train_alphas): no float32 τ gives every exp(-1/τ) = 1 - k
            layer.train_alphas, layer.norm_input, layer.alpha_syn = True, True, None  # no synaptic current
            layer.alpha_mem = torch.nn.Parameter(1 - rate_from_tau(node.tau, 1.0), requires_grad=False)
    return module
