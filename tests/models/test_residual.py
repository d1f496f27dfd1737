"""plif's residual zoo: parameter counts against SpikingJelly's models of the same structure, the same
function as SpikingJelly's sew_resnet18 given its weights, the SEW event networks' counts from their
published structure, and the one-line refusals."""
from __future__ import annotations

import pytest
import torch

from plif.models.residual import RESIDUAL_ZOO, parameter_count, sew_7b_net, sew_resnet18, sew_wide_7b_net


def _sj():
    from sj_testing import sj

    return sj()


def _count_meta(build):
    with torch.device("meta"):
        return parameter_count(build())


@pytest.mark.parametrize("name,sj_name", [("sew-resnet18", "sew_resnet18"), ("sew-resnet34", "sew_resnet34"),
                                          ("spiking-resnet18", "spiking_resnet18"),
                                          ("spiking-resnet34", "spiking_resnet34")])
def test_resnet_counts_match_spikingjelly(name, sj_name):
    s = _sj()
    module = s.sew_resnet if name.startswith("sew") else s.spiking_resnet
    kw = dict(spiking_neuron=s.neuron.ParametricLIFNode)
    if name.startswith("sew"):
        kw["cnf"] = "ADD"
    theirs = _count_meta(lambda: getattr(module, sj_name)(num_classes=1000, **kw))
    factory = RESIDUAL_ZOO[name][0]
    ours = _count_meta(lambda: factory((3, 224, 224), 1000, fused=False))
    assert ours == theirs
    # the CIFAR stem: the same network with a 3x3 first convolution (64 x 3 x 9 weights instead of x 49)
    cifar = _count_meta(lambda: factory((3, 32, 32), 1000, fused=False))
    assert cifar == theirs - 64 * 3 * (49 - 9)


def test_event_network_counts_from_the_published_structure():
    """7B-Net (DVS128 Gesture) and Wide-7B-Net (CIFAR10-DVS) as Spike-Element-Wise-ResNet's smodels.py build
    them: 1x1 conv-BN-PLIF where the channels change, SEW blocks of two 3x3 conv-BN-PLIF, FC with bias."""
    def up(cin, c):
        return cin * c + 2 * c + 1

    def sew(c):
        return 2 * (9 * c * c + 2 * c + 1)

    assert _count_meta(lambda: sew_7b_net((2, 128, 128), 11, fused=False)) == up(2, 32) + 7 * sew(32) + 32 * 11 + 11
    wide = up(2, 64) + 4 * sew(64) + up(64, 128) + 3 * sew(128) + 128 * 10 + 10
    assert _count_meta(lambda: sew_wide_7b_net((2, 128, 128), 10, fused=False)) == wide


@pytest.mark.parametrize("cnf", ["ADD", "AND", "IAND"])
def test_sew_resnet18_is_spikingjellys_given_its_weights(cnf):
    """A SpikingJelly sew_resnet18 converted by plif.from_spikingjelly and plif's own zoo entry hold the same
    state_dict keys; loaded with the same weights they compute the same outputs (float64)."""
    s = _sj()
    from plif.interop import from_spikingjelly

    torch.manual_seed(0)
    theirs = s.sew_resnet.sew_resnet18(cnf=cnf, num_classes=10, spiking_neuron=s.neuron.ParametricLIFNode,
                                       surrogate_function=s.surrogate.ATan(), detach_reset=True)
    s.functional.set_step_mode(theirs, "m")
    converted = from_spikingjelly(theirs.double(), fuse=False)
    ours = sew_resnet18((3, 16, 16), 10, connect=cnf, stem="imagenet", fused=False).double()
    assert list(ours.state_dict()) == list(converted.state_dict())
    ours.load_state_dict(converted.state_dict())
    x = torch.rand(2, 1, 3, 16, 16, dtype=torch.float64) * 3
    with torch.no_grad():
        want = theirs(x)
        got = ours(x)
    assert want.abs().max() > 0
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-12)


def test_every_entry_builds_and_maps_time_first():
    for name, (factory, _) in RESIDUAL_ZOO.items():
        event = "7b" in name
        shape = (2, 128, 128) if event else (3, 32, 32)
        with torch.device("meta"):
            net = factory(shape, 7, fused=False, width=4)
            out = net(torch.empty(2, 1, *shape))
        assert tuple(out.shape) == (2, 1, 7), name


def test_fused_by_default():
    import plif

    net = sew_resnet18((3, 32, 32), 10, width=8)
    assert plif.fused_blocks(net)


@pytest.mark.parametrize("call,match", [
    (lambda: sew_resnet18((3, 32), 10, fused=False), r"input_shape \(C, H, W\), got \(3, 32\)"),
    (lambda: sew_resnet18((3, 32, 32), 10, connect="OR", fused=False), r"connect must be one of ADD, AND, IAND"),
    (lambda: sew_resnet18((3, 32, 32), 10, stem="mnist", fused=False), r"stem must be 'imagenet' or 'cifar'"),
    (lambda: sew_resnet18((3, 32, 32), 10, neuron="QIF", fused=False), r"unknown neuron 'QIF'"),
    (lambda: sew_7b_net((2, 64, 64), 11, fused=False), r"7 2x2 max-pools need an input of at least 128 pixels"),
])
def test_bad_options_refused(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_every_entry_is_a_named_model_factory():
    """``plif train --model NAME`` finds each zoo entry through plif.models.factories, without importing it first."""
    import importlib

    from plif.models.factories import MODEL_FACTORIES

    for name, (factory, _) in RESIDUAL_ZOO.items():
        module, attr = MODEL_FACTORIES[name].split(":")
        assert getattr(importlib.import_module(module), attr) is factory, name


def test_plif_zoo_lists_the_residual_networks(capsys):
    from plif.cli.main import main

    assert main(["zoo"]) == 0
    out = capsys.readouterr().out
    assert "sew-7b-net        dvs128-gesture  input=2x128x128  params=     130,426" in out
    assert "plif train --model sew-resnet18 --dataset cifar10" in out
    assert main(["zoo", "sew-wide-7b-net"]) == 0
    out = capsys.readouterr().out
    assert "SEWEventNet(" in out and "params=   1,192,218" in out


def test_bench_train_times_a_zoo_network():
    from plif.bench.train import bench_train

    rows = bench_train("dvs128-gesture", (1,), "cpu", ["auto+none"], 0, 1, 1, kernels=False, model="sew-7b-net")
    assert [(r.variant, r.memory) for r in rows] == [("auto+none", "none")] and rows[0].ms_per_step > 0
    with pytest.raises(ValueError, match=r"unknown model 'resnet'; valid: sew-resnet18, "):
        bench_train("cifar10", (1,), "cpu", ["auto"], model="resnet")
    with pytest.raises(ValueError, match=r"unknown variant 'naive' for --model sew-7b-net; valid: auto, auto\+none"):
        bench_train("dvs128-gesture", (1,), "cpu", ["naive"], model="sew-7b-net")
