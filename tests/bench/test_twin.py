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


def test_twin_builds_for_cuda_on_the_cpu():
    """SpikingJelly 2.0 has no backend argument: building the twin for a CUDA run chose one and failed
    with "'ParametricLIFNode' object has no attribute 'supported_backends'" (the H100 run of 27a092c)."""
    from spikingjelly.activation_based import neuron

    net = build_network("c4k3s1-BN-PLIF-MPk2s2-DP-FC20-LIF-APk10s10", (2, 8, 8), 2)
    sj, _ = spikingjelly_twin(net, device="cuda")
    kinds = [type(m) for m in sj if isinstance(m, neuron.BaseNode)]
    assert kinds == [neuron.ParametricLIFNode, neuron.LIFNode]
    assert all(m.step_mode == "m" for m in sj if isinstance(m, neuron.BaseNode))
    with pytest.raises(ValueError, match="runs on cpu or cuda, not 'meta'"):
        spikingjelly_twin(net, device="meta")


def test_the_tables_name_the_path_spikingjelly_runs():
    from plif.bench.spikingjelly import spikingjelly_path

    assert spikingjelly_path("cpu") == "torch-reference (automatic)"
    if not torch.cuda.is_available():
        assert spikingjelly_path("cuda") == "unknown: needs CUDA to ask"
