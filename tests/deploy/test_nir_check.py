"""Damaged NIR files (issue 39): every parameter checked against what its node means, one line naming
the node and field, by ``read_nir``, ``from_nir`` and ``plif export --check`` alike (one checker).

The files are written the two ways a user or an attacker would: by editing HDF5 fields of a file
plif wrote (h5py), and by changing a graph in memory and writing it with nir's own writer."""
import copy
import re
import shutil

import numpy as np
import pytest

nir = pytest.importorskip("nir")
h5py = pytest.importorskip("h5py")

from plif.cli.main import main  # noqa: E402
from plif.deploy.nir_check import MAX_MAGNITUDE, NIRFileError, check_graph  # noqa: E402
from plif.deploy.nir_export import to_nir, write_nir  # noqa: E402
from plif.deploy.nir_import import from_nir, read_graph, read_nir  # noqa: E402

from plif_testing import small_net  # noqa: E402

N = "node/nodes/"


@pytest.fixture(scope="module")
def good_graph():
    """The small test network (conv, BN node, PLIF, max-pool OR, flatten, linear, voting) as plif exports it."""
    return to_nir(small_net())


@pytest.fixture(scope="module")
def good_file(good_graph, tmp_path_factory):
    return write_nir(good_graph, tmp_path_factory.mktemp("nir") / "good.nir")


def _set(path: str, make):
    """An edit that replaces the HDF5 dataset ``path`` by ``make(old value)`` (any shape or type)."""
    def edit(f):
        old = f[path][()]
        del f[path]
        f.create_dataset(path, data=make(old))
    return edit


def _one(value):
    """``value`` in the first entry of an array, the rest unchanged."""
    def make(old):
        new = np.array(old, copy=True)
        new.flat[0] = value
        return new
    return make


