"""plif.from_spikingjelly computes SpikingJelly's function: outputs, every parameter's gradient and
BatchNorm's running statistics within 1e-9 (relative to each tensor's largest value) in float64, with
dropout off and SpikingJelly's state reset before the sample.

The matrix, covered without running every product (float64 ResNet-18 on one core costs seconds):
- each zoo model once with ParametricLIFNode: FashionMNISTNet (channels=16), sew_resnet18 with
  ADD, AND and IAND, spiking_resnet18, spiking_vgg11_bn (its classifier narrowed, see below);
- the neuron types (IF, LIF, PLIF) on FashionMNISTNet, the smallest;
- the settings (soft reset, detach_reset off, thresholds, each surrogate) on a two-layer net;
- float32: the same spikes as SpikingJelly on FashionMNISTNet (this seed has no potential within
  float32 rounding of the threshold, where the two may round differently).
Inputs: 3x16x16 (1x28x28 for FashionMNISTNet), B=1-2, T=2-3.
"""
from __future__ import annotations

import pytest
import torch

from sj_testing import sj

import plif
from plif.bench.residual_twin import sj_key
from plif.interop import from_spikingjelly


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    scale = max(float(a.abs().max()), float(b.abs().max()), 1e-300)
    return float((a - b).abs().max()) / scale


def _run(net, x, r):
    out = net(x)
    (out * r).sum().backward()
    return out.detach()


def check_same(s, model, x, tol=1e-9, fused=True, **convert):
    """Convert ``model`` (multi-step, float64), run both on ``x`` in training mode, compare everything;
    ``fused``: the conversion runs some conv -> BN -> neuron chain as plif's fused block."""
    s.functional.set_step_mode(model, "m")
    for m in model.modules():
        if type(m).__name__ == "Dropout":
            m.p = 0.0
    model = model.double().train()
    net = from_spikingjelly(model, **convert)
    assert bool(plif.fused_blocks(net)) == fused, plif.fused_blocks(net)
    torch.manual_seed(1)
    out_sj = model(x)
    r = torch.randn_like(out_sj)
    (out_sj * r).sum().backward()
    s.functional.reset_net(model)
    out = _run(net, x, r)
    assert out.shape == out_sj.shape
    assert _rel(out, out_sj.detach()) <= tol, "outputs differ"
    sj_params = dict(model.named_parameters())
    names = [n for n, _ in net.named_parameters()]
    assert sorted(sj_key(n) for n in names) == sorted(sj_params), "not the same parameters"
    for name, p in net.named_parameters():
        q = sj_params[sj_key(name)]
        assert p is not q
        assert p.grad is not None and q.grad is not None, name
        assert _rel(p.grad, q.grad) <= tol, f"gradient of {name}: {_rel(p.grad, q.grad):.3g}"
    sj_buffers = dict(model.named_buffers())
    for name, b in net.named_buffers():
        if sj_key(name) in sj_buffers:
            assert _rel(b.double(), sj_buffers[sj_key(name)].double()) <= tol, f"buffer {name}"
    return net, model


def _plif_kwargs(s):
    return dict(spiking_neuron=s.neuron.ParametricLIFNode, surrogate_function=s.surrogate.ATan(), detach_reset=True)


