"""Firing rates, synaptic operations and an energy estimate, layer by layer, of any network plif runs.

For a layer fed by spikes every input spike triggers one accumulate (AC) per synapse it reaches:
``SynOps = sum over input spikes of their fan-out`` (a conv's fan-out is smaller at the borders,
so it is counted exactly: ``C_out / groups * conv(spikes, ones)``).  A layer fed by real values (the
encoder conv on images) costs multiply-accumulates (MACs): once per sample when a static image
is fed (it is computed once and broadcast over T), T times for event frames.  The same network
as an ANN costs its MACs once per sample.  Only convolutions, linear layers and Spikformer's attention
products are counted (BN is folded away; pooling, voting, shortcuts and scales are a few additions per
output and left out on both sides).  The counting rules: :mod:`plif.deploy.op_counts`; the hooks that
apply them while the network runs, on any ``nn.Module``: :mod:`plif.deploy.op_counter`.  Layers are
named by their qualified module names (:mod:`plif.models.names`), in the order they first ran.

Energy per operation (Horowitz, "Computing's energy problem (and what we can do about it)",
ISSCC 2014, 45 nm CMOS): 32-bit float MAC 4.6 pJ, 32-bit float add (AC) 0.9 pJ.
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import asdict, dataclass, field
from typing import Iterable

import torch
from torch import nn

from ..layers.precision import precision_autocast
from ..models.inputs import is_static
from ..models.names import neurons
from ..monitor import FiringRateMonitor
from .bn_folding import fold_keeping_names
from .op_counter import OpCounter, read
from .op_counts import ann_macs

__all__ = ["E_MAC_PJ", "E_AC_PJ", "ENERGY_SOURCE", "LayerStats", "NetworkStats", "collect_stats", "ann_macs",
           "render_stats"]

E_MAC_PJ = 4.6
E_AC_PJ = 0.9
ENERGY_SOURCE = ("M. Horowitz, 'Computing's energy problem (and what we can do about it)', ISSCC 2014, "
                 "45 nm: 32-bit float MAC 4.6 pJ, 32-bit float add (AC) 0.9 pJ")
"""Where the energy per operation (:data:`plif.deploy.stats.E_MAC_PJ`, :data:`plif.deploy.stats.E_AC_PJ`) comes from."""


@dataclass
class LayerStats:
    """Totals for one layer over all samples seen (divide by ``samples`` for per-sample values); ``name``:
    its qualified module name, ``kind``: ``conv``, ``fc``, ``attention`` or the neuron's class."""

    index: int
    name: str
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


def _time_steps(model: nn.Module, T: int | None) -> int:
    T = getattr(model, "T", None) if T is None else T
    if isinstance(T, bool) or not isinstance(T, int) or T < 1:
        raise ValueError(f"collect_stats: T must be the network's time-steps (a positive integer), got {T!r}")
    return T


