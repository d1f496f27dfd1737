"""plif's NIR files run in Norse and snnTorch (their own importers) with plif's spikes, at batch > 1.

The networks are the paper's (all six zoo entries: their real layer sequences at narrow widths
on smaller frames) and the Table 5 average-pooling network.  Every spiking node's output is
compared, time-step by time-step, through plif.deploy.nir_compare (forward hooks on the imported
modules); the outputs (voting means) must be bit-identical too.
"""
import re

import numpy as np
import pytest
import torch

nir = pytest.importorskip("nir")

from plif.deploy.nir_compare import framework_spikes, plif_spikes  # noqa: E402
from plif.deploy.nir_export import leaks_exact_at, to_nir, write_nir  # noqa: E402
from plif.deploy.nir_import import read_nir, threshold_to_nir  # noqa: E402

ZOO_NETWORKS = ["mnist", "fashion-mnist", "cifar10", "nmnist", "cifar10-dvs", "dvs128-gesture"]
TABLE5 = ("{c8k3s1-BN-PLIF-APk2s2}*2-DP-FC40-PLIF-DP-FC20-PLIF-APk10s10", (1, 16, 16))
IMPORTERS = {"norse": "norse.torch", "snntorch": "snntorch", "sinabs": "sinabs"}


def narrow(entry):
    """A zoo network with its real layer sequence, narrow (4 channels, hidden FC32, the voting FC as
    it is) on a 2x-16x smaller frame: every conv, pool, dropout and neuron of the paper's network."""
    from plif.catalog import get_dataset

    e = get_dataset(entry)
    spec = re.sub(r"FC(\d+)", lambda m: m.group(0) if int(m.group(1)) <= 110 else "FC32",
                  re.sub(r"\bc\d+k", "c4k", e.network))
    c, h, _ = e.input_shape
    side = {28: 14, 32: 16, 34: 17, 128: 32}[h]  # 32 keeps DVS128's five 2x2 pools at least 1x1
    return spec, (c, side, side)


def zoo_net(make_net, entry):
    """The narrow zoo network with ``liven_`` weights and a different learned-like k = sigmoid(w) per layer."""
    spec, shape = narrow(entry)
    net = make_net(spec, input_shape=shape, T=4, seed=3)
    with torch.no_grad():
        for i, m in enumerate(net.neuron_layers()):
            m.w.fill_(0.35 * i - 0.6)
    return net


def frames(net, batch=2, seed=1):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, *net.input_shape, generator=g)  # the distribution liven_ calibrates the network on
    return x.unsqueeze(0).expand(net.T, *x.shape).contiguous()


def assert_same_spikes(net, graph, framework, x):
    """Every spiking layer fires, and fires identically step by step in ``framework``; equal outputs."""
    pytest.importorskip(IMPORTERS[framework])
    want, want_out = plif_spikes(net, x)
    got, got_out = framework_spikes(graph, x, framework)
    assert set(want) == {n for n in got if not n.endswith("maxpool_or")}  # a max-pool's OR: no module of its own
    for name, ref in want.items():
        spikes = got[name]
        assert spikes.shape == ref.shape, name
        assert ref.sum() > 0, f"{name} never fires: the test would prove nothing"
        assert torch.equal(spikes, ref), f"{name}: {int((spikes != ref).sum())} spikes differ"
    assert torch.equal(got_out, want_out)


@pytest.mark.parametrize("entry", ZOO_NETWORKS)
def test_every_zoo_network_fires_identically_in_norse_and_snntorch(make_net, entry):
    """All six zoo networks, every layer firing: the same spikes layer by layer (so the same counts)
    and the same voting outputs as the network as trained (BatchNorm unfolded), bit for bit, in both
    frameworks' own importers, each with the dt ``plif export --for`` writes for it (issues 24, 32)."""
    net = zoo_net(make_net, entry)
    norse_graph, snn_graph = to_nir(net, target="norse"), to_nir(net, target="snntorch")
    # Norse's own default dt where every k has a float32 tau there (issue 45.6), else 2**-10
    assert (norse_graph.metadata["dt"], snn_graph.metadata["dt"]) == (1e-3 if leaks_exact_at(net, 1e-3) else 2.0 ** -10,
                                                                        1e-4)
    assert_same_spikes(net, norse_graph, "norse", frames(net))
    assert_same_spikes(net, snn_graph, "snntorch", frames(net))


