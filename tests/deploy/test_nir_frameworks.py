"""plif's NIR files run in Norse and snnTorch (their own importers) with plif's spikes, at batch > 1.

The networks are the paper's shapes (zoo entries) at narrow widths and small inputs.  Every spiking
node's output is compared, time-step by time-step, through forward hooks on the imported modules.
"""
import logging
import re
import warnings

import numpy as np
import pytest
import torch

nir = pytest.importorskip("nir")

from plif.deploy.bn_folding import fold_batchnorm  # noqa: E402
from plif.deploy.nir_export import to_nir, write_nir  # noqa: E402
from plif.deploy.nir_import import read_nir  # noqa: E402

# (zoo entry, narrow spec, per-sample input shape)
PAPER_SHAPES = [
    ("mnist", "{c8k3s1-BN-PLIF-MPk2s2}*2-DP-FC40-PLIF-DP-FC20-PLIF-APk10s10", (1, 16, 16)),
    ("cifar10", "{{c6k3s1-BN-PLIF}*3-MPk2s2}*2-DP-FC40-PLIF-DP-FC20-PLIF-APk10s10", (3, 8, 8)),
    ("cifar10-dvs", "{c6k3s1-BN-PLIF-MPk2s2}*4-DP-FC32-PLIF-DP-FC20-PLIF-APk10s10", (2, 16, 16)),
    ("dvs128-gesture", "{c4k3s1-BN-PLIF-MPk2s2}*5-DP-FC32-PLIF-DP-FC20-PLIF-APk10s10", (2, 32, 32)),
    ("table5-average-pooling", "{c8k3s1-BN-PLIF-APk2s2}*2-DP-FC40-PLIF-DP-FC20-PLIF-APk10s10", (1, 16, 16)),
]
B, T = 4, 5


def _narrow(entry):
    """A zoo network with its real layer sequence, narrow (4 channels, hidden FC32, the voting FC as
    it is) on a 2x-16x smaller frame: every conv, pool, dropout and neuron of the paper's network."""
    from plif.models.zoo import ZOO

    e = ZOO[entry]
    spec = re.sub(r"FC(\d+)", lambda m: m.group(0) if int(m.group(1)) <= 110 else "FC32",
                  re.sub(r"\bc\d+k", "c4k", e.spec))
    c, h, _ = e.input_shape
    side = {28: 14, 32: 16, 34: 17, 128: 32}[h]  # 32 keeps DVS128's five 2x2 pools at least 1x1
    return spec, (c, side, side)


ZOO_NETWORKS = ["mnist", "fashion-mnist", "cifar10", "nmnist", "cifar10-dvs", "dvs128-gesture"]


def _frames(net, seed=1):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, *net.input_shape, generator=g)  # the distribution liven_ calibrates the network on
    return x.unsqueeze(0).expand(net.T, *x.shape).contiguous()


@torch.no_grad()
def _plif_spikes(net, x):
    """``{layer index: [T, B, ...] spikes}`` of every spiking layer of the BN-folded network, and its output."""
    folded = fold_batchnorm(net).float()
    out, h = {}, x
    for i, layer in enumerate(folded.layers):
        h = layer(h)
        if type(layer).__name__ in ("PLIF", "LIF", "IF"):
            out[i] = h
    return out, h


@torch.no_grad()
def _run_imported(module, graph, x, call):
    """Step an imported module over ``x [T, B, ...]``, recording every spiking node per step."""
    names = [n for n, node in graph.nodes.items() if type(node).__name__ in ("LIF", "IF")]
    record = {n: [] for n in names}
    hooks = [module.get_submodule(n).register_forward_hook(
        lambda m, a, o, n=n: record[n].append(o[0] if isinstance(o, tuple) else o)) for n in names]
    outs, state = [], None
    for t in range(x.shape[0]):
        y, state = call(module, x[t], state)
        outs.append(y)
    for hk in hooks:
        hk.remove()
    return {n: torch.stack(v) for n, v in record.items()}, torch.stack(outs)


