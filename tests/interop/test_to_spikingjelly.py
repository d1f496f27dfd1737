"""The way back (issue 56.5): a converted model trained in plif loads into SpikingJelly with
``plif.to_spikingjelly`` and computes the same outputs in float64; what does not match is refused in
one line; a ``--model`` factory that returns an unconverted SpikingJelly model is refused, saying to
call ``plif.from_spikingjelly``."""
from __future__ import annotations

import pytest
import torch

from sj_testing import sj

import plif
from plif.interop import ConversionError
from plif.interop.to_spikingjelly import spikingjelly_names


def _fmnist(s, seed, channels=8, neuron="ParametricLIFNode"):
    """SpikingJelly's FashionMNISTNet, multi-step, float64, dropout off, its Linear weights scaled so
    that the output layer fires (equal all-zero outputs would prove nothing)."""
    torch.manual_seed(seed)
    m = s.plif_net.FashionMNISTNet(channels=channels, spiking_neuron=getattr(s.neuron, neuron),
                                   surrogate_function=s.surrogate.ATan(), detach_reset=True)
    s.functional.set_step_mode(m, "m")
    for mm in m.modules():
        if type(mm).__name__ == "Dropout":
            mm.p = 0.0
        if isinstance(mm, torch.nn.Linear):
            with torch.no_grad():
                mm.weight.mul_(6)
    return m.double()


def _trained(net, x, steps=2):
    """A few SGD steps in plif: every weight, w and BatchNorm statistic moves away from SpikingJelly's."""
    opt = torch.optim.SGD(net.parameters(), lr=0.5)
    gen = torch.Generator().manual_seed(3)
    for _ in range(steps):
        opt.zero_grad()
        out = net(x)
        (out * torch.randn(out.shape, generator=gen, dtype=out.dtype)).sum().backward()
        opt.step()
    return net


@pytest.mark.parametrize("neuron", ["ParametricLIFNode", "LIFNode"])
def test_trained_in_plif_loaded_back_computes_the_same(neuron):
    s = sj()
    x = torch.rand(3, 2, 1, 28, 28, generator=torch.Generator().manual_seed(1), dtype=torch.float64) * 4
    source = _fmnist(s, 0, neuron=neuron)
    net = _trained(plif.from_spikingjelly(source), x)
    fresh = _fmnist(s, 5, neuron=neuron)  # other weights: everything must come from net
    assert plif.to_spikingjelly(net, fresh) is fresh
    names = spikingjelly_names(fresh)
    theirs = fresh.state_dict()
    assert "conv_fc.0.layer.weight" in names and names["conv_fc.0.layer.weight"] == "conv_fc.0.weight"
    for key, t in net.state_dict().items():
        assert torch.equal(theirs[names[key]], t), key
    net.train()
    fresh.train()
    s.functional.reset_net(fresh)
    with torch.no_grad():
        want, got = net(x), fresh(x)
    assert want.abs().sum() > 0, "nothing fired: the comparison would be vacuous"
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
    # and the other way once more: the SpikingJelly model with plif's weights converts to the same function
    again = plif.from_spikingjelly(fresh).train()
    with torch.no_grad():
        torch.testing.assert_close(again(x), want, rtol=0, atol=1e-12)


def test_eval_mode_uses_the_running_statistics_trained_in_plif():
    s = sj()
    x = torch.rand(3, 2, 1, 28, 28, generator=torch.Generator().manual_seed(2), dtype=torch.float64) * 4
    net = _trained(plif.from_spikingjelly(_fmnist(s, 0)), x, steps=3)
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_var.mul_(0.05)  # a spread that makes the eval pass fire
    back = plif.to_spikingjelly(net, _fmnist(s, 7)).eval()
    net.eval()
    s.functional.reset_net(back)
    with torch.no_grad():
        want, got = net(x), back(x)
    assert want.abs().sum() > 0
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)


def test_a_model_of_another_shape_is_refused_and_nothing_loaded():
    s = sj()
    net = plif.from_spikingjelly(_fmnist(s, 0, channels=8))
    other = _fmnist(s, 1, channels=4)
    before = {k: v.clone() for k, v in other.state_dict().items()}
    with pytest.raises(ConversionError) as e:
        plif.to_spikingjelly(net, other)
    assert "\n" not in str(e.value) and "is [8, 1, 3, 3] in model" in str(e.value)
    assert all(torch.equal(before[k], v) for k, v in other.state_dict().items())
    with pytest.raises(ConversionError, match="model is not plif.from_spikingjelly"):
        plif.to_spikingjelly(torch.nn.Sequential(plif.PLIF()), other)
    with pytest.raises(TypeError, match="to_spikingjelly sj_model takes a torch.nn.Module, got NoneType"):
        plif.to_spikingjelly(net, None)


FACTORY = """
from spikingjelly.activation_based import functional, layer, neuron
import torch


def make(num_classes):
    net = torch.nn.Sequential(layer.Flatten(), layer.Linear(784, num_classes), neuron.LIFNode())
    functional.set_step_mode(net, "m")
    return net
"""


def test_a_model_factory_returning_an_unconverted_spikingjelly_model_is_refused(tmp_path, tiny_fashion, capsys):
    """It passed the checks and died in training with PyTorch's "backward through the graph a second
    time" before."""
    sj()
    from plif.cli.main import main

    path = tmp_path / "sj_model.py"
    path.write_text(FACTORY)
    out = tmp_path / "run"
    rc = main(["train", "--model", f"{path}:make", "--T", "2", "--batch-size", "20", "--epochs", "1",
               "--max-train-samples", "40", "--device", "cpu", "--data-dir", str(tiny_fashion), "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1, err
    assert f"--model {path}:make" in err[0] and "SpikingJelly model (LIFNode at '2'" in err[0]
    assert "return plif.from_spikingjelly(model)" in err[0]
    assert not out.exists()