DAMAGE = [  # (id, edit, what the one-line refusal says)
    ("tau-nan", _set(N + "2_plif/tau", _one(np.nan)), r"node '2_plif': field 'tau' is NaN at \[0, 0, 0\]"),
    ("tau-inf", _set(N + "2_plif/tau", _one(np.inf)), r"node '2_plif': field 'tau' is infinite"),
    ("tau-zero", _set(N + "11_plif/tau", _one(0.0)), r"node '11_plif': field 'tau' is 0 at \[0\]; a time constant"),
    ("tau-negative", _set(N + "11_plif/tau", lambda v: -v), r"node '11_plif': field 'tau' is -0.00\d+ at \[0\]"),
    ("tau-below-dt", _set(N + "11_plif/tau", _one(1e-9)), r"node '11_plif': field 'tau' is 1e-09 .*shorter than the "
                                                           r"time-step dt"),
    ("weight-nan", _set(N + "0_conv/weight", _one(np.nan)), r"node '0_conv': field 'weight' is NaN"),
    ("weight-1e38", _set(N + "10_linear/weight", _one(1e38)), r"node '10_linear': field 'weight' is 1e\+38 at \[0, "
                                                              r"0\], beyond \+-1.09951e\+12 \(2\^40\)"),
    ("bias-1e38", _set(N + "1_bn/bias", _one(-1e38)), r"node '1_bn': field 'bias' is -1e\+38"),
    ("bias-nan", _set(N + "15_voting/bias", _one(np.nan)), r"node '15_voting': field 'bias' is NaN"),
    ("threshold-nan", _set(N + "14_plif/v_threshold", _one(np.nan)), r"node '14_plif': field 'v_threshold' is NaN"),
    ("threshold-inf", _set(N + "2_plif/v_threshold", _one(-np.inf)), r"node '2_plif': field 'v_threshold' is inf"),
    ("v_reset-nan", _set(N + "14_plif/v_reset", _one(np.nan)), r"node '14_plif': field 'v_reset' is NaN"),
    ("v_reset-above-threshold", _set(N + "14_plif/v_reset", _one(2.0)), r"node '14_plif': field 'v_reset' is above "
                                                                         r"'v_threshold' at \[0\]"),
    ("v_leak-inf", _set(N + "14_plif/v_leak", _one(np.inf)), r"node '14_plif': field 'v_leak' is infinite"),
    ("r-nan", _set(N + "6_plif/r", _one(np.nan)), r"node '6_plif': field 'r' is NaN"),
    ("r-negative", _set(N + "6_plif/r", lambda v: -v), r"node '6_plif': field 'r' is not positive"),
    ("tau-text", _set(N + "2_plif/tau", lambda v: "fast"), r"node '2_plif': field 'tau' is not an array of real"),
    ("T-1e12", _set("node/metadata/T", lambda v: np.int64(10 ** 12)), r"metadata: field 'T' .*got 1000000000000"),
    ("T-negative", _set("node/metadata/T", lambda v: np.int64(-1)), r"metadata: field 'T' .*got -1$"),
    ("T-fraction", _set("node/metadata/T", lambda v: 2.5), r"metadata: field 'T' .*got 2.5"),
    ("dt-nan", _set("node/metadata/dt", lambda v: np.nan), r"metadata: field 'dt' .*got nan"),
    ("dt-zero", _set("node/metadata/dt", lambda v: 0.0), r"metadata: field 'dt' .*got 0.0"),
    ("dt-below-float32", _set("node/metadata/dt", lambda v: 1e-300), r"metadata: field 'dt' .*got 1e-300"),
    ("target-unknown", _set("node/metadata/target", lambda v: "loihi"), r"metadata: field 'target' must be one of"),
    ("input_shape-zeros", _set("node/metadata/input_shape", np.zeros_like),
     r"metadata: field 'input_shape' must be between 1 and 2147483647, got \[0, 0, 0\]"),
    ("input_shape-2^40", _set("node/metadata/input_shape", lambda v: np.array([1, 2 ** 40, 16])),
     r"metadata: field 'input_shape' .*got \[1, 1099511627776, 16\]"),
    ("input_shape-other", _set("node/metadata/input_shape", lambda v: np.array([1, 16, 15])),
     r"metadata: field 'input_shape' \[1, 16, 15\] is not the Input node's shape \[1, 16, 16\]"),
    ("input-node-zeros", _set(N + "input/shape", np.zeros_like), r"node 'input': field 'shape' must be between 1"),
    ("input-node-2^40", _set(N + "input/shape", lambda v: np.array([2 ** 40])),
     r"node 'input': field 'shape' must be between 1 and 2147483647, got \[1099511627776\]"),
    ("input-node-2^31-values", _set(N + "input/shape", lambda v: np.array([2 ** 16, 2 ** 15, 1])),
     r"node 'input': field 'shape' \[65536, 32768, 1\] has 2147483648 values per sample"),
    ("conv-weight-5d", _set(N + "0_conv/weight", lambda v: v[..., None]),
     r"node '0_conv': field 'weight' has 5 dimensions \[8, 1, 3, 3, 1\], not 4"),
    ("conv-in-channels", _set(N + "4_conv/weight", lambda v: v[:, :4]),
     r"node '4_conv': field 'weight' \[8, 4, 3, 3\] takes 4 input channels .*its input has 8"),
    ("conv-bias-size", _set(N + "4_conv/bias", lambda v: v[:5]),
     r"node '4_conv': field 'bias' has shape \[5\], not \[8\]"),
    ("conv-stride-0", _set(N + "0_conv/stride", np.zeros_like), r"node '0_conv': field 'stride' must be between 1"),
    ("conv-groups-0", _set(N + "4_conv/groups", lambda v: np.int64(0)), r"node '4_conv': field 'groups' must be"),
    ("conv-groups-3", _set(N + "4_conv/groups", lambda v: np.int64(3)),
     r"node '4_conv': field 'groups' \(3\) does not divide the 8 output channels"),
    ("conv-padding-negative", _set(N + "4_conv/padding", lambda v: -v), r"node '4_conv': field 'padding' must be"),
    ("conv-kernel-larger-than-input", _set(N + "4_conv/weight", lambda v: np.zeros((8, 8, 20, 20), np.float32)),
     r"node '4_conv': field 'weight' gives a 20x20 window .*larger than its input \[8, 8\]"),
    ("conv-input_shape-other", _set(N + "4_conv/input_shape", lambda v: v + 1),
     r"node '4_conv': field 'input_shape' \[9, 9\] is not its input's \[8, 8\]"),
    ("pool-kernel-0", _set(N + "3_maxpool_sum/kernel_size", np.zeros_like),
     r"node '3_maxpool_sum': field 'kernel_size' must be between 1"),
    ("pool-padding-over-half", _set(N + "3_maxpool_sum/padding", lambda v: v + 2),
     r"node '3_maxpool_sum': field 'padding' \[2, 2\] is more than half the kernel"),
    ("neuron-shape-other", _set(N + "2_plif/tau", lambda v: v[:, :, :15]),
     r"node '2_plif': field 'tau' has shape \[8, 16, 15\], not \[8, 16, 16\]"),
    ("neuron-all-fields-other-shape", lambda f: [_set(N + f"6_plif/{k}", lambda v: v[:4])(f)
                                                  for k in ("tau", "r", "v_leak", "v_threshold", "v_reset")],
     r"node '6_plif': field 'v_threshold' has shape \[4, 8, 8\], not \[8, 8, 8\] \(one per neuron of its input\)"),
    ("linear-inputs-other", _set(N + "10_linear/weight", lambda v: v[:, :100]),
     r"node '10_linear': field 'weight' \[40, 100\] takes 100 inputs, its input has shape \[128\]"),
    ("linear-weight-3d", _set(N + "13_linear/weight", lambda v: v[None]),
     r"node '13_linear': field 'weight' has 3 dimensions"),
    ("affine-bias-size", _set(N + "13_linear/bias", lambda v: v[:3]),
     r"node '13_linear': field 'bias' has shape \[3\]"),
    ("flatten-dims", _set(N + "9_flatten/start_dim", lambda v: np.int64(7)),
     r"node '9_flatten': fields 'start_dim' 7, 'end_dim' -1 do not name dimensions of its input \[8, 4, 4\]"),
    ("output-shape-other", _set(N + "output/shape", lambda v: np.array([3])),
     r"node 'output': field 'shape' \[3\] is not its input's \[2\]"),
]


