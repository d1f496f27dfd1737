"""One walk over a network's structure (plif.models.structure), used by forward, deploy and bench."""
import pytest
import torch
from torch import nn

from plif.layers import PerStepBatchNorm, TimeFolded, unwrap
from plif.layers.spike_input import SpikeConv2d
from plif.models import build_network
from plif.catalog import DATASETS
from plif.models.structure import hoists_first_layer, spec_as_built, spike_fed_layers, spike_inputs


def test_spike_inputs_follow_the_spikes():
    net = build_network("c4k3s1-BN-PLIF-MPk2s2-DP-FC20-PLIF-DP-FC20-PLIF-APk10s10", (2, 8, 8), 2)
    tokens = [i.token for i in net.info]
    fed = [tokens[i] for i in spike_fed_layers(net)]
    # after each PLIF: the pool, dropout, flatten (if any) and the next FC / voting pool see spikes
    assert fed[0] == "MPk2s2" and fed.count("FC20") == 2 and fed[-1].startswith("AP")
    assert not spike_inputs(net.layers)[0] and "c4k3s1" not in fed and "BN" not in fed


def test_first_layer_hoisting_and_unwrapping():
    conv, bn = nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2)
    assert unwrap(TimeFolded(conv)) is conv and unwrap(conv) is conv and unwrap(SpikeConv2d(conv)) is conv
    assert unwrap(PerStepBatchNorm(bn)) is bn  # one unwrap for every time wrapper (issue 33)
    assert hoists_first_layer([TimeFolded(conv)]) and not hoists_first_layer([TimeFolded(nn.Flatten())])
    assert not hoists_first_layer([])


def test_in_training_dropout_ends_the_spikes_it_scales():
    """The training walk (the memory plan's): dropout keeps 1/(1-p) times the spikes, not spikes."""
    net = build_network("c4k3s1-BN-PLIF-MPk2s2-DP-FC20-PLIF-FC10-PLIF", (2, 8, 8), 2)
    tokens = [i.token for i in net.info]
    evaluated, trained = spike_inputs(net.layers), spike_inputs(net.layers, training=True)
    differ = [tokens[i] for i, (e, t) in enumerate(zip(evaluated, trained)) if e != t]
    assert differ == ["flatten", "FC20"]  # after DP: spikes in eval, scaled spikes in training
    assert trained[tokens.index("DP")] and trained[tokens.index("FC10")]


@pytest.mark.parametrize("neuron,pool", [("LIF", "avg"), ("IF", "max"), (None, None)])
@pytest.mark.parametrize("entry", list(DATASETS))
def test_the_string_as_built_builds_the_same_layers(entry, neuron, pool):
    """Issue 32: plif ablate with LIF logged a network string that still said PLIF."""
    e = DATASETS[entry]
    shown = spec_as_built(e.network, e.input_shape, neuron, pool)
    with torch.device("meta"):
        want = build_network(e.network, e.input_shape, 2, neuron=neuron, pool=pool)
        got = build_network(shown, e.input_shape, 2)
    assert [i.token for i in got.info] == [i.token for i in want.info]
    assert ("{" in shown) == ("{" in e.network) and (neuron is None) == (shown == e.network)


def test_a_token_built_two_ways_is_written_out():
    shown = spec_as_built("{APk2s2-FC20}*2", (1, 8, 8), pool="max")  # spatial pooling, then voting
    assert shown == "MPk2s2-FC20-APk2s2-FC20"
