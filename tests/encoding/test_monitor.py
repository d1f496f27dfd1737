"""plif.monitor.FiringRateMonitor: per-layer rates through hooks, for a SpikingNetwork and any model
holding plif neurons, and the fused block runs again once it is closed (issue 45.9)."""
import math

import pytest
import torch
from torch import nn

from plif import PLIF, build_network
from plif.layers import TimeFolded
from plif.monitor import FiringRateMonitor, spiking_layers
from plif.neurons import SpikingNeuron


def _active(net):
    """Weights scaled up so that every layer of an untrained network in eval mode fires."""
    with torch.no_grad():
        for name, p in net.named_parameters():
            if name.endswith("layer.weight") and p.dim() > 1:
                p.mul_(6)
    return net


def _reference_rates(net, batches):
    """Spikes / values of each spiking layer, the layers run one by one by hand."""
    spikes, counts = {}, {}
    for x in batches:
        h = x.unsqueeze(0).expand(net.T, *x.shape)
        for i, layer in enumerate(net.layers):
            h = layer(h)
            if isinstance(layer, SpikingNeuron):
                key = f"layers.{i}"
                spikes[key] = spikes.get(key, 0.0) + float(h.sum())
                counts[key] = counts.get(key, 0) + h.numel()
    return {k: spikes[k] / counts[k] for k in spikes}


def test_rates_over_several_batches_equal_the_layers_run_by_hand():
    torch.manual_seed(0)
    net = _active(build_network("c6k3s1-BN-PLIF-MPk2s2-FC20-PLIF-APk2s2", (1, 8, 8), T=3).eval())
    batches = [torch.rand(4, 1, 8, 8) * 3, torch.rand(2, 1, 8, 8) * 3]
    with torch.no_grad(), FiringRateMonitor(net) as mon:
        for x in batches:
            net(x)
    with torch.no_grad():
        want = _reference_rates(net, batches)
    assert list(mon.rates()) == list(want) == ["layers.2", "layers.6"]
    assert mon.rates() == pytest.approx(want, abs=0, rel=1e-12)
    assert all(0 < r < 1 for r in want.values())
    assert mon.spike_totals()["layers.6"] == pytest.approx(want["layers.6"] * 3 * 6 * 20)


def test_any_model_holding_plif_neurons_is_named_by_module_path():
    model = nn.Sequential(TimeFolded(nn.Linear(5, 7)), PLIF(), nn.Sequential(TimeFolded(nn.Linear(7, 3)), PLIF()))
    assert list(spiking_layers(model)) == ["1", "2.1"]
    x = torch.rand(4, 2, 5) * 4
    with FiringRateMonitor(model) as mon:
        out = model(x)
    assert mon.rates()["2.1"] == pytest.approx(float(out.detach().mean()))
    # closed: nothing more is counted, and a layer that never ran is NaN
    model(x)
    assert mon.counts["2.1"] == out.numel()
    unused = FiringRateMonitor(model)
    assert all(math.isnan(r) for r in unused.rates().values())


def test_hooks_come_off_so_the_fused_block_runs_again():
    from plif.layers.fused_block import fusable_now

    net = build_network("c4k3s1-BN-PLIF-MPk2s2-FC10-PLIF", (1, 8, 8), T=2)  # training mode: fusable
    block, bn = list(net.layers[:4]), net.layers[1].layer
    assert fusable_now(block, bn)
    with FiringRateMonitor(net):
        assert not fusable_now(block, bn)  # a hook sees the composed layers: measure in eval passes only
    assert fusable_now(block, bn)
    mon = FiringRateMonitor(net)
    with mon, pytest.raises(RuntimeError, match="already open"):
        mon.__enter__()
    assert fusable_now(block, bn)


def test_all_reduce_sums_both_counts_and_reset_forgets():
    net = build_network("FC10-PLIF", (4,), T=2)
    with FiringRateMonitor(net, all_reduce=lambda t: t * 2) as mon:  # two processes that saw the same
        out = net(torch.rand(3, 4) * 5)
    assert mon.rates()["layers.1"] == pytest.approx(float(out.detach().mean()))
    mon.reset()
    assert math.isnan(mon.rates()["layers.1"])


def test_stats_counts_what_an_encoded_network_feeds():
    """plif stats on a network with an encoder: its first conv gets spikes, its rates are the monitor's."""
    from plif.deploy import collect_stats
    from plif.deploy.bn_folding import fold_batchnorm

    torch.manual_seed(1)
    net = _active(build_network("c6k3s1-BN-PLIF-MPk2s2-FC20-PLIF-APk2s2", (1, 8, 8), T=4, encoder="latency").eval())
    assert fold_batchnorm(net).encoder is net.encoder
    x = torch.rand(5, 1, 8, 8)
    st = collect_stats(net, [x])
    first = st.layers[0]
    assert first.spike_input is True and first.macs == 0 and first.synops > 0
    with torch.no_grad(), FiringRateMonitor(net) as mon:
        net(x)
    rates = [st.firing_rate(ls) for ls in st.layers if ls.neurons]  # of the BN-folded layers: other indices
    assert rates == pytest.approx(list(mon.rates().values()), abs=1e-6) and all(0 < r < 1 for r in rates)
