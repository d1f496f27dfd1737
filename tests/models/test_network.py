import copy
import dataclasses

import pytest
import torch
from torch import nn

from plif.layers import PerStepBatchNorm, TimeInvariantDropout, Voting
from plif.catalog import DATASETS
from plif.models import NotationError, build_network, build_zoo, layer_table
from plif.neurons import LIF, PLIF

# Parameter counts worked out by hand (conv: out*in*k*k; BN: 2*C; FC: in*out; PLIF: 1 each).
HAND_COUNTS = {
    # 128*1*9 + 256 + 1 + 128*128*9 + 256 + 1 + 6272*2048 + 1 + 2048*100 + 1
    "mnist": 1152 + 256 + 1 + 147456 + 256 + 1 + 12845056 + 1 + 204800 + 1,
    "fashion-mnist": 13_198_980,
    # input 2x34x34 -> 17 -> 8: FC in 128*8*8 = 8192
    "nmnist": 2304 + 256 + 1 + 147456 + 256 + 1 + 8192 * 2048 + 1 + 204800 + 1,
    # 6 convs (3->256, 5x 256->256), 6 BN, 6 PLIF, FC 256*8*8 -> 2048 -> 100
    "cifar10": 6912 + 5 * 589824 + 6 * 512 + 6 + 16384 * 2048 + 1 + 204800 + 1,
    # 4 convs, 128x128 -> 8x8: FC 8192 -> 512 -> 100
    "cifar10-dvs": 2304 + 3 * 147456 + 4 * 256 + 4 + 8192 * 512 + 1 + 512 * 100 + 1,
    # 5 convs, 128 -> 4: FC 2048 -> 512 -> 110
    "dvs128-gesture": 2304 + 4 * 147456 + 5 * 256 + 5 + 2048 * 512 + 1 + 512 * 110 + 1,
    # CIFAR10-DVS's network on 180x240 -> 90x120 -> 45x60 -> 22x30 -> 11x15: FC 21120 -> 512 -> 1010
    "ncaltech101": 2304 + 3 * 147456 + 4 * 256 + 4 + 21120 * 512 + 1 + 512 * 1010 + 1,
    # 700 channels -> FC256, BN, PLIF -> FC256, BN, PLIF -> FC20 / FC35, PLIF (dropout holds nothing)
    "shd": 700 * 256 + 512 + 1 + 256 * 256 + 512 + 1 + 256 * 20 + 1,
    "ssc": 700 * 256 + 512 + 1 + 256 * 256 + 512 + 1 + 256 * 35 + 1,
    # CIFAR10-DVS's network: on ASL-DVS's 180x240 as on N-Caltech101's (FC 21120), 24 letters x 10 voters
    "asl-dvs": 2304 + 3 * 147456 + 4 * 256 + 4 + 21120 * 512 + 1 + 512 * 240 + 1,
    # on DVS-Lip's 128x128 as on CIFAR10-DVS's (FC 8192), 100 words x 10 voters
    "dvs-lip": 2304 + 3 * 147456 + 4 * 256 + 4 + 8192 * 512 + 1 + 512 * 1000 + 1,
}


def test_hand_counts_agree_with_each_other():
    assert HAND_COUNTS["mnist"] == HAND_COUNTS["fashion-mnist"] == 13_198_980


@pytest.mark.parametrize("name", list(DATASETS))
def test_zoo_builds_runs_and_counts(name):
    e = DATASETS[name]
    net = build_zoo(name, T=2)
    assert sum(p.numel() for p in net.parameters()) == HAND_COUNTS[name]
    torch.manual_seed(0)
    x = torch.rand(2, 2, *e.input_shape)
    out = net(x)
    assert out.shape == (2, 2, e.num_classes)
    loss = ((out.mean(0) - torch.eye(e.num_classes)[:2]) ** 2).mean()
    loss.backward()
    ws = [m.w for m in net.neuron_layers()]
    assert all(w.grad is not None for w in ws)
    assert all(p.grad is not None for p in net.parameters())