def _norse(graph, dt):
    norse = pytest.importorskip("norse.torch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # Norse 1.1 calls nirtorch.load
        module = norse.from_nir(graph, dt=dt)
    return module, lambda m, xt, s: m(xt, s)


def _snntorch(graph):
    pytest.importorskip("snntorch")
    from snntorch.import_nir import import_from_nir

    module = import_from_nir(graph)  # prints its own notes about threshold scaling
    return module, lambda m, xt, s: (m(xt)[0], None)


def _assert_same_spikes(net, graph, module, call, x, exact_outputs=False):
    want, want_out = _plif_spikes(net, x)
    got, got_out = _run_imported(module, graph, x, call)
    for name, spikes in got.items():
        index = int(name.split("_")[0])
        if name.endswith("maxpool_or"):
            continue  # checked through the next layer; plif has no separate node for it
        assert spikes.shape == want[index].shape, name
        assert want[index].sum() > 0, f"{name} never fires: the test would prove nothing"
        assert torch.equal(spikes, want[index]), f"{name}: {int((spikes != want[index]).sum())} spikes differ"
    assert got_out.shape == (x.shape[0], x.shape[1], want_out.shape[-1])
    assert torch.equal(got_out, want_out) if exact_outputs else torch.allclose(got_out, want_out, rtol=0, atol=1e-6)


@pytest.mark.parametrize("entry,spec,shape", PAPER_SHAPES, ids=[p[0] for p in PAPER_SHAPES])
@pytest.mark.parametrize("dt", [1.0])  # Norse's own 1e-3: test_every_zoo_network_fires_identically...
def test_norse_runs_the_paper_shapes_with_plif_spikes(make_net, entry, spec, shape, dt, caplog):
    net = make_net(spec, input_shape=shape, T=T)
    graph = to_nir(net, dt=dt)
    module, call = _norse(graph, dt)
    with caplog.at_level(logging.ERROR):
        _assert_same_spikes(net, graph, module, call, _frames(net))


@pytest.mark.parametrize("entry,spec,shape", PAPER_SHAPES[-1:], ids=[p[0] for p in PAPER_SHAPES[-1:]])
def test_snntorch_runs_the_paper_shapes_with_plif_spikes(make_net, entry, spec, shape, capsys):  # zoo: below
    net = make_net(spec, input_shape=shape, T=T)
    graph = to_nir(net, dt=1e-4)  # snnTorch 1.0's importer assumes dt = 1e-4 s
    module, call = _snntorch(graph)
    _assert_same_spikes(net, graph, module, call, _frames(net))


def test_a_file_written_by_plif_runs_in_both_frameworks(make_net, tmp_path):
    """Through the file on disk (nir.write / nir.read with NIR's type check), LIF and IF neurons."""
    net = make_net("c6k3s1-BN-PLIF-MPk2s2-FC30-LIF-FC20-IF", input_shape=(2, 10, 10), T=T, tau0=3.0)
    x = _frames(net)
    for dt, runner in ((1e-3, lambda g: _norse(g, 1e-3)), (1e-4, _snntorch_if_supported)):
        path = write_nir(to_nir(net, dt=dt), tmp_path / f"net_{dt}.nir")
        graph = nir.read(path)
        assert graph.metadata["dt"] == dt
        assert torch.equal(read_nir(path)(x), _plif_spikes(net, x)[1])  # plif's own importer
        made = runner(graph)
        if made is not None:
            _assert_same_spikes(net, graph, *made, x)


def _snntorch_if_supported(graph):
    # snnTorch 1.0 imports nir.IF as Leaky(beta=0.9, subtractive reset) returning (spikes, membrane):
    # it cannot run IF layers (docs/deployment.md); the LIF part is covered by the paper shapes above.
    if any(type(n).__name__ == "IF" for n in graph.nodes.values()):
        pytest.importorskip("snntorch")
        return None
    return _snntorch(graph)


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
    scale per layer, so it cannot (docs/deployment.md)."""
    net = make_net("c6k3s1-BN-PLIF-MPk2s2-FC20-PLIF-APk10s10", input_shape=(1, 8, 8), T=T, per_channel_tau=True)
    with torch.no_grad():
        for m in net.neuron_layers():
            m.w.copy_(torch.linspace(-1.5, 1.5, m.w.numel()).reshape(m.w.shape))
    graph = to_nir(net, dt=1e-3)
    tau = graph.nodes["1_plif"].tau
    assert not np.allclose(tau[0], tau[5])
    _assert_same_spikes(net, graph, *_norse(graph, 1e-3), _frames(net))


@pytest.mark.parametrize("entry", ZOO_NETWORKS)
def test_every_zoo_network_fires_identically_in_norse_and_snntorch(make_net, entry, caplog, capsys):
    """All six zoo networks (narrow), every layer firing: the same spikes layer by layer (so the same
    counts) and the same voting outputs, bit for bit, in both frameworks' own importers, each with
    the dt ``plif export --for`` writes for it (issue 24)."""
    spec, shape = _narrow(entry)
    net = make_net(spec, input_shape=shape, T=4, seed=3)
    with torch.no_grad():
        for i, m in enumerate(net.neuron_layers()):
            m.w.fill_(0.35 * i - 0.6)  # learned-like k = sigmoid(w), a different one in each layer
    x = _frames(net)[:, :2]
    want, _ = _plif_spikes(net, x)
    assert all(s.sum() > 0 for s in want.values()), "a layer never fires: the test would prove nothing"
    norse_graph, snn_graph = to_nir(net, target="norse"), to_nir(net, target="snntorch")
    assert (norse_graph.metadata["dt"], snn_graph.metadata["dt"]) == (1e-3, 1e-4)
    with caplog.at_level(logging.ERROR):
        _assert_same_spikes(net, norse_graph, *_norse(norse_graph, 1e-3), x, exact_outputs=True)
    _assert_same_spikes(net, snn_graph, *_snntorch(snn_graph), x, exact_outputs=True)


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


@pytest.mark.parametrize("target", ["norse", "snntorch"])
def test_a_potential_exactly_on_the_threshold_fires_in_the_importers_too(make_net, target, capsys):
    from plif.deploy.nir_import import threshold_to_nir

    net = _on_threshold_net(make_net)
    x = torch.ones(3, 1, 3)
    want, _ = _plif_spikes(net, x)
    assert torch.equal(want[1][0], torch.ones(1, 3))  # H == 1.0 == V_th fires in plif (H >= V_th)
    graph = to_nir(net, target=target)
    module, call = _norse(graph, 1e-3) if target == "norse" else _snntorch(graph)
    _assert_same_spikes(net, graph, module, call, x, exact_outputs=True)
    # the threshold as it was written before (V_th itself): NIR's v > V_th misses the tie
    for node in graph.nodes.values():
        if type(node).__name__ == "LIF" and node.v_threshold[0] != 0.5:
            assert (node.v_threshold == threshold_to_nir(1.0)).all()
            node.v_threshold = np.ones_like(node.v_threshold)
    module, call = _norse(graph, 1e-3) if target == "norse" else _snntorch(graph)
    got, _ = _run_imported(module, graph, x, call)
    assert got["1_plif"][0].sum() == 0 and got["3_plif"].sum() == 0
