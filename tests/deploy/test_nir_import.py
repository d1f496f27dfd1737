import numpy as np
import pytest
import torch

nir = pytest.importorskip("nir")

from plif.deploy.nir_import import from_nir, read_nir  # noqa: E402
from plif.neurons import NeuronConfig, multi_step_reference  # noqa: E402


def test_lif_node_steps_like_the_paper_neuron():
    tau = np.full((5,), 1.7)
    g = nir.NIRGraph.from_list(nir.LIF(tau=tau, r=np.ones(5), v_leak=np.zeros(5), v_threshold=np.ones(5),
                                       v_reset=np.zeros(5)))
    net = from_nir(g)
    x = torch.rand(12, 3, 5) * 2
    want, _ = multi_step_reference(x, torch.tensor(1 / 1.7), None, NeuronConfig())
    assert torch.equal(net(x), want)


def test_if_node_and_sum_pool():
    g = nir.NIRGraph.from_list(
        nir.SumPool2d(kernel_size=np.array([2, 2]), stride=np.array([2, 2]), padding=np.array([0, 0])),
        nir.IF(r=np.ones((1, 2, 2)), v_threshold=np.full((1, 2, 2), 5.0), v_reset=np.zeros((1, 2, 2))),
        type_check=False)
    net = from_nir(g)
    x = torch.ones(2, 1, 1, 4, 4)
    out = net(x)
    assert torch.equal(out[0], torch.zeros(1, 1, 2, 2)) and torch.equal(out[1], torch.ones(1, 1, 2, 2))  # 4 < 5, 8 >= 5


def test_unsupported_nodes_and_cycles_are_refused_branches_summed():
    cuba = nir.CubaLIF(tau_syn=np.ones(3) * 2, tau_mem=np.ones(3) * 2, r=np.ones(3), v_leak=np.zeros(3),
                       v_threshold=np.ones(3))
    with pytest.raises(ValueError, match="CubaLIF is not supported"):
        from_nir(nir.NIRGraph.from_list(cuba))
    a = nir.Linear(weight=np.ones((3, 3)))
    b = nir.Linear(weight=np.ones((3, 3)))
    g = nir.NIRGraph(nodes={"input": nir.Input(input_type={"input": np.array([3])}), "a": a, "b": b,
                            "output": nir.Output(output_type={"output": np.array([3])})},
                     edges=[("input", "a"), ("input", "b"), ("a", "output"), ("b", "output")], type_check=False)
    x = torch.rand(2, 1, 3)
    assert torch.equal(from_nir(g)(x), 2 * x.sum(-1, keepdim=True).expand(2, 1, 3))  # two branches summed
    g.edges.append(("b", "a"))  # a feeds... and now also reads b: still feed-forward
    assert torch.equal(from_nir(g)(x), 5 * x.sum(-1, keepdim=True).expand(2, 1, 3))  # a(x + b(x)) + b(x)
    g.edges.append(("a", "b"))
    with pytest.raises(ValueError, match="cycle through node 'a'"):
        from_nir(g)


def test_corrupted_or_missing_file(tmp_path):
    bad = tmp_path / "bad.nir"
    bad.write_bytes(b"\x89HDF\r\n\x1a\n" + b"\0" * 40)
    with pytest.raises(ValueError, match="bad.nir: not a readable NIR file"):
        read_nir(bad)
    with pytest.raises(FileNotFoundError):
        read_nir(tmp_path / "none.nir")


def test_a_dt_other_than_the_files_is_refused(tmp_path):
    """A file exported for one dt (metadata) stepped with another would leak differently in every neuron."""
    g = nir.NIRGraph.from_list(nir.LIF(tau=np.full(2, 2e-3), r=np.ones(2), v_leak=np.zeros(2),
                                       v_threshold=np.ones(2), v_reset=np.zeros(2)))
    g.metadata = {"dt": 1e-3}
    x = torch.rand(6, 3, 2) * 2
    want, _ = multi_step_reference(x, torch.tensor(0.5), None, NeuronConfig())  # tau / dt = 2 steps
    for net in (from_nir(g, dt=1e-3), from_nir(g)):  # the file's dt, given or read from it
        assert torch.equal(net(x), want)
    with pytest.raises(ValueError, match=r"exported for dt = 0.001 .*not dt = 0.0001"):
        from_nir(g, dt=1e-4)
    path = tmp_path / "g.nir"
    nir.write(path, g)
    with pytest.raises(ValueError, match=r"g.nir: the NIR graph was exported for dt = 0.001"):
        read_nir(path, dt=1.0)


def test_plif_threshold_round_trips_through_the_nir_threshold():
    from plif.deploy.nir_import import threshold_from_nir, threshold_to_nir

    for v in (1.0, 0.3, 2.5, 1e-3):
        below = threshold_to_nir(v)
        assert below < np.float32(v) and threshold_from_nir(below) == np.float32(v)
    h = torch.tensor([np.nextafter(np.float32(1), 0), 1.0, np.nextafter(np.float32(1), 2)])
    vth = torch.from_numpy(threshold_to_nir(np.ones(3)))
    assert torch.equal(h > vth, h >= 1.0)  # NIR's > on the file's value is plif's >= on V_th
