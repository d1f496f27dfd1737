"""OutputMonitor, InputMonitor and GradOutputMonitor record what each layer saw, by name, for a
SpikingNetwork (fused in training) and any model holding plif neurons (issue 56.2)."""
import torch
from torch import nn

from plif import PLIF, build_network
from plif.layers import TimeFolded
from plif.monitor import GradOutputMonitor, InputMonitor, OutputMonitor
from plif.neurons import SpikingNeuron


def _active(net):
    with torch.no_grad():
        for name, p in net.named_parameters():
            if name.endswith("layer.weight") and p.dim() > 1:
                p.mul_(6)
    return net


def _by_hand(net, x):
    """Each neuron's input and output, the layers run one by one, the outputs kept for their gradients."""
    h, seen = x.unsqueeze(0).expand(net.T, *x.shape), {}
    for i, layer in enumerate(net.layers):
        x_in, h = h, layer(h)
        if isinstance(layer, SpikingNeuron):
            h.retain_grad()
            seen[f"{i}_{net.info[i].token}"] = (x_in, h)
    return h, seen


def test_a_fused_training_network_records_its_neurons_as_run_by_hand():
    torch.manual_seed(0)
    net = _active(build_network("c6k3s1-BN-PLIF-MPk2s2-FC20-PLIF", (1, 8, 8), T=3)).double()
    x = torch.rand(4, 1, 8, 8, dtype=torch.float64) * 3
    with OutputMonitor(net) as outs, InputMonitor(net) as ins, GradOutputMonitor(net) as grads:
        out = net(x)
        out.sum().backward()
    want_out, seen = _by_hand(net, x)
    want_out.sum().backward()
    assert outs.names == ins.names == grads.names == ["layers.2", "layers.6"]
    for name, (x_in, spikes) in seen.items():
        assert len(outs[name]) == len(ins[name]) == len(grads[name]) == 1
        torch.testing.assert_close(outs[name][0], spikes.detach(), rtol=0, atol=0)
        torch.testing.assert_close(ins[name][0], x_in.detach(), rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(grads[name][0], spikes.grad, rtol=1e-12, atol=1e-12)
        assert not outs[name][0].requires_grad
    assert 0 < float(outs["layers.2"][0].mean()) < 1 and outs["2_PLIF"] is outs["layers.2"]  # an old name reads


def test_any_module_by_its_qualified_name_and_a_static_inputs_first_layer_over_time():
    """A hook on the first conv of a static input sees it run on [T, B, ...] (it ran once on [B, ...],
    hoisted, and the hook saw nothing, before)."""
    net = build_network("c4k3s1-BN-PLIF-MPk2s2-FC10-PLIF", (1, 8, 8), T=4)
    x = torch.rand(3, 1, 8, 8)
    with OutputMonitor(net, layers=["layers.0", "2_PLIF"]) as mon:
        net(x)
        net(x)
    assert [t.shape for t in mon["layers.0"]] == [torch.Size([4, 3, 4, 8, 8])] * 2
    assert len(mon["2_PLIF"]) == 2
    mon.clear()
    assert mon["layers.0"] == []


def test_a_users_model_and_the_host_copy():
    model = nn.Sequential(TimeFolded(nn.Linear(5, 7)), PLIF(), nn.Sequential(TimeFolded(nn.Linear(7, 3)), PLIF()))
    x = torch.rand(4, 2, 5) * 4
    with OutputMonitor(model) as mon, InputMonitor(model, layers=["2.0"]) as ins:
        out = model(x)
    assert mon.names == ["1", "2.1"]
    assert torch.equal(mon["2.1"][0], out.detach())
    assert torch.equal(ins["2.0"][0], mon["1"][0])
    host = mon.cpu()
    assert host.keys() == {"1", "2.1"} and torch.equal(host["2.1"][0], out.detach())
    model(x)  # closed: nothing more is recorded
    assert len(mon["2.1"]) == 1


def test_no_gradient_no_record_and_the_hooks_come_off():
    from plif.layers.fused_block import fusable_now

    net = build_network("c4k3s1-BN-PLIF-MPk2s2-FC10-PLIF", (1, 8, 8), T=2)
    block, bn = list(net.layers[:4]), net.layers[1].layer
    with torch.no_grad(), GradOutputMonitor(net) as grads:
        assert not fusable_now(block, bn)
        net(torch.rand(2, 1, 8, 8))
    assert grads["2_PLIF"] == [] and fusable_now(block, bn)


def test_training_and_stats_count_nothing_on_a_network_without_neurons():
    """The rates of the epoch's test pass and ``plif stats`` on a network with no plif neuron: none
    (the monitor, which refuses such a model now, is not opened)."""
    from plif.deploy.stats import collect_stats
    from plif.train.tb_log import firing_rates

    net = build_network("FC10", (4,), T=2)
    with firing_rates(net) as rates:
        net(torch.rand(3, 4))
    assert rates == {}
    st = collect_stats(net, [torch.rand(3, 4)])
    assert st.samples == 3 and st.layers[0].spikes == 0