def test_authors_code_switches():
    assert sum(isinstance(m, TimeInvariantDropout) for m in build_zoo("cifar10", authors_code=True).layers) == 1
    assert sum(isinstance(m, TimeInvariantDropout) for m in build_zoo("cifar10").layers) == 2
    assert "FC2048" in build_zoo("cifar10-dvs", authors_code=True).spec
    net = build_zoo("mnist", bn_per_step=True)
    assert any(isinstance(m, PerStepBatchNorm) for m in net.layers)


def test_static_input_equals_repeated_input():
    """The encoder computed once and repeated over T gives exactly the repeated-input result,
    running BatchNorm statistics included."""
    net = build_zoo("fashion-mnist", T=3).double()
    twin = copy.deepcopy(net)
    x = torch.randn(4, 1, 28, 28, dtype=torch.float64)
    torch.manual_seed(5)
    a = net(x)
    torch.manual_seed(5)
    b = twin(x.unsqueeze(0).expand(3, *x.shape))
    assert torch.equal(a, b)
    for m, n in zip(net.modules(), twin.modules()):
        if isinstance(m, nn.BatchNorm2d):
            assert torch.equal(m.running_var, n.running_var) and torch.equal(m.running_mean, n.running_mean)



@pytest.mark.parametrize("bn_per_step", [False, True])
def test_eval_static_input_runs_batchnorm_once_bit_identical(bn_per_step):
    """In eval mode BatchNorm (running statistics) after the hoisted convolution runs once on
    ``[B, ...]`` too, and the first neuron reads the repeated tensor as a stride-0 view: the
    spikes of every neuron are those of the repeated input, bit for bit."""
    torch.manual_seed(0)
    net = build_network("c8k3s1-BN-PLIF-MPk2s2-c8k3s1-BN-PLIF-FC10-PLIF", (1, 12, 12), 4, bn_per_step=bn_per_step,
                        v_threshold=0.2)
    net(torch.rand(6, 1, 12, 12))  # training moves the running statistics away from 0 and 1
    net.eval()
    seen = {}
    for i in (2, 6):
        net.layers[i].register_forward_hook(lambda m, inp, out, i=i: seen.setdefault(i, []).append((inp[0], out)))
    x = torch.rand(5, 1, 12, 12)
    with torch.no_grad():
        a = net(x)
        b = net(x.unsqueeze(0).expand(4, *x.shape).contiguous())
    assert torch.equal(a, b)
    assert seen[2][0][0].stride(0) == 0 and seen[2][1][0].stride(0) != 0
    for i in (2, 6):
        assert torch.equal(seen[i][0][1], seen[i][1][1]) and seen[i][0][1].sum() > 0

def test_overrides_for_ablations():
    net = build_network("c8k3s1-BN-PLIF-MPk2s2-FC20-PLIF-APk10s10", (1, 8, 8), 4, neuron="LIF", tau0=16.0, pool="avg")
    assert all(isinstance(m, LIF) and m.tau == 16.0 for m in net.neuron_layers())
    assert isinstance(net.layers[3].layer, torch.nn.AvgPool2d)
    assert isinstance(net.layers[-1], Voting)
    net = build_network("c8k3s1-PLIF-FC10-PLIF", (1, 8, 8), 4, per_channel_tau=True)
    assert [m.w.shape for m in net.neuron_layers()] == [(8,), (10,)]
    assert isinstance(net.neuron_layers()[0], PLIF)


def test_shape_errors_point_at_the_token():
    with pytest.raises(NotationError, match="a convolution needs") as e:
        build_network("FC10-c8k3s1", (1, 8, 8))
    assert e.value.pos == 5
    with pytest.raises(NotationError, match="voting"):
        build_network("FC15-APk10s10", (4,))
    with pytest.raises(NotationError, match="larger than"):
        build_network("MPk4s4-MPk4s4", (1, 8, 8))
    with pytest.raises(ValueError, match="input"):
        build_zoo("mnist")(torch.zeros(2, 3, 28, 28))