def _firing(model):
    """``model`` with its Linear weights scaled up so that the output layer fires within T=3 (a comparison
    of all-zero outputs would be vacuous)."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.Linear):
                m.weight.mul_(6)
    return model


def _image(B=1, T=2, shape=(3, 32, 32)):
    torch.manual_seed(0)
    return torch.rand(T, B, *shape, dtype=torch.float64)


@pytest.mark.parametrize("neuron", ["ParametricLIFNode", "LIFNode", "IFNode"])
def test_fashion_mnist_net(neuron):
    s = sj()
    torch.manual_seed(0)
    kw = dict(spiking_neuron=getattr(s.neuron, neuron), surrogate_function=s.surrogate.ATan(), detach_reset=True)
    model = _firing(s.plif_net.FashionMNISTNet(channels=16, **kw))
    x = _image(B=2, T=3, shape=(1, 28, 28)) * 4
    net, _ = check_same(s, model, x)
    assert net(x).abs().sum() > 0, "nothing fired: the comparison would be vacuous"


@pytest.mark.parametrize("cnf", ["ADD", "AND", "IAND"])
def test_sew_resnet18(cnf):
    s = sj()
    torch.manual_seed(0)
    check_same(s, s.sew_resnet.sew_resnet18(cnf=cnf, num_classes=10, **_plif_kwargs(s)), _image(B=1, T=2, shape=(3, 16, 16)) * 3)


def test_spiking_resnet18():
    s = sj()
    torch.manual_seed(0)
    check_same(s, s.spiking_resnet.spiking_resnet18(num_classes=10, **_plif_kwargs(s)), _image(B=1, T=2, shape=(3, 16, 16)) * 3)


def test_spiking_vgg11_bn():
    """SpikingJelly's spiking_vgg11_bn, its 102M-weight classifier narrowed to keep float64 on one core
    small: 1x1 average pooling and 512 -> 64 -> 64 -> 10 with the same layer types (Linear, neuron,
    Dropout); the features (conv with bias -> BN -> neuron, max-pools) are SpikingJelly's as built."""
    s = sj()
    torch.manual_seed(0)
    model = s.spiking_vgg.spiking_vgg11_bn(num_classes=10, **_plif_kwargs(s))
    L, N = s.layer, s.neuron
    model.avgpool = L.AdaptiveAvgPool2d((1, 1))
    k = _plif_kwargs(s)
    k.pop("spiking_neuron")
    model.classifier = torch.nn.Sequential(L.Linear(512, 64), N.ParametricLIFNode(**k), L.Dropout(),
                                           L.Linear(64, 64), N.ParametricLIFNode(**k), L.Dropout(), L.Linear(64, 10))
    check_same(s, model, _image(B=2, T=2) * 3, fused=False)  # its convolutions have a bias: nothing fuses


@pytest.mark.parametrize("surrogate,settings", [
    ("ATan", dict(v_reset=None, detach_reset=False)),
    ("Sigmoid", dict(v_threshold=0.7, v_reset=-0.2)),
    ("PiecewiseQuadratic", dict(detach_reset=False)),
    ("Rect", dict(v_reset=None)),
])
@pytest.mark.parametrize("neuron", ["IFNode", "LIFNode", "ParametricLIFNode"])
def test_neuron_settings(neuron, surrogate, settings):
    s = sj()
    torch.manual_seed(0)
    extra = {"LIFNode": dict(tau=3.0), "ParametricLIFNode": dict(init_tau=1.5)}.get(neuron, {})
    sn = getattr(s.neuron, neuron)(surrogate_function=getattr(s.surrogate, surrogate)(), **settings, **extra)
    model = torch.nn.Sequential(s.layer.Linear(6, 16), sn, s.layer.Linear(16, 4))
    x = torch.randn(5, 3, 6, dtype=torch.float64) * 2
    check_same(s, model, x, fused=False)


def test_float32_same_spikes():
    s = sj()
    torch.manual_seed(0)
    model = _firing(s.plif_net.FashionMNISTNet(channels=16, **_plif_kwargs(s)))
    s.functional.set_step_mode(model, "m")
    for m in model.modules():
        if type(m).__name__ == "Dropout":
            m.p = 0.0
    net = from_spikingjelly(model)
    x = _image(B=2, T=3, shape=(1, 28, 28)).float() * 4
    with torch.no_grad():
        want = model(x)
        got = net(x)
    assert want.abs().sum() > 0, "nothing fired: the comparison would be vacuous"
    torch.testing.assert_close(got, want, rtol=0, atol=0)