@pytest.mark.parametrize("target,dt", [("norse", 1.0), ("snntorch", None)])
def test_the_table5_average_pooling_network_and_norse_at_dt_1(make_net, target, dt):
    spec, shape = TABLE5
    net = make_net(spec, input_shape=shape, T=4)
    assert_same_spikes(net, to_nir(net, dt=dt, target=target), target, frames(net))


def _on_threshold_net(make_net):
    """Two PLIF layers with k = sigmoid(0) = 1/2 and input 2: the first potential is exactly
    0 + (1/2)(2 - 0) = 1.0 = V_th in float32 (the second layer then fires on the first's spikes)."""
    net = make_net("FC3-PLIF-FC3-PLIF", input_shape=(3,), T=3)
    with torch.no_grad():
        for m in net.neuron_layers():
            m.w.zero_()
        net.layers[0].layer.weight.copy_(torch.eye(3) * 2.0)
        net.layers[2].layer.weight.copy_(torch.eye(3) * 2.0)
    return net


@pytest.mark.parametrize("target", ["norse", "snntorch", "sinabs"])
def test_a_potential_exactly_on_the_threshold_fires_in_the_importers_too(make_net, target):
    pytest.importorskip(IMPORTERS[target])
    net = _on_threshold_net(make_net)
    x = torch.ones(3, 1, 3)
    want, _ = plif_spikes(net, x)
    assert torch.equal(want["1_plif"][0], torch.ones(1, 3))  # H == 1.0 == V_th fires in plif (H >= V_th)
    graph = to_nir(net, target=target)
    assert_same_spikes(net, graph, target, x)
    if target == "sinabs":
        return  # sinabs_from_nir sets plif's V_th and >= itself (nir_sinabs)
    # the threshold as it was written before (V_th itself): NIR's v > V_th misses the tie
    for name in ("1_plif", "3_plif"):
        assert (graph.nodes[name].v_threshold == threshold_to_nir(1.0)).all()
        graph.nodes[name].v_threshold = np.ones_like(graph.nodes[name].v_threshold)
    got, _ = framework_spikes(graph, x, target)
    assert got["1_plif"][0].sum() == 0 and got["3_plif"].sum() == 0


def test_a_file_written_by_plif_runs_in_norse_with_lif_and_if(make_net, tmp_path):
    """Through the file on disk (nir.write / nir.read with NIR's type check), LIF and IF neurons
    (snnTorch cannot run IF: --for snntorch refuses it, test_nir_export)."""
    net = make_net("c6k3s1-BN-PLIF-MPk2s2-FC30-LIF-FC20-IF", input_shape=(2, 10, 10), T=4, tau0=3.0)
    x = frames(net, batch=4)
    path = write_nir(to_nir(net, target="norse"), tmp_path / "net.nir")
    graph = nir.read(path)
    assert graph.metadata["dt"] == 1e-3 and graph.metadata["target"] == "norse"  # tau0 = 3: exact at Norse's dt
    assert torch.equal(read_nir(path)(x), plif_spikes(net, x)[1])  # plif's own importer
    assert_same_spikes(net, graph, "norse", x)


def test_flatten_keeps_the_batch_dimension_in_the_importers(make_net):
    net = make_net("c4k3s1-BN-PLIF-FC10-PLIF", input_shape=(1, 6, 6), T=2)
    (node,) = [n for n in to_nir(net).nodes.values() if type(n).__name__ == "Flatten"]
    assert (node.start_dim, node.end_dim) == (-3, -1)
    assert list(node.output_type["output"]) == [4 * 6 * 6]  # NIR's batch-free shape
    flat = torch.nn.Flatten(node.start_dim, node.end_dim)  # how nirtorch-based importers run it
    assert flat(torch.zeros(5, 4, 6, 6)).shape == (5, 144) and flat(torch.zeros(4, 6, 6)).shape == (144,)
    assert np.asarray(node.input_type["input"]).tolist() == [4, 6, 6]