@torch.no_grad()
def collect_stats(model: nn.Module, batches: Iterable, max_samples: int | None = None, fold_bn: bool = True,
                  progress=None, amp: str | None = None, precision: str = "", *, T: int | None = None,
                  spec: str | None = None) -> NetworkStats:
    """Run ``model`` (eval mode) over ``batches`` and count spikes, SynOps and MACs per layer, for any
    ``nn.Module`` (a network of the paper's notation, the zoo's, one written by hand), by forward hooks:
    the counts stay on the device until the end (one host read, not one a layer).

    ``batches`` yields ``x`` or ``(x, labels)``: frames ``[T, B, ...]``, or a static ``[B, ...]`` for a
    network that takes one (its ``input_shape``); with labels the accuracy (argmax of the mean output
    over T) is counted too.  Stops after ``max_samples`` samples.  BN is folded first (the names kept:
    :func:`plif.deploy.bn_folding.fold_keeping_names`), so it is not counted as an operation.
    progress: a tqdm-like bar advanced by each batch's samples.  amp: ``"bf16"`` runs the layers under
    bf16 autocast (counts stay exact), None in fp32 (:func:`plif.layers.precision.run_precision`);
    precision: the line saying so, kept in the result.  T: the network's time-steps (default
    ``model.T``); spec: what the report calls the network (default ``model.spec``, else its class).
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"collect_stats takes an nn.Module, got {type(model).__name__}")
    T = _time_steps(model, T)
    spec = spec or getattr(model, "spec", None) or type(model).__name__
    net = fold_keeping_names(model) if fold_bn else model.eval()
    spiking = neurons(net)
    st = NetworkStats(spec, T, precision=precision)
    monitor = FiringRateMonitor(net) if spiking else None  # the spikes of every neuron
    counter = OpCounter(net, spiking)
    with counter, monitor or contextlib.nullcontext():
        correct = _collect(net, batches, max_samples, progress, st, amp, counter)
    ran = {name: t for name, t in (monitor.spikes.items() if monitor else ()) if t is not None}
    pending = counter.pending()
    values = read(pending + list(ran.values()) + ([] if correct is None else [correct]))  # the one host read
    spikes = dict(zip(ran, values[len(pending):]))
    if correct is not None:
        st.correct = int(values[-1])
    rows = {r.name: r for r in counter.rows(values[:len(pending)])}
    for i, name in enumerate(sorted(counter.order, key=counter.order.get)):
        if name in rows:
            r = rows[name]
            st.layers.append(LayerStats(i, name, r.kind, synops=r.synops, macs=r.macs, ann_macs=r.ann_macs,
                                        spike_input=r.spike_input))
        else:
            st.layers.append(LayerStats(i, name, type(spiking[name]).__name__, counter.sizes[name], spikes.get(name, 0.0)))
    if st.samples == 0:
        raise ValueError("no samples to collect statistics on")
    return st


def _collect(net: nn.Module, batches: Iterable, max_samples: int | None, progress, st: NetworkStats,
             amp: str | None, counter: OpCounter) -> torch.Tensor | None:
    """Run the batches; the correct predictions as a device tensor (None without labels)."""
    input_shape, correct = getattr(net, "input_shape", None), None
    for batch in batches:
        x, y = (batch if isinstance(batch, (tuple, list)) else (batch, None))
        static = input_shape is not None and is_static(x, input_shape)
        b = x.shape[0] if static else x.shape[1]
        if max_samples is not None:
            take = max_samples - st.samples
            if take <= 0:
                break
            if b > take:
                x = x[:take] if static else x[:, :take]
                y = None if y is None else y[:take]
                b = take
        counter.steps = st.T if static else x.shape[0]
        with precision_autocast(amp, x.device.type):
            out = net(x)
        st.samples += b
        if progress is not None:
            progress.update(b)
        if y is not None:
            hits = (out.mean(0).argmax(-1) == y.to(out.device)).sum()
            correct = hits if correct is None else correct + hits
    return correct


def _fmt(v: float) -> str:
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= div:
            return f"{v / div:.3g}{unit}"
    return f"{v:.3g}"


def render_stats(st: NetworkStats) -> str:
    """A per-layer table with totals, the energy estimate and its source."""
    rows = [("#", "layer", "kind", "input", "firing rate", "SynOps/sample", "SNN MACs/sample", "ANN MACs/sample")]
    for ls in st.layers:
        if not (ls.neurons or ls.ann_macs):
            continue
        kind = "" if ls.spike_input is None else ("spikes" if ls.spike_input else "real")
        rate = f"{st.firing_rate(ls):.4f}" if ls.neurons else ""
        syn = _fmt(st.per_sample(ls.synops)) if ls.ann_macs else ""
        mac = _fmt(st.per_sample(ls.macs)) if ls.ann_macs else ""
        ann = _fmt(st.per_sample(ls.ann_macs)) if ls.ann_macs else ""
        rows.append((str(ls.index), ls.name, ls.kind, kind, rate, syn, mac, ann))
    t = st.totals
    rows.append(("", "total", "", "", "", _fmt(t["synops"]), _fmt(t["snn_macs"]), _fmt(t["ann_macs"])))
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    lines = ["  ".join(f"{v:<{w}}" if c < 4 else f"{v:>{w}}" for c, (v, w) in enumerate(zip(r, widths))).rstrip()
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
