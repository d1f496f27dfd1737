"""plif's NIR files in Sinabs 3.1 (SynSense): sinabs.from_nir alone builds other neurons than plif's;
plif.deploy.nir_sinabs.sinabs_from_nir sets Sinabs' own LIF/IAF layers to plif's neuron."""
import numpy as np
import pytest
import torch

nir = pytest.importorskip("nir")
sinabs = pytest.importorskip("sinabs")

from plif.deploy.nir_export import NIRExportError, to_nir  # noqa: E402
from plif.deploy.nir_sinabs import sinabs_from_nir  # noqa: E402

from .test_nir_frameworks import ZOO_NETWORKS, assert_same_spikes, frames, zoo_net  # noqa: E402


@pytest.mark.parametrize("entry", ZOO_NETWORKS)
def test_every_zoo_network_fires_like_plif_in_sinabs(make_net, entry):
    net = zoo_net(make_net, entry)
    assert_same_spikes(net, to_nir(net, target="sinabs"), "sinabs", frames(net))


def test_a_network_with_if_neurons_and_per_channel_tau_in_sinabs(make_net):
    net = make_net("c6k3s1-BN-PLIF-MPk2s2-FC30-IF-FC20-PLIF-APk10s10", input_shape=(2, 10, 10), T=4,
                   per_channel_tau=True)
    with torch.no_grad():
        net.neuron_layers()[0].w.copy_(torch.linspace(-1.5, 1.5, 6))
    assert_same_spikes(net, to_nir(net, target="sinabs"), "sinabs", frames(net, batch=3))


def test_plain_sinabs_from_nir_builds_other_neurons(make_net):
    """What Sinabs' importer alone makes of plif's neurons (docs/deployment.md): the reason for sinabs_from_nir."""
    from sinabs.activation import MembraneSubtract, MultiSpike

    net = make_net("FC40-PLIF-FC20-PLIF-APk10s10", input_shape=(12,), T=4)
    graph = to_nir(net, target="sinabs")
    layer = sinabs.from_nir(graph, batch_size=2).get_submodule("1_plif")
    assert layer.spike_fn is MultiSpike and isinstance(layer.reset_fn, MembraneSubtract)
    assert not layer.norm_input and float(layer.alpha_mem_calculated[0]) == pytest.approx(np.exp(-0.5))  # plif: 1/2
    conv = make_net("c4k3s1-BN-PLIF-FC20-PLIF-APk10s10", input_shape=(1, 6, 6), T=2)
    with pytest.raises(ValueError, match="ambiguous"):  # `any(node.v_leak) != 0` on a conv's [C, H, W] neurons
        sinabs.from_nir(to_nir(conv, target="sinabs"), batch_size=2)
    snn_file = to_nir(net, target="snntorch")
    with pytest.raises(ValueError, match="export it --for sinabs"):  # no file for another importer runs here
        sinabs_from_nir(snn_file, batch_size=2)
    fixed = sinabs_from_nir(graph, batch_size=2).get_submodule("1_plif")
    assert fixed.norm_input and torch.equal(fixed.alpha_mem_calculated.detach(), torch.full((40,), 0.5))


def test_sinabs_target_refuses_what_it_cannot_run(make_net):
    net = make_net("c4k3s1-BN-PLIF-APk3s3-FC20-PLIF", input_shape=(1, 9, 9), T=2)  # 1/9 stays an AvgPool2d
    with pytest.raises(NIRExportError, match="sinabs has no AvgPool2d"):
        to_nir(net, target="sinabs")
    with pytest.raises(NIRExportError, match="dt = 1"):
        to_nir(net, dt=1e-3, target="sinabs")
    with pytest.raises(ValueError, match="export it --for sinabs"):
        sinabs_from_nir(to_nir(make_net(), target="norse"), batch_size=1)