def test_norse_runs_per_channel_tau(make_net):
    """Per-channel τ (one learned k per channel) runs in Norse; snnTorch 1.0 keeps one threshold
    scale per layer, so --for snntorch refuses it (docs/deployment.md)."""
    net = make_net("c6k3s1-BN-PLIF-MPk2s2-FC20-PLIF-APk10s10", input_shape=(1, 8, 8), T=4, per_channel_tau=True)
    with torch.no_grad():
        for m in net.neuron_layers():
            m.w.copy_(torch.linspace(-1.5, 1.5, m.w.numel()).reshape(m.w.shape))
    graph = to_nir(net, target="norse")
    tau = graph.nodes["2_plif"].tau
    assert not np.allclose(tau[0], tau[5])
    assert_same_spikes(net, graph, "norse", frames(net, batch=4))


def test_no_one_file_runs_in_all_three_importers(make_net):
    """Issue 40: each importer steps with its own dt and reads none from the file, so the default
    file (for Norse) gives all-zero outputs in snnTorch without an error (which export and --check
    say), and snnTorch's and Sinabs' files cannot be swapped; Norse runs the Sinabs file exactly
    when given its dt (docs/deployment.md)."""
    from plif.deploy.nir_targets import importer_report

    pytest.importorskip("snntorch")
    net = zoo_net(make_net, "mnist")
    x = frames(net)
    want = plif_spikes(net, x)[1]
    default, for_sinabs = to_nir(net), to_nir(net, target="sinabs")
    assert want.any() and not framework_spikes(default, x, "snntorch")[1].any()
    assert "all-zero outputs" in dict(importer_report(default))["snntorch"]
    assert not torch.equal(framework_spikes(for_sinabs, x, "snntorch")[1], want)
    assert dict(importer_report(for_sinabs))["snntorch"].startswith("no: it steps with dt = 0.0001")
    assert_same_spikes(net, for_sinabs, "norse", x)  # from_nir(g, dt=1): the nodes --for norse --dt 1 writes


def test_norse_runs_a_batchnorm_node_as_the_convolution_its_verdict_measures():
    """128 channels on 32x32 frames: Norse's module for the BN node rounds as BatchNorm exactly when
    plif's measurement (torch's convolution built from the node) says so (test_nir_bn)."""
    pytest.importorskip("norse")
    from plif.deploy.nir_bn import conv_channels_off
    from plif.deploy.nir_compare import _load
    from plif.deploy.nir_targets import importer_report

    from .test_nir_bn import bn_net

    net, bn = bn_net(128, 32)
    graph = to_nir(net)
    x = torch.randn(2, 128, 32, 32) * 2
    with torch.no_grad():
        as_bn = torch.equal(_load(graph, "norse", 2).get_submodule("0_bn")(x), bn(x))
    assert as_bn == (conv_channels_off(graph.nodes["0_bn"], (128, 32, 32)) == 0)
    assert as_bn == dict(importer_report(graph))["norse"].startswith("exact on this machine")


def test_the_default_file_runs_in_norse_as_users_call_it(make_net):
    """Issue 45.6: ``norse.torch.from_nir(graph)`` with no dt (Norse's 1e-3) runs plif's default
    file bit for bit where every trained k has a float32 tau at 1e-3 (the zoo networks at their
    initial tau: here the narrow MNIST one, k = sigmoid(0.35 i - 0.6) in layer i)."""
    norse_torch = pytest.importorskip("norse.torch")
    net = zoo_net(make_net, ZOO_NETWORKS[0])
    graph = to_nir(net)
    assert graph.metadata["dt"] == 1e-3
    x = frames(net)
    module = norse_torch.from_nir(graph)  # as its documentation calls it
    outs, state = [], None
    with torch.no_grad():
        for t in range(net.T):
            y, state = module(x[t], state)
            outs.append(y)
    want = plif_spikes(net, x)[1]
    assert want.sum() > 0 and torch.equal(torch.stack(outs), want)
