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


@pytest.mark.parametrize("with_mask", [False, True])
def test_linear_under_bf16_autocast_is_bit_identical_to_autocast_linear(with_mask, monkeypatch):
    """Under CPU autocast the weight is cast inside and its gradient formed in fp32 a block of rows at
    a time (blocks of 3 rows here, so 7 rows take three): the same output, input gradient and fp32
    weight gradient as autocast's own nn.Linear, whose bf16 gradient autograd widens."""
    import plif.layers.spike_input as si

    monkeypatch.setattr(si, "_CHUNK_BYTES", 3 * 24 * 2)
    torch.manual_seed(0)
    fc = nn.Linear(24, 7, bias=False)
    x = spikes(3, 4, 24)
    keep = (torch.rand(4, 24) > 0.5).float() / 0.5 if with_mask else None

    def under_autocast(fn):  # the forward under autocast, backward outside it, as plif's step runs them
        def run(x):
            with torch.autocast("cpu", torch.bfloat16):
                return fn(x)
        return run

    a = grads_of(under_autocast(lambda x: TimeFolded(fc)(x if keep is None else x * keep)), x, [fc.weight])
    b = grads_of(under_autocast(lambda x: SpikeLinear(fc)(x, keep)), x, [fc.weight])
    assert a[0].dtype == b[0].dtype == torch.bfloat16 and a[2].dtype == b[2].dtype == torch.float32
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


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_packed_spikes_are_the_nonzero_elements_and_unpack_to_the_same_floats(dtype):
    """pack_spikes is ``s != 0`` exactly (a cast to bool: -0 is zero, NaN is not), one byte per
    element, and unpack_spikes gives back 0/1 in any dtype, times the dropout mask."""
    from plif.layers.spike_input import pack_spikes, unpack_spikes

    s = torch.tensor([0.0, 1.0, -0.0, float("nan"), 2.0, 0.0], dtype=dtype).reshape(2, 3)
    packed = pack_spikes(s)
    assert packed.dtype == torch.bool and packed.element_size() == 1
    assert packed.tolist() == (s != 0).tolist() == [[False, True, False], [True, True, False]]
    spikes = (torch.rand(4, 3, 5, generator=torch.Generator().manual_seed(0)) < 0.3).to(dtype)
    keep = torch.full((3, 5), 2.0, dtype=dtype)
    assert torch.equal(unpack_spikes(pack_spikes(spikes), None, dtype), spikes)
    assert torch.equal(unpack_spikes(pack_spikes(spikes), keep, torch.float32), spikes.float() * 2)


def test_a_large_input_gets_its_gradients_in_two_calls_bit_identical_and_the_stand_in_is_not_written(monkeypatch):
    # above _ONE_CALL_BYTES each gradient has its own call; the input's gradient is given a stand-in for
    # the input that ATen does not write out whole (a one-element view expanded to the shape was cloned)
    import plif.layers.spike_input as si
    from torch.profiler import profile

    monkeypatch.setattr(si, "_ONE_CALL_BYTES", 0)
    torch.manual_seed(0)
    conv = nn.Conv2d(3, 5, 3, 1, 1, bias=False)
    x = spikes(2, 3, 3, 9, 9)
    a = grads_of(TimeFolded(conv), x, [conv.weight])
    b = grads_of(SpikeConv2d(conv), x, [conv.weight])
    assert all(torch.equal(u, v) for u, v in zip(a, b))
    g = torch.randn(6, 5, 9, 9)
    with profile() as prof:
        si.conv_input_grad(g, (6, 3, 9, 9), conv.weight, si.conv_args(conv))
    assert not {"aten::clone", "aten::copy_"} & {e.name for e in prof.events()}