@pytest.mark.parametrize("edit,says", [d[1:] for d in DAMAGE], ids=[d[0] for d in DAMAGE])
def test_a_damaged_file_is_refused_in_one_line_naming_node_and_field(good_file, tmp_path, capsys, edit, says):
    path = tmp_path / "damaged.nir"
    shutil.copy(good_file, path)
    with h5py.File(path, "r+") as f:
        edit(f)
    with pytest.raises(NIRFileError, match=re.escape(str(path)) + ": " + says):
        read_nir(path)
    assert main(["export", "--check", str(path)]) == 2
    captured = capsys.readouterr()
    assert re.search(says, captured.err) and len(captured.err.strip().splitlines()) == 1
    assert "importers" not in captured.out  # nothing judged from a file that means nothing


def test_the_good_file_passes_and_runs(good_file, capsys):
    read_nir(good_file)
    assert main(["export", "--check", str(good_file)]) == 0
    assert "  plif      exact" in capsys.readouterr().out


@pytest.mark.parametrize("node,field,value,says", [
    ("2_plif", "tau", np.nan, "field 'tau' is NaN"),
    ("0_conv", "weight", 1e38, r"field 'weight' is 1e\+38"),
    ("14_plif", "v_threshold", np.nan, "field 'v_threshold' is NaN"),
])
def test_a_graph_changed_in_memory_is_refused_by_from_nir_and_by_nirs_own_file(good_graph, tmp_path, capsys, node,
                                                                              field, value, says):
    graph = copy.deepcopy(good_graph)
    getattr(graph.nodes[node], field).flat[0] = value
    with pytest.raises(NIRFileError, match=f"node '{node}': {says}"):
        from_nir(graph)
    nir.write(tmp_path / "g.nir", graph)  # nir's own writer takes it
    with pytest.raises(NIRFileError, match=f"g.nir: node '{node}': {says}"):
        read_graph(tmp_path / "g.nir")
    assert main(["export", "--check", str(tmp_path / "g.nir")]) == 2
    assert f"node '{node}': " in capsys.readouterr().err


