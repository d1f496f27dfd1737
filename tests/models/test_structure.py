"""One walk over a network's structure (plif.models.structure), used by forward, deploy and bench."""
from torch import nn

from plif.layers import TimeFolded
from plif.models import build_network
from plif.models.structure import hoists_first_layer, inner, spike_fed_layers, spike_inputs


def test_spike_inputs_follow_the_spikes():
    net = build_network("c4k3s1-BN-PLIF-MPk2s2-DP-FC20-PLIF-DP-FC20-PLIF-APk10s10", (2, 8, 8), 2)
    tokens = [i.token for i in net.info]
    fed = [tokens[i] for i in spike_fed_layers(net)]
    # after each PLIF: the pool, dropout, flatten (if any) and the next FC / voting pool see spikes
    assert fed[0] == "MPk2s2" and fed.count("FC20") == 2 and fed[-1].startswith("AP")
    assert not spike_inputs(net.layers)[0] and "c4k3s1" not in fed and "BN" not in fed


def test_first_layer_hoisting_and_unwrapping():
    conv = nn.Conv2d(1, 2, 3)
    assert inner(TimeFolded(conv)) is conv and inner(conv) is conv
    assert hoists_first_layer([TimeFolded(conv)]) and not hoists_first_layer([TimeFolded(nn.Flatten())])
    assert not hoists_first_layer([])
