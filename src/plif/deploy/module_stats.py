"""Firing rates, SynOps and the energy estimate of a network written as ``nn.Module`` code (``plif
train --model``), counted by forward hooks: the same counts as :func:`plif.deploy.stats.collect_stats`
(:mod:`plif.deploy.stats` says how each is defined) without a notation to walk.

Every ``nn.Conv2d`` and ``nn.Linear`` (inside a time wrapper or not) counts the synapses its input
reaches: SynOps where the input is spikes, MACs where it is real-valued, once per sample where every
time-step of a ``[T, B, ...]`` input is the same (a static image repeated over T: computed once and
broadcast, as a notation network's hoisted first convolution is), T times otherwise; every spiking
neuron counts its spikes.  Layers are named by their qualified module names, in the order they ran.
"""
from __future__ import annotations

from typing import Iterable

import torch
from torch import nn

from ..layers import unwrap
from ..layers.precision import precision_autocast
from ..neurons import SpikingNeuron
from .stats import LayerStats, NetworkStats, _is_binary, ann_macs, conv_synops, spike_count

__all__ = ["collect_module_stats"]


@torch.no_grad()
def collect_module_stats(model: nn.Module, batches: Iterable, T: int, spec: str, max_samples: int | None = None,
                         progress=None, amp: str | None = None, precision: str = "") -> NetworkStats:
    """Run ``model`` (eval mode) over ``batches`` of ``x [T, B, ...]`` or ``(x, labels)`` and count per
    layer as :func:`plif.deploy.stats.collect_stats` does (``amp``, ``precision`` as there); ``spec`` names
    the network in the report."""
    model.eval()
    st = NetworkStats(spec, T, precision=precision)
    rows: dict[str, LayerStats] = {}
    batch = {"b": 0}

    def row(name: str, kind: str) -> LayerStats:
        if name not in rows:
            rows[name] = LayerStats(len(rows), name, kind)
            st.layers.append(rows[name])
        return rows[name]

    def synapse_hook(name):
        def hook(m, inputs, out):
            x, b = inputs[0], batch["b"]
            if x.dim() > 2 and x.shape[:2] == (T, b) and out.shape[:2] == (T, b):  # [T, B, ...], not time-folded
                x, out = x.flatten(0, 1), out.flatten(0, 1)
            ls = row(name, "conv" if isinstance(m, nn.Conv2d) else "fc")
            per_sample = tuple(out.shape[1:])
            steps = x.shape[0] // b  # a time-folded layer sees [T*B, ...]
            ls.ann_macs += ann_macs(m, per_sample) * b
            ls.spike_input = _is_binary(x)
            if not ls.spike_input:
                same = steps > 1 and bool((x.unflatten(0, (steps, b)) == x[:b].unsqueeze(0)).all())
                ls.macs += ann_macs(m, per_sample) * b * (1 if same else steps)
            elif isinstance(m, nn.Linear):
                ls.synops += spike_count(x) * m.out_features
            else:
                ls.synops += conv_synops(x, m)
        return hook

    def neuron_hook(name):
        def hook(m, inputs, out):
            ls = row(name, "neuron")
            ls.neurons = out[0, 0].numel()
            ls.spikes += spike_count(out)
        return hook

    handles, wrapped = [], {}
    for name, m in model.named_modules():  # a time wrapper's layer is shown by the wrapper's name
        if isinstance(unwrap(m), (nn.Conv2d, nn.Linear)) and unwrap(m) is not m:
            wrapped[id(unwrap(m))] = name
    for name, m in model.named_modules():
        name = wrapped.get(id(m), name)
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            handles.append(m.register_forward_hook(synapse_hook(name)))
        elif isinstance(m, SpikingNeuron):
            handles.append(m.register_forward_hook(neuron_hook(name)))
    try:
        for item in batches:
            x, y = item if isinstance(item, (tuple, list)) else (item, None)
            b = x.shape[1]
            if max_samples is not None:
                take = max_samples - st.samples
                if take <= 0:
                    break
                if b > take:
                    x, y, b = x[:, :take], None if y is None else y[:take], take
            batch["b"] = b
            with precision_autocast(amp, x.device.type):
                out = model(x)
            st.samples += b
            if progress is not None:
                progress.update(b)
            if y is not None:
                st.correct = (st.correct or 0) + int((out.mean(0).argmax(-1) == y).sum())
    finally:
        for h in handles:
            h.remove()
    if st.samples == 0:
        raise ValueError("no samples to collect statistics on")
    return st
