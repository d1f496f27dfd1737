"""Fully connected PLIF networks on a 1-d input (SHD / SSC's 700 channels): the notation takes an
input of shape (N,) and a BN after an FC, a BatchNorm1d over the [T*B, F] features of every step."""
import pytest
import torch
from torch import nn

from plif.catalog import DATASETS
from plif.models import build_network, build_zoo


def test_fc_bn_plif_on_a_one_dimensional_input():
    net = build_network("FC256-BN-PLIF-FC256-BN-PLIF-FC20-PLIF", (700,), T=5)
    assert [i.out_shape for i in net.info] == [(256,), (256,), (256,), (256,), (256,), (256,), (20,), (20,)]
    assert [type(getattr(m, "layer", m)).__name__ for m in net.layers] == [
        "Linear", "BatchNorm1d", "PLIF", "Linear", "BatchNorm1d", "PLIF", "Linear", "PLIF"]
    x = (torch.rand(5, 3, 700) < 0.05).float()  # frames [T, B, 700] of spike counts
    out = net(x)
    assert out.shape == (5, 3, 20)
    out.sum().backward()
    assert all(p.grad is not None for p in net.parameters())


def test_the_bn_after_an_fc_normalises_the_features_over_time_and_batch_together():
    """Training mode: the BN's batch statistics are those of the [T*B, F] features of the FC before it."""
    torch.manual_seed(0)
    net = build_network("FC6-BN-PLIF", (10,), T=4)
    x = torch.rand(4, 3, 10)
    fc, bn = net.layers[0].layer, net.layers[1].layer
    ref = nn.BatchNorm1d(6)
    ref.load_state_dict(bn.state_dict())
    want = ref(fc(x.reshape(12, 10))).reshape(4, 3, 6)
    seen = {}
    net.layers[1].register_forward_hook(lambda m, i, o: seen.setdefault("bn", o))
    net(x)
    torch.testing.assert_close(seen["bn"], want, rtol=0, atol=1e-6)
    torch.testing.assert_close(bn.running_mean, ref.running_mean, rtol=0, atol=0)


@pytest.mark.parametrize("name", [n for n, d in DATASETS.items() if len(d.input_shape) == 1])
def test_the_zoo_builds_the_audio_networks_on_their_700_channels(name):
    net = build_zoo(name, T=3)
    d = DATASETS[name]
    assert net.input_shape == (700,) and net.info[-1].out_shape == (d.num_classes,) and net.T == 3
    assert net.spec == "FC256-BN-PLIF-DP0.4-FC256-BN-PLIF-DP0.4-FC%d-PLIF" % d.num_classes
    with torch.no_grad():
        assert net.eval()(torch.zeros(3, 2, 700)).shape == (3, 2, d.num_classes)
