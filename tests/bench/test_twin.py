"""The SpikingJelly twin is the plif network: with the same weights it gives the same output."""
import pytest
import torch

from plif.bench.spikingjelly import spikingjelly_unavailable
from plif.bench.twin import spikingjelly_twin
from plif.models import build_network

pytestmark = pytest.mark.skipif(spikingjelly_unavailable() is not None,
                                reason=f"SpikingJelly: {spikingjelly_unavailable()}")


def test_twin_with_the_same_weights_gives_the_same_output():
    torch.manual_seed(0)
    net = build_network("c4k3s1-BN-PLIF-MPk2s2-DP-FC20-LIF-DP-FC20-PLIF-APk10s10", (2, 8, 8), 3,
                        v_threshold=0.3).eval()
    with torch.no_grad():  # strong enough weights that the last layer spikes
        for p in net.parameters():
            if p.dim() > 1:
                p.mul_(4)
    sj, reset = spikingjelly_twin(net)
    sj.eval()
    ours = [p for p in net.parameters()]
    theirs = [p for p in sj.parameters()]
    assert [tuple(p.shape) for p in ours] == [tuple(p.shape) for p in theirs]
    with torch.no_grad():
        for a, b in zip(ours, theirs):
            b.copy_(a)
    x = torch.rand(3, 2, 2, 8, 8) * 2
    with torch.no_grad():
        out, twin = net(x), sj(x)
    reset(sj)
    assert out.abs().sum() > 0
    torch.testing.assert_close(twin, out)