def test_a_5d_convolution_weight_written_by_nir_is_refused(tmp_path):
    """nir.Conv2d takes a 5-D weight without a word (its shapes read only the first three dimensions)."""
    conv = nir.Conv2d(input_shape=np.array([6, 6]), weight=np.ones((2, 1, 3, 3, 2), np.float32), stride=1, padding=1,
                      dilation=1, groups=1, bias=np.zeros(2, np.float32))
    graph = nir.NIRGraph.from_list(nir.Input(input_type={"input": np.array([1, 6, 6])}), conv)
    nir.write(tmp_path / "c.nir", graph)
    with pytest.raises(NIRFileError, match=r"c.nir: node 'conv2d': field 'weight' has 5 dimensions"):
        read_nir(tmp_path / "c.nir")


def test_the_time_constant_is_checked_against_the_dt_it_is_stepped_with():
    """A file from elsewhere without metadata['dt'] (τ in seconds): --check cannot judge τ against a
    step it does not know; stepping it at plif's default dt = 1 would overshoot every step, so from_nir
    refuses that and runs it at the dt it was made for."""
    lif = nir.LIF(tau=np.full(3, 2e-3), r=np.ones(3), v_leak=np.zeros(3), v_threshold=np.ones(3), v_reset=np.zeros(3))
    graph = nir.NIRGraph.from_list(lif)
    check_graph(graph)  # no dt known: only sign and finiteness
    with pytest.raises(NIRFileError, match=r"node 'lif': field 'tau' is 0.002 at \[0\], shorter than the time-step "
                                           r"dt = 1"):
        from_nir(graph)
    from_nir(graph, dt=1e-3)


def test_read_nir_checks_again_what_nirs_type_inference_made_of_the_file(tmp_path):
    """read_graph checks the file as written, before NIR's type inference; the Input node inference
    adds before a root node is seen only by from_nir's check (so read_nir checks twice)."""
    lif = nir.LIF(tau=np.full(3, 2.0), r=np.ones(3), v_leak=np.zeros(3), v_threshold=np.ones(3), v_reset=np.zeros(3))
    graph = nir.NIRGraph(nodes={"lif": lif, "output": nir.Output(output_type={"output": np.array([3])})},
                         edges=[("lif", "output")], type_check=False)
    graph.metadata = {"input_shape": [4]}
    nir.write(tmp_path / "g.nir", graph)
    check_graph(nir.read(tmp_path / "g.nir", type_check=False))  # as written: no Input node to compare with
    with pytest.raises(ValueError, match=r"g.nir: metadata: field 'input_shape' \[4\] is not the Input node's "
                                         r"shape \[3\]"):  # from_nir's error, as read_nir passes it on
        read_nir(tmp_path / "g.nir")


def test_the_bound_on_magnitudes_is_where_float32_networks_stay_finite(good_graph):
    """2^40 (the documented bound): two such values and an input of 2^20 summed over a fan-in of 2^24
    stay finite in float32; 1e38 (the audit's) overflows a single product with an input of 4."""
    assert np.isfinite(np.float32(MAX_MAGNITUDE) ** 2 * np.float32(2 ** 24) * np.float32(2 ** 20))
    with np.errstate(over="ignore"):
        assert np.isinf(np.float32(1e38) * np.float32(4))
    graph = copy.deepcopy(good_graph)
    graph.nodes["10_linear"].weight.flat[0] = MAX_MAGNITUDE
    check_graph(graph)
    graph.nodes["10_linear"].weight.flat[0] = np.nextafter(np.float32(MAX_MAGNITUDE), np.float32(np.inf))
    with pytest.raises(NIRFileError, match="beyond"):
        check_graph(graph)
