"""NIR export of any module plif can trace (plif.deploy.nir_walk): residual joins as edges into the
nodes that sum them, re-imported exactly; what NIR cannot express refused in one line."""
import numpy as np
import pytest
import torch
from torch import nn

nir = pytest.importorskip("nir")

import plif  # noqa: E402
from plif.deploy.nir_export import NIRExportError, export_nir, export_nir_all, to_nir  # noqa: E402
from plif.deploy.nir_import import read_graph, read_nir  # noqa: E402
from plif.layers import MaxPool2d, TimeFolded  # noqa: E402


def _cbn(cin, cout, stride=1):
    return TimeFolded(nn.Conv2d(cin, cout, 3, stride, 1, bias=False)), TimeFolded(nn.BatchNorm2d(cout))


class Residual(nn.Module):
    """A pooled stem, a Spiking ResNet block (the shortcut added before the neuron; with ``down`` a
    strided block whose shortcut is a 1x1 conv + BN), a SEW ADD block (spikes added), a linear layer."""

    def __init__(self, c=4, down=False):
        super().__init__()
        d = 2 if down else 1
        self.conv0, self.bn0 = _cbn(2, c)
        self.sn0, self.pool = plif.PLIF(), TimeFolded(MaxPool2d(2, 2))
        self.conv1, self.bn1 = _cbn(c, d * c, d)
        self.sn1 = plif.PLIF()
        self.conv2, self.bn2 = _cbn(d * c, d * c)
        self.down = nn.Sequential(TimeFolded(nn.Conv2d(c, 2 * c, 1, 2, bias=False)),
                                  TimeFolded(nn.BatchNorm2d(2 * c))) if down else None
        self.sn2 = plif.PLIF()
        self.conv3, self.bn3 = _cbn(d * c, d * c)
        self.sn3 = plif.PLIF()
        self.conv4, self.bn4 = _cbn(d * c, d * c)
        self.sn4 = plif.PLIF()
        self.fc = TimeFolded(nn.Linear(d * c * (8 // d) ** 2, 10))

    def forward(self, x):
        x = self.pool(self.sn0(self.bn0(self.conv0(x))))
        y = self.bn2(self.conv2(self.sn1(self.bn1(self.conv1(x)))))
        x = self.sn2(y + (x if self.down is None else self.down(x)))
        x = x + self.sn4(self.bn4(self.conv4(self.sn3(self.bn3(self.conv3(x))))))
        return self.fc(x.flatten(2))


def _trained(net):
    """Learned-like k, the weights rescaled so that every neuron layer fires on :func:`_frames`
    (:func:`plif.deploy.synthetic.liven_`: a fresh network barely fires past its first)."""
    from plif.deploy.synthetic import liven_

    torch.manual_seed(0)
    for m in net.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            m.reset_parameters()  # the same weights whatever ran before
        if isinstance(m, plif.PLIF):
            m.w.data.uniform_(-1, 1)  # a learned k per layer
    return liven_(net, _frames(), shift=0.5)


def _frames(T=2, B=2):
    return torch.randn(B, 2, 16, 16, generator=torch.Generator().manual_seed(1)).expand(T, B, 2, 16, 16).contiguous()


def test_a_residual_module_exports_both_skip_joins_and_norse_gives_its_spikes(tmp_path):
    from plif.deploy.nir_compare import framework_spikes

    net = _trained(Residual())
    path = export_nir(net, tmp_path / "res.nir", input_shape=(2, 16, 16), T=2)  # for Norse, verified by re-import
    graph = read_graph(path)
    into = lambda node: sorted(a for a, b in graph.edges if b == node)  # noqa: E731
    assert into("sn2_plif") == ["bn2_bn", "pool_maxpool_or"]  # added before the neuron
    assert into("fc_linear") == ["flatten"] and into("flatten") == ["sn2_plif", "sn4_plif"]  # spikes added (SEW)
    x = _frames()
    with torch.no_grad():
        want = net(x)
    assert torch.equal(read_nir(path)(x), want) and want.abs().sum() > 0
    assert torch.equal(read_nir(path)(x[0]), want)  # a static input, repeated over the file's T
    pytest.importorskip("norse")
    _, got = framework_spikes(graph, x, "norse")
    assert torch.equal(got, want)


def test_a_shortcut_with_layers_waits_in_nirtorchs_depth_first_order_and_norse_gives_its_spikes(tmp_path):
    """nirtorch.load (Norse, Sinabs) runs nodes depth first: the downsampling shortcut is made to run
    first by a node of zeros into the block's first conv (plif.deploy.nir_order); files for the other
    importers have no such node."""
    from plif.deploy.nir_compare import framework_spikes
    from plif.deploy.nir_targets import depth_first_late

    net = _trained(Residual(down=True))
    files = export_nir_all(net, tmp_path / "res.nir", input_shape=(2, 16, 16), T=2)
    graphs = {target: read_graph(path) for target, path in files.items()}
    for target, graph in graphs.items():
        zeros = [n for n in graph.nodes if "_before_" in n]
        assert zeros == (["down_1_bn_before_conv1_conv"] if target in ("norse", "sinabs") else []), target
        assert (depth_first_late(graph) is None) == (target in ("norse", "sinabs")), target
    assert not np.any(graphs["norse"].nodes["down_1_bn_before_conv1_conv"].weight)
    x = _frames()
    with torch.no_grad():
        want = net(x)
    assert torch.equal(read_nir(files["generic"])(x), want) and torch.equal(read_nir(files["norse"])(x), want)
    pytest.importorskip("norse")
    assert torch.equal(framework_spikes(graphs["norse"], x, "norse")[1], want)


def test_a_sum_as_the_output_gets_its_own_node_and_counts_summed_with_a_float_first():
    class Out(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = TimeFolded(nn.Linear(6, 3)), TimeFolded(nn.Linear(6, 3))
            self.sa, self.sb, self.sc = plif.IF(), plif.IF(), plif.IF()

        def forward(self, x):
            s = self.sa(self.a(x)) + self.sb(self.b(x))  # spike counts
            return s + self.sc(self.a(x) + s)  # a float plus two counts: the counts summed first

    net = Out().eval()
    with torch.no_grad():
        net.a.layer.weight.mul_(4)
        net.b.layer.weight.mul_(4)
    graph = to_nir(net, input_shape=(6,), target="generic")
    assert sorted(a for a, b in graph.edges if b == "output_sum") == ["sa_if", "sb_if", "sc_if"]
    assert sorted(a for a, b in graph.edges if b == "sc_if") == ["a_call2_linear", "sc_sum"]
    from plif.deploy.nir_import import from_nir

    x = torch.randn(4, 5, 6, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        want = net(x)
    assert torch.equal(from_nir(graph)(x), want) and want.max() == 3


def test_what_nir_cannot_express_is_refused_in_one_line_naming_the_module(tmp_path):
    from plif.models.residual import sew_resnet18_and

    net = sew_resnet18_and((1, 16, 16), 10, width=2, fused=False).eval()
    with pytest.raises(NIRExportError, match=r"^layer1\.0 \(SEWBasicBlock\): mul\(\) combines two values by a product "
                                             r"or a difference \(SEW AND/IAND, a gate\): NIR nodes only sum"):
        export_nir(net, tmp_path / "and.nir", input_shape=(1, 16, 16))

    class OverTime(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc, self.sn = TimeFolded(nn.Linear(4, 2)), plif.LIF()

        def forward(self, x):
            return self.sn(self.fc(x)).mean(0)

    with pytest.raises(NIRExportError, match=r"^the model \(OverTime\): \.mean\(\) gives \[2, 2\] for an input "
                                             r"\[T=3, B=2, \.\.\.\]: NIR runs one time-step at a time"):
        to_nir(OverTime(), input_shape=(4,))

    class Branchy(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = TimeFolded(nn.Linear(4, 2))

        def forward(self, x):
            return self.fc(x) if x.sum() > 0 else -self.fc(x)

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner, self.sn = Branchy(), plif.IF()

        def forward(self, x):
            return self.sn(self.inner(x))

    with pytest.raises(NIRExportError, match=r"^inner \(Branchy\): torch\.fx cannot trace its forward .*: NIR export "
                                             r"needs the whole forward as one graph$"):
        export_nir(Outer(), tmp_path / "branchy.nir", input_shape=(4,))
    with pytest.raises(NIRExportError, match=r"the model's forward fails on input \[T, B, 5\] .*is input_shape right"):
        to_nir(Outer().inner.fc, input_shape=(5,))
    with pytest.raises(NIRExportError, match="input_shape must be positive sizes"):
        to_nir(Outer(), input_shape=(0, 4))
    assert not list(tmp_path.iterdir())  # nothing half-written


def test_the_input_scaling_is_in_the_files_metadata(tmp_path):
    net = _trained(Residual())
    path = export_nir(net, tmp_path / "res.nir", input_shape=(2, 16, 16), T=2, target="generic",
                      input_scaling=([0.5, 0.25], [0.2, 0.4]))
    meta = read_graph(path).metadata
    assert np.allclose(meta["input_mean"], [0.5, 0.25]) and np.allclose(meta["input_std"], [0.2, 0.4])
    assert "(x - input_mean[c]) / input_std[c]" in meta["input"]
    with pytest.raises(NIRExportError, match="input_scaling must be finite .* std > 0"):
        to_nir(net, input_shape=(2, 16, 16), input_scaling=(0.5, 0.0))


def test_a_per_layer_spike_comparison_names_each_neuron_node_by_the_module_that_made_it():
    """plif.deploy.nir_compare maps each exported neuron node to the module's own neuron (the walk's
    record, not a layer index): a residual module's spikes, node by node, in Norse, snnTorch and Sinabs."""
    from plif.deploy.nir_compare import compare_spikes, plif_spikes

    net, x = _trained(Residual(down=True)), _frames()
    want, out = plif_spikes(net, x)
    with torch.no_grad():
        assert torch.equal(out, net(x)) and torch.equal(want["sn2_plif"], net.sn2(
            net.bn2(net.conv2(net.sn1(net.bn1(net.conv1(net.pool(net.sn0(net.bn0(net.conv0(x)))))))))
            + net.down(net.pool(net.sn0(net.bn0(net.conv0(x)))))))
    assert sorted(want) == [f"sn{i}_plif" for i in range(5)] and all(s.sum() > 0 for s in want.values())
    for framework in ("norse", "snntorch", "sinabs"):
        pytest.importorskip(framework)
        rows = compare_spikes(net, to_nir(net, input_shape=(2, 16, 16), T=2, target=framework), x, framework)
        assert [r["node"] for r in rows] == [f"sn{i}_plif" for i in range(5)] + ["output"], framework
        assert all(r["plif"] > 0 and r["differ"] >= 0 for r in rows), framework  # differ -1: shapes differ
        if framework == "norse":  # exact; snnTorch and Sinabs round otherwise (close)
            assert all(r["differ"] == 0 for r in rows) and all(r["norse"] == r["plif"] for r in rows[:-1])


def test_a_neuron_module_called_twice_is_two_nodes_each_compared_with_its_own_call():
    from plif.deploy.nir_compare import compare_spikes, plif_spikes

    class Twice(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b, self.sn = TimeFolded(nn.Linear(6, 8)), TimeFolded(nn.Linear(8, 4)), plif.IF()

        def forward(self, x):
            return self.sn(self.b(self.sn(self.a(x))))

    net = Twice().eval()
    with torch.no_grad():
        net.a.layer.weight.mul_(4)
        net.b.layer.weight.mul_(4)
    x = torch.randn(4, 3, 6, generator=torch.Generator().manual_seed(0))
    want, _ = plif_spikes(net, x)
    assert {k: tuple(v.shape) for k, v in want.items()} == {"sn_if": (4, 3, 8), "sn_call2_if": (4, 3, 4)}
    rows = compare_spikes(net, to_nir(net, input_shape=(6,), target="generic"), x, "plif")
    assert [(r["node"], r["differ"]) for r in rows] == [("sn_if", 0), ("sn_call2_if", 0), ("output", 0)]
    assert all(r["plif"] > 0 for r in rows)


def test_export_nir_all_walks_once_and_writes_each_targets_file_as_to_nir_gives_it(tmp_path, monkeypatch):
    import plif.deploy.nir_walk as nir_walk
    from plif.deploy.nir_export import write_nir

    net, walks, walk = _trained(Residual(down=True)), [], nir_walk.walk
    monkeypatch.setattr(nir_walk, "walk", lambda *a, **k: walks.append(1) or walk(*a, **k))
    files = export_nir_all(net, tmp_path / "all.nir", verify=False, input_shape=(2, 16, 16), T=2)
    assert len(walks) == 1
    for target, path in files.items():
        alone = write_nir(to_nir(net, target=target, input_shape=(2, 16, 16), T=2), tmp_path / f"{target}.nir")
        assert path.read_bytes() == alone.read_bytes(), target  # the same file, byte for byte
