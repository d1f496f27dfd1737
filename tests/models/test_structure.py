"""One walk over a network's structure (plif.models.structure), used by forward, deploy and bench."""
from torch import nn

from plif.layers import PerStepBatchNorm, TimeFolded, unwrap
from plif.layers.spike_input import SpikeConv2d
from plif.models import build_network
from plif.models.structure import hoists_first_layer, spike_fed_layers, spike_inputs


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
