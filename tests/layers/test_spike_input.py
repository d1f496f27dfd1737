import pytest
import torch
from torch import nn

from plif.layers import TimeFolded
from plif.layers.spike_input import SpikeConv2d, SpikeConvBN, SpikeLinear, conv_refusal


def spikes(*shape, seed=0):
    return (torch.rand(*shape, generator=torch.Generator().manual_seed(seed)) > 0.6).float()


def grads_of(fn, x, params):
    x = x.clone().requires_grad_()
    y = fn(x)
    y.backward(torch.randn(y.shape, generator=torch.Generator().manual_seed(9)))
    out = [y.detach(), x.grad] + [p.grad.clone() for p in params]
    for p in params:
        p.grad = None
    return out


@pytest.mark.parametrize("k, s, p", [(3, 1, 1), (3, 2, 0), (1, 1, 0)])
def test_conv_bit_identical(k, s, p):
    torch.manual_seed(0)
    conv = nn.Conv2d(3, 5, k, s, p, bias=False)
    x = spikes(2, 3, 3, 9, 9)
    a = grads_of(TimeFolded(conv), x, [conv.weight])
    b = grads_of(SpikeConv2d(conv), x, [conv.weight])
    assert all(torch.equal(u, v) for u, v in zip(a, b))


@pytest.mark.parametrize("with_mask", [False, True])
def test_linear_bit_identical(with_mask):
    torch.manual_seed(0)
    fc = nn.Linear(24, 7, bias=False)
    x = spikes(3, 4, 24)
    keep = (torch.rand(4, 24) > 0.5).float() / 0.5 if with_mask else None
    a = grads_of(lambda x: TimeFolded(fc)(x if keep is None else x * keep), x, [fc.weight])
    b = grads_of(lambda x: SpikeLinear(fc)(x, keep), x, [fc.weight])
    assert all(torch.equal(u, v) for u, v in zip(a, b))


def test_conv_bn_bit_identical_with_running_statistics():
    torch.manual_seed(0)
    conv, bn = nn.Conv2d(3, 5, 3, 1, 1, bias=False), nn.BatchNorm2d(5)
    bn2 = nn.BatchNorm2d(5)
    bn2.load_state_dict(bn.state_dict())
    x = spikes(2, 3, 3, 8, 8)
    a = grads_of(lambda x: TimeFolded(bn)(TimeFolded(conv)(x)), x, [conv.weight, bn.weight, bn.bias])
    b = grads_of(SpikeConvBN(TimeFolded(conv), TimeFolded(bn2)), x, [conv.weight, bn2.weight, bn2.bias])
    assert all(torch.equal(u, v) for u, v in zip(a, b))
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        assert torch.equal(getattr(bn, name), getattr(bn2, name)), name


def test_only_one_byte_inputs_and_small_tensors_are_saved():
    torch.manual_seed(0)
    conv, bn = nn.Conv2d(3, 5, 3, 1, 1, bias=False), nn.BatchNorm2d(5)
    x = spikes(2, 3, 3, 8, 8).requires_grad_()
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        SpikeConvBN(TimeFolded(conv), TimeFolded(bn))(x)
    big = [t for t in saved if t.numel() >= x.numel()]
    assert [t.dtype for t in big] == [torch.bool]


def test_eval_mode_uses_the_plain_layer():
    conv = nn.Conv2d(3, 5, 3, 1, 1, bias=False).eval()
    x = spikes(2, 3, 3, 8, 8)
    assert torch.equal(SpikeConv2d(conv)(x), TimeFolded(conv)(x))


@pytest.mark.parametrize("mode", ["reflect", "circular", "replicate"])
def test_a_conv_that_pads_by_itself_runs_as_it_is(mode):
    """``padding_mode`` other than zeros: the one-byte layers ran ``F.conv2d`` with zero padding in its
    place (spikes and gradients off by 1); they run the layer itself, bit for bit (issue 45.1)."""
    torch.manual_seed(0)
    conv, bn = nn.Conv2d(3, 5, 3, 1, 1, bias=False, padding_mode=mode), nn.BatchNorm2d(5)
    bn2 = nn.BatchNorm2d(5)
    x = spikes(2, 3, 3, 8, 8)
    ref = grads_of(lambda x: TimeFolded(bn)(TimeFolded(conv)(x)), x, [conv.weight])
    assert all(torch.equal(u, v) for u, v in zip(grads_of(lambda x: TimeFolded(bn)(SpikeConv2d(conv)(x)), x,
                                                          [conv.weight]), ref))
    assert all(torch.equal(u, v) for u, v in zip(grads_of(SpikeConvBN(TimeFolded(conv), TimeFolded(bn2)), x,
                                                          [conv.weight]), ref))


def test_conv_refusal_names_what_f_conv2d_would_compute_otherwise():
    class Standardised(nn.Conv2d):
        def forward(self, x):
            return super().forward(x) * 2

    assert conv_refusal(nn.Conv2d(2, 3, 3, bias=False)) is None
    assert conv_refusal(nn.Conv2d(2, 3, 3, bias=False, padding_mode="reflect")) == "padding_mode='reflect'"
    assert conv_refusal(nn.Conv2d(2, 3, 3)) == "the convolution has a bias"
    assert conv_refusal(nn.Conv2d(2, 3, 3, bias=False, padding="same")) == "padding='same'"
    assert conv_refusal(Standardised(2, 3, 3, bias=False)) == "Standardised is not a plain nn.Conv2d"