def test_layer_table_totals():
    table = layer_table(build_zoo("fashion-mnist"))
    assert "13,198,980" in table and "127,588" in table
    assert "FC2048" in table and "6272" in table


@pytest.mark.parametrize("spec", [None, 3, b"FC10"])
def test_spec_must_be_a_string(spec):
    with pytest.raises(TypeError, match="spec must be a network string"):
        build_network(spec, (10,), 2)


@pytest.mark.parametrize("T, error", [(0, ValueError), (-2, ValueError), (2.5, TypeError), (True, TypeError), ("4", TypeError)])
def test_bad_T_is_refused(T, error):
    with pytest.raises(error, match="T must be"):
        build_network("FC10", (10,), T)


@pytest.mark.parametrize("shape, error", [((1.5, 28, 28), TypeError), ((0, 28, 28), ValueError), ((1, 28), ValueError),
                                          ("1,28,28", TypeError), (None, TypeError), ((1, -28, 28), ValueError)])
def test_bad_input_shape_is_refused(shape, error):
    with pytest.raises(error, match="input_shape"):
        build_network("c8k3s1-PLIF-FC10", shape, 2)


def test_numpy_and_list_shapes_are_accepted():
    import numpy as np
    net = build_network("FC10", [np.int64(12)], np.int64(3))
    assert net.input_shape == (12,) and net.T == 3


def test_builds_on_the_meta_device_without_storage():
    """A network far too large for memory has shapes and parameter counts on the meta device."""
    with torch.device("meta"):
        net = build_network("FC100000-FC100000", (100000,), 4)
    assert all(p.is_meta for p in net.parameters())
    assert sum(p.numel() for p in net.parameters()) == 2 * 10 ** 10
    assert net.info[-1].out_shape == (100000,) and net.info[0].params == 10 ** 10


def test_every_token_kind_has_a_builder():
    from plif.models.builders import BUILDERS
    from plif.models.notation import TOKENS
    assert {kind for _, kind, _ in TOKENS.values()} <= set(BUILDERS)


@pytest.mark.parametrize("option, value, message", [
    ("v_threshold", float("nan"), "v_threshold must be a finite number, got nan"),
    ("v_threshold", float("inf"), "v_threshold must be a finite number, got inf"),
    ("v_reset", float("nan"), "v_reset must be a finite number, got nan"),
    ("alpha", float("nan"), "alpha must be a finite number, got nan"),
    ("detach_reset", "False", "detach_reset must be bool, got 'False'"),
    ("bn_per_step", "no", "bn_per_step must be bool, got 'no'"),
    ("per_channel_tau", 1, "per_channel_tau must be bool, got 1"),
    ("dropout_p", float("nan"), "dropout_p must be a finite number, got nan"),
])
def test_the_api_refuses_what_the_cli_refuses_with_its_words(option, value, message):
    """Issue 45.3: a NaN threshold gave all-zero output, a NaN alpha NaN gradients, ``detach_reset="False"``
    a truthy string; the words are ``plif train``'s (plif.values.check_value), naming the keyword."""
    with pytest.raises(ValueError) as e:
        build_network("c4k3s1-BN-PLIF-MPk2s2-DP-FC10-PLIF", (2, 8, 8), 4, **{option: value})
    assert str(e.value) == message


def test_the_cli_refuses_with_the_same_check():
    from plif.train.checks import check_values
    from plif.train.config import TrainConfig, resolve_config

    cfg = dataclasses.replace(resolve_config(TrainConfig(dataset="fashion-mnist")), detach_reset="False")
    with pytest.raises(ValueError, match="^--detach-reset must be bool, got 'False'$"):
        check_values(cfg)


def test_frames_without_a_time_step_are_refused_in_one_line():
    net = build_network("c4k3s1-BN-PLIF-MPk2s2-FC10-PLIF", (2, 8, 8), 4)
    with pytest.raises(ValueError, match=r"^net\(x\): frames \[T, B, \.\.\.\] need T >= 1 time-steps, got \[0, 3, 2, 8, 8\]$"):
        net(torch.rand(0, 3, 2, 8, 8))
