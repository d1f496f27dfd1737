"""Firing rates, synaptic operations and an energy estimate, layer by layer.

For a layer fed by spikes every input spike triggers one accumulate (AC) per synapse it reaches:
``SynOps = sum over input spikes of their fan-out`` (a conv's fan-out is smaller at the borders,
so it is counted exactly: ``C_out * conv(spikes, ones)``).  A layer fed by real values (the
encoder conv on images) costs multiply-accumulates (MACs): once per sample when a static image
is fed (it is computed once and broadcast over T), T times for event frames.  The same network
as an ANN costs its MACs once per sample.  Only conv and linear synapses are counted (BN is
folded away; pooling and voting are a few additions per output and left out on both sides).

Energy per operation (Horowitz, "Computing's energy problem (and what we can do about it)",
ISSCC 2014, 45 nm CMOS): 32-bit float MAC 4.6 pJ, 32-bit float add (AC) 0.9 pJ.
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import asdict, dataclass, field
from typing import Iterable

import torch
import torch.nn.functional as F
from torch import nn

from ..models import SpikingNetwork
from ..layers import unwrap
from ..layers.precision import precision_autocast
from ..models.inputs import is_static, repeat_over_time
from ..monitor import FiringRateMonitor, spiking_layers
from ..models.structure import hoists_first_layer
from ..neurons import SpikingNeuron
from .bn_folding import fold_batchnorm

__all__ = ["E_MAC_PJ", "E_AC_PJ", "ENERGY_SOURCE", "LayerStats", "NetworkStats", "collect_stats",
           "conv_synops", "ann_macs", "render_stats"]

E_MAC_PJ = 4.6
E_AC_PJ = 0.9
ENERGY_SOURCE = ("M. Horowitz, 'Computing's energy problem (and what we can do about it)', ISSCC 2014, "
                 "45 nm: 32-bit float MAC 4.6 pJ, 32-bit float add (AC) 0.9 pJ")
"""Where the energy per operation (:data:`plif.deploy.stats.E_MAC_PJ`, :data:`plif.deploy.stats.E_AC_PJ`) comes from."""


@dataclass
class LayerStats:
    """Totals for one layer over all samples seen (divide by ``samples`` for per-sample values)."""

    index: int
    token: str
    kind: str
    neurons: int = 0  # spiking neurons per sample and step
    spikes: float = 0.0  # output spikes (spiking layers)
    synops: float = 0.0  # accumulates triggered by input spikes (spike-fed conv/linear)
    macs: float = 0.0  # multiply-accumulates run by the SNN (real-valued input)
    ann_macs: float = 0.0  # MACs of the same layer in an ANN (once per sample)
    spike_input: bool | None = None


@dataclass
class NetworkStats:
    """What :func:`collect_stats` counted: per-layer totals (:class:`LayerStats`) over ``samples``
    samples of ``T`` steps of the network ``spec``, and ``correct`` predictions when labels were given;
    ``precision``: a line saying which precision the network ran in (``plif stats``), empty if unsaid."""

    spec: str
    T: int
    samples: int = 0
    correct: int | None = None
    layers: list[LayerStats] = field(default_factory=list)
    precision: str = ""

    def firing_rate(self, ls: LayerStats) -> float:
        """Spikes per neuron and time-step of layer ``ls``."""
        return ls.spikes / max(1, ls.neurons * self.T * self.samples)

    def per_sample(self, value: float) -> float:
        """A total over all samples, divided by their number."""
        return value / max(1, self.samples)

    @property
    def totals(self) -> dict:
        """Per sample: SynOps, SNN and ANN MACs, energy estimates (uJ) and their ratio, accuracy."""
        syn = self.per_sample(sum(ls.synops for ls in self.layers))
        mac = self.per_sample(sum(ls.macs for ls in self.layers))
        ann = self.per_sample(sum(ls.ann_macs for ls in self.layers))
        e_snn = (mac * E_MAC_PJ + syn * E_AC_PJ) * 1e-6  # µJ
        e_ann = ann * E_MAC_PJ * 1e-6
        return {"synops": syn, "snn_macs": mac, "ann_macs": ann, "energy_snn_uJ": e_snn, "energy_ann_uJ": e_ann,
                "energy_ratio_ann_over_snn": e_ann / e_snn if e_snn else math.inf,
                "accuracy": None if self.correct is None else self.correct / max(1, self.samples)}

    def to_dict(self) -> dict:
        """Everything as JSON-ready values (``plif stats --json``): totals, per-layer rows, energy source."""
        return {"spec": self.spec, "T": self.T, "samples": self.samples, "precision": self.precision,
                "energy_per_op_pJ": {"MAC": E_MAC_PJ, "AC": E_AC_PJ, "source": ENERGY_SOURCE},
                "totals_per_sample": self.totals,
                "layers": [dict(asdict(ls), firing_rate=self.firing_rate(ls) if ls.neurons else None,
                                synops_per_sample=self.per_sample(ls.synops),
                                macs_per_sample=self.per_sample(ls.macs),
                                ann_macs_per_sample=self.per_sample(ls.ann_macs)) for ls in self.layers]}


def ann_macs(layer: nn.Module, out_shape: tuple) -> int:
    """MACs of one evaluation of ``layer`` on one sample (``out_shape`` per sample)."""
    if isinstance(layer, nn.Conv2d):
        fan_in = layer.in_channels // layer.groups * layer.kernel_size[0] * layer.kernel_size[1]
        return math.prod(out_shape) * fan_in
    if isinstance(layer, nn.Linear):
        return layer.in_features * layer.out_features
    return 0


def conv_synops(s: torch.Tensor, conv: nn.Conv2d) -> float:
    """Accumulates a conv performs for spikes ``s [N, C, H, W]``: each spike times the number of
    output positions x output channels it reaches (exact at the borders)."""
    if conv.groups != 1:
        raise ValueError("SynOps counting supports groups=1 convolutions")
    ones = torch.ones(1, conv.in_channels, *conv.kernel_size, dtype=s.dtype, device=s.device)
    with torch.autocast(s.device.type, enabled=False):  # reach counts up to C_in*k*k: exact only in fp32
        reach = F.conv2d(s.float(), ones.float(), stride=conv.stride, padding=conv.padding, dilation=conv.dilation)
    return float(reach.sum(dtype=torch.float64)) * conv.out_channels


def _is_binary(x: torch.Tensor) -> bool:
    return bool(((x == 0) | (x == 1)).all())


def _time_first(net: SpikingNetwork, x: torch.Tensor) -> torch.Tensor:
    """The network's input as its first layer sees it: frames as they are; a static image encoded
    (``net.encoder``: spikes over T), or once (``[1, B, ...]``, the hoisted first conv), or
    repeated over T, as :meth:`SpikingNetwork.forward` feeds it."""
    if not is_static(x, net.input_shape):
        return x
    if net.encoder is not None:
        return net.encoder(x)
    return x.unsqueeze(0) if hoists_first_layer(net.layers) else repeat_over_time(x, net.T)


def spike_count(x: torch.Tensor) -> float:
    """The sum of spikes ``x`` as an exact count (a bf16 sum under autocast is exact only to 256)."""
    return float(x.sum(dtype=torch.float64))


@torch.no_grad()
def _accumulate(net: SpikingNetwork, x: torch.Tensor, st: NetworkStats, amp: str | None) -> torch.Tensor:
    with precision_autocast(amp, x.device.type):
        h = _time_first(net, x)
    for layer, ls, info in zip(net.layers, st.layers, net.info):
        syn = unwrap(layer)
        if isinstance(syn, (nn.Conv2d, nn.Linear)):
            steps = h.shape[0]
            ls.ann_macs += ann_macs(syn, info.out_shape) * h.shape[1]
            ls.spike_input = _is_binary(h)
            if not ls.spike_input:
                ls.macs += ann_macs(syn, info.out_shape) * h.shape[1] * steps
            elif isinstance(syn, nn.Linear):
                ls.synops += spike_count(h) * syn.out_features
            else:
                ls.synops += conv_synops(h.flatten(0, 1), syn)
        with precision_autocast(amp, h.device.type):
            h = layer(h)
        if h.shape[0] == 1 and net.T > 1:
            h = repeat_over_time(h[0], net.T)
    return h


@torch.no_grad()
def collect_stats(net: SpikingNetwork, batches: Iterable, max_samples: int | None = None,
                  fold_bn: bool = True, progress=None, amp: str | None = None,
                  precision: str = "") -> NetworkStats:
    """Run ``net`` (eval mode) over ``batches`` and count spikes, SynOps and MACs per layer.

    ``batches`` yields ``x`` or ``(x, labels)`` with ``x [B, ...]`` (static) or ``[T, B, ...]``;
    with labels the accuracy (argmax of the mean output over T) is counted too.  Stops after
    ``max_samples`` samples.  BN is folded first so it is not counted as an operation.
    progress: a tqdm-like bar advanced by each batch's samples.  amp: ``"bf16"`` runs the layers under
    bf16 autocast (counts stay exact), None in fp32 (:func:`plif.layers.precision.run_precision`);
    precision: the line saying so, kept in the result.
    """
    net = fold_batchnorm(net) if fold_bn else net.eval()
    st = NetworkStats(net.spec, net.T, layers=[LayerStats(i, li.token, li.kind, li.neurons)
                                               for i, li in enumerate(net.info)], precision=precision)
    # the spikes of every spiking layer (the monitor refuses a network without one)
    monitor = FiringRateMonitor(net) if spiking_layers(net) else None
    with monitor or contextlib.nullcontext():
        _collect(net, batches, max_samples, progress, st, amp)
    for ls, spikes in zip((ls for ls in st.layers if isinstance(net.layers[ls.index], SpikingNeuron)),
                          monitor.spike_totals().values() if monitor else ()):
        ls.spikes = spikes
    if st.samples == 0:
        raise ValueError("no samples to collect statistics on")
    return st


def _collect(net: SpikingNetwork, batches: Iterable, max_samples: int | None, progress, st: NetworkStats,
             amp: str | None) -> None:
    for batch in batches:
        x, y = (batch if isinstance(batch, (tuple, list)) else (batch, None))
        static = is_static(x, net.input_shape)
        b = x.shape[0] if static else x.shape[1]
        if max_samples is not None:
            take = max_samples - st.samples
            if take <= 0:
                break
            if b > take:
                x = x[:take] if static else x[:, :take]
                y = None if y is None else y[:take]
                b = take
        out = _accumulate(net, x, st, amp)
        st.samples += b
        if progress is not None:
            progress.update(b)
        if y is not None:
            st.correct = (st.correct or 0) + int((out.mean(0).argmax(-1) == y).sum())


def _fmt(v: float) -> str:
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= div:
            return f"{v / div:.3g}{unit}"
    return f"{v:.3g}"


def render_stats(st: NetworkStats) -> str:
    """A per-layer table with totals, the energy estimate and its source."""
    rows = [("#", "layer", "input", "firing rate", "SynOps/sample", "SNN MACs/sample", "ANN MACs/sample")]
    for ls in st.layers:
        if not (ls.neurons or ls.ann_macs):
            continue
        kind = "" if ls.spike_input is None else ("spikes" if ls.spike_input else "real")
        rate = f"{st.firing_rate(ls):.4f}" if ls.neurons else ""
        syn = _fmt(st.per_sample(ls.synops)) if ls.ann_macs else ""
        mac = _fmt(st.per_sample(ls.macs)) if ls.ann_macs else ""
        ann = _fmt(st.per_sample(ls.ann_macs)) if ls.ann_macs else ""
        rows.append((str(ls.index), ls.token, kind, rate, syn, mac, ann))
    t = st.totals
    rows.append(("", "total", "", "", _fmt(t["synops"]), _fmt(t["snn_macs"]), _fmt(t["ann_macs"])))
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    lines = ["  ".join(f"{v:<{w}}" if c < 3 else f"{v:>{w}}" for c, (v, w) in enumerate(zip(r, widths))).rstrip()
             for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    head = f"network: {st.spec}\nT = {st.T}, samples = {st.samples}"
    if t["accuracy"] is not None:
        head += f", accuracy = {100 * t['accuracy']:.2f}%"
    if st.precision:
        head += f"\n{st.precision}"
    tail = [f"energy per sample: SNN {t['energy_snn_uJ']:.4g} µJ (MAC {E_MAC_PJ} pJ x {_fmt(t['snn_macs'])} + "
            f"AC {E_AC_PJ} pJ x {_fmt(t['synops'])}), ANN {t['energy_ann_uJ']:.4g} µJ (MAC {E_MAC_PJ} pJ x "
            f"{_fmt(t['ann_macs'])}): ANN / SNN = {t['energy_ratio_ann_over_snn']:.3g}",
            f"energy per operation: {ENERGY_SOURCE}"]
    return "\n".join([head] + lines + tail)
