"""PotentialMonitor: the membrane potential of every step, from the neuron's reference loop, exactly
the one behind the spikes the network goes on with (issue 56.2: a neuron has no ``.v``)."""
import pytest
import torch
from torch import nn

from plif import IF, LIF, PLIF, build_network
from plif.layers import TimeFolded
from plif.monitor import PotentialMonitor
from plif.neurons import neuron_step


def test_golden_lif_trajectory():
    """τ = 2, input 1.5: H = 0.75 (V 0.75), H = 1.125 fires (V 0), and again."""
    net = nn.Sequential(LIF(tau=2.0))
    with PotentialMonitor(net) as mon:
        spikes = net(torch.full((4, 1, 1), 1.5, dtype=torch.float64))
    assert mon["0"][0].flatten().tolist() == [0.75, 0.0, 0.75, 0.0]
    assert spikes.flatten().tolist() == [0.0, 1.0, 0.0, 1.0]


@pytest.mark.parametrize("neuron", [PLIF(tau0=3.0, num_channels=4, v_reset=None), IF(v_threshold=0.7),
                                    LIF(tau=1.5, v_reset=-0.2, detach_reset=False)], ids=["plif-soft", "if", "lif"])
def test_the_potentials_are_the_step_functions_and_the_spikes_unchanged(neuron):
    torch.manual_seed(0)
    x = torch.randn(5, 2, 4, 3, dtype=torch.float64) * 1.5
    v0 = torch.rand(2, 4, 3, dtype=torch.float64) * 0.5
    neuron = neuron.double()
    plain, v_last = neuron(x, v0, return_state=True)
    mon = PotentialMonitor(nn.Sequential(neuron))
    with mon:
        spikes, v_mon = neuron(x, v0=v0, return_state=True)
    v, want = v0, []
    for t in range(5):
        _, v = neuron_step(x[t], v, neuron.k(x), neuron.cfg)
        want.append(v)
    torch.testing.assert_close(mon["0"][0], torch.stack(want).detach(), rtol=0, atol=0)
    assert torch.equal(spikes, plain) and torch.equal(v_mon, v_last)
    assert 0 < float(spikes.detach().mean()) < 1


def test_in_a_fused_training_network_the_output_and_gradients_stay():
    torch.manual_seed(0)
    net = build_network("c6k3s1-BN-PLIF-MPk2s2-FC20-PLIF", (1, 8, 8), T=3).double()
    with torch.no_grad():
        net.layers[0].layer.weight.mul_(4)
    x = torch.rand(4, 1, 8, 8, dtype=torch.float64) * 3
    out = net(x)
    out.sum().backward()
    grads = {n: p.grad.clone() for n, p in net.named_parameters()}
    net.zero_grad()
    with PotentialMonitor(net) as mon:
        out_mon = net(x)
        out_mon.sum().backward()
    assert torch.equal(out_mon, out)
    for n, p in net.named_parameters():
        torch.testing.assert_close(p.grad, grads[n], rtol=1e-9, atol=1e-12, msg=n)
    v = mon["2_PLIF"][0]
    assert v.shape == (3, 4, 6, 8, 8) and not v.requires_grad
    assert float(v.max()) < 1.0  # after reset, below the threshold


def test_bf16_input_keeps_an_fp32_potential():
    model = nn.Sequential(TimeFolded(nn.Linear(3, 5)), PLIF())
    with torch.autocast("cpu", dtype=torch.bfloat16), PotentialMonitor(model) as mon:
        out = model(torch.rand(4, 2, 3))
    assert out.dtype == torch.bfloat16 and mon["1"][0].dtype == torch.float32


def test_other_monitors_see_the_spikes_the_network_goes_on_with():
    """The potential's hook runs first, whenever it was opened: an OutputMonitor opened before it
    records the reference loop's spikes, the ones passed on."""
    from plif.monitor import OutputMonitor

    neuron = PLIF()
    seen = []
    neuron.register_forward_hook(lambda m, i, o: seen.append(o))
    with OutputMonitor(nn.Sequential(neuron)) as outs, PotentialMonitor(nn.Sequential(neuron)):
        out = neuron(torch.rand(3, 2, 4) * 2)
    assert outs["0"][0] is not None and seen[0] is out
    assert outs["0"][0].data_ptr() == out.data_ptr()
