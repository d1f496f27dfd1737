import pytest
import torch
from torch import nn

from plif.layers import TimeFolded
from plif.layers.spike_pool import SpikeMaxPool2d, spike_max_pool2d


@pytest.mark.parametrize("k, s", [(2, 2), (3, 2), (3, 1), (2, 3), (4, 4), ((2, 3), (2, 3)), ((3, 2), (2, 1)),
                                  (2, (1, 2))])
@pytest.mark.parametrize("kind", ["spikes", "ties", "float"])
def test_values_and_gradients_bit_identical_to_nn_maxpool(k, s, kind):
    """First maximal element of each window gets the gradient, exactly as nn.MaxPool2d routes it
    (all-zero windows and overlapping windows included)."""
    g = torch.Generator().manual_seed(len(str((k, s))))
    if kind == "spikes":
        x = (torch.rand(3, 4, 11, 13, generator=g) > 0.7).float()
    elif kind == "ties":
        x = torch.randint(0, 3, (3, 4, 11, 13), generator=g).float()
    else:
        x = torch.randn(3, 4, 11, 13, generator=g)
    a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
    ya, yb = spike_max_pool2d(a, k, s), nn.functional.max_pool2d(b, k, s)
    grad = torch.randn(ya.shape, generator=g)
    ya.backward(grad)
    yb.backward(grad)
    assert torch.equal(ya, yb) and torch.equal(a.grad, b.grad)


def test_saves_two_bytes_per_output():
    x = (torch.rand(2, 3, 8, 8) > 0.5).float().requires_grad_()
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        spike_max_pool2d(x, 2)
    assert [(t.dtype, tuple(t.shape)) for t in saved] == [(torch.int16, (2, 3, 4, 4))]


def test_module_over_time_and_checks():
    pool = SpikeMaxPool2d(nn.MaxPool2d(2, 2))
    x = (torch.rand(3, 2, 4, 6, 6) > 0.5).float()
    assert torch.equal(pool(x), TimeFolded(nn.MaxPool2d(2, 2))(x))
    with pytest.raises(ValueError, match="padding"):
        SpikeMaxPool2d(nn.MaxPool2d(2, 2, padding=1))
    with pytest.raises(ValueError, match="ceil_mode"):
        SpikeMaxPool2d(nn.MaxPool2d(2, 2, ceil_mode=True))


@pytest.mark.parametrize("k, s", [((2, 3), None), ((3, 2), (2, 1)), (2, (2, 1)), ((1, 2), None)])
def test_a_rectangular_window_or_stride_pools_as_written(k, s):
    """The module keeps both sides of the window and stride (it kept ``k[0], s[0]`` on both axes)."""
    x = (torch.rand(3, 2, 4, 9, 10, generator=torch.Generator().manual_seed(0)) > 0.5).float()
    a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
    ya, yb = SpikeMaxPool2d(nn.MaxPool2d(k, s))(a), TimeFolded(nn.MaxPool2d(k, s))(b)
    ya.sum().backward()
    yb.sum().backward()
    assert ya.shape == yb.shape and torch.equal(ya, yb) and torch.equal(a.grad, b.grad)
    with pytest.raises(ValueError, match=r"\[N, C, H, W\]"):
        spike_max_pool2d(x, 2)


def test_compiles_fullgraph_with_changing_batch_size():
    """conv -> neuron -> spike max-pool -> conv under torch.compile(fullgraph=True), batch 2 then 3 and 5
    (the batch dimension becomes symbolic after the second size): same outputs and gradients as eager."""
    from plif.neurons import PLIF
    torch.manual_seed(0)
    net = nn.Sequential(TimeFolded(nn.Conv2d(1, 4, 3, 1, 1, bias=False)), PLIF(backend="bptt", v_threshold=0.3),
                        SpikeMaxPool2d(nn.MaxPool2d(2, 2)), TimeFolded(nn.Conv2d(4, 4, 3, 1, 1, bias=False)))
    torch._dynamo.reset()
    compiled = torch.compile(net, fullgraph=True, backend="aot_eager")
    for B in (2, 3, 5):
        x = torch.rand(2, B, 1, 8, 8)
        y = compiled(x)
        y.square().sum().backward()
        got = [p.grad.clone() for p in net.parameters()]
        net.zero_grad()
        ref = net(x)
        ref.square().sum().backward()
        assert torch.allclose(y, ref)
        assert all(torch.allclose(a, p.grad, atol=1e-6) for a, p in zip(got, net.parameters()))
        net.zero_grad()


def test_wide_rows_fall_back_to_int32_offsets():
    """An offset dy*W + dx beyond int16 (k=3, W=16500) is kept as int32 and still routes exactly."""
    x = torch.randn(1, 1, 3, 16500, generator=torch.Generator().manual_seed(0))
    a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        ya = spike_max_pool2d(a, 3, 2)
    assert saved[0].dtype == torch.int32
    yb = nn.functional.max_pool2d(b, 3, 2)
    ya.backward(torch.ones_like(ya))
    yb.backward(torch.ones_like(yb))
    assert torch.equal(ya, yb) and torch.equal(a.grad, b.grad)


def test_backward_fills_no_zero_gradient_for_the_offsets():
    from plif_testing import ZeroFills

    x = torch.randn(4, 3, 8, 8, requires_grad=True)
    out = spike_max_pool2d(x, 2)
    with ZeroFills() as fills:
        out.sum().backward()
    assert fills.shapes == [], fills.shapes
