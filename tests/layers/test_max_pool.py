import pytest
import torch
from torch import nn

from plif.kernels.cpu_pool import cpu_pool_supports
from plif.layers import MaxPool2d
from plif.models import build_network


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.int64 if t.dtype == torch.float64 else torch.int32)


def _special(x: torch.Tensor) -> torch.Tensor:
    """NaNs, -inf and zeros of both signs where windows see them (ties everywhere else)."""
    x[0, 0, 0, :3] = float("nan")
    x[0, 1, 1, 1] = float("-inf")
    x[1, 1] = float("-inf")
    x[2, 3] = torch.where(torch.rand(x.shape[2:]) < 0.5, -0.0, 0.0)
    return x


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("k, s, h, w", [(2, 2, 28, 28), (2, 2, 7, 9), (3, 2, 11, 13), (3, 1, 8, 8), (2, 3, 11, 13),
                                        (4, 4, 9, 8), (1, 1, 3, 4)])
def test_values_and_gradients_bit_identical_to_nn_maxpool(dtype, k, s, h, w):
    """The same element of each window (first maximum row by row, last NaN), so the same values,
    bit for bit (-0.0 and NaN payloads included), and the same gradients (overlapping windows too)."""
    torch.manual_seed(k * 100 + s * 10 + h)
    x = _special(torch.randint(0, 3, (3, 4, h, w)).to(dtype))
    assert cpu_pool_supports(x, k, s)
    a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
    ya, yb = MaxPool2d(k, s)(a), nn.functional.max_pool2d(b, k, s)
    grad = torch.randn(ya.shape, dtype=dtype)
    ya.backward(grad)
    yb.backward(grad)
    assert torch.equal(_bits(ya), _bits(yb))
    assert torch.equal(a.grad, b.grad)
    with torch.no_grad():  # evaluation goes through the kernel as well
        assert torch.equal(_bits(MaxPool2d(k, s)(x)), _bits(yb.detach()))


def test_other_cases_are_nn_maxpool():
    """Padding, channels-last, bf16 and 3-d input take nn.MaxPool2d's own path, with its results."""
    x = torch.randn(2, 3, 8, 8)
    for pool, inp in [(MaxPool2d(2, 2, padding=1), x), (MaxPool2d(2, 2), x.to(memory_format=torch.channels_last)),
                      (MaxPool2d(2, 2), x.bfloat16()), (MaxPool2d(2, 2), x[0]), (MaxPool2d(3, 2, ceil_mode=True), x)]:
        ref = nn.MaxPool2d(pool.kernel_size, pool.stride, pool.padding, ceil_mode=pool.ceil_mode)
        assert torch.equal(pool(inp), ref(inp))
    assert not cpu_pool_supports(x.to(memory_format=torch.channels_last), 2, 2)
    assert not cpu_pool_supports(x, 17, 17)


def test_networks_use_it_and_keep_the_state_dict():
    net = build_network("c4k3s1-BN-PLIF-MPk2s2-FC10", (1, 8, 8), 2)
    pool = net.layers[3].layer
    assert type(pool) is MaxPool2d and isinstance(pool, nn.MaxPool2d)
    assert list(net.state_dict()) == list(build_network("c4k3s1-BN-PLIF-APk2s2-FC10", (1, 8, 8), 2).state_dict())


def test_custom_ops_pass_opcheck():
    from plif.kernels.cpu_pool import _pool, _pool_backward
    x = torch.randint(0, 2, (2, 3, 6, 7)).float().requires_grad_()
    torch.library.opcheck(_pool, (x, 2, 2))
    out, place = _pool(x, 3, 2)
    torch.library.opcheck(_pool_backward, (torch.randn(out.shape), place, 6, 7, 3, 2))


def test_compiles_fullgraph_with_changing_batch_size():
    """Built (library loaded) before tracing, the kernel is one opaque op in a fullgraph trace
    whose batch becomes symbolic: same values and gradients as eager."""
    from plif.layers import TimeFolded
    torch._dynamo.reset()
    pool = TimeFolded(MaxPool2d(2, 2))
    compiled = torch.compile(pool, fullgraph=True, backend="aot_eager")
    for b in (2, 3, 5):
        x = torch.randint(0, 2, (2, b, 3, 8, 7)).float()
        a, e = x.clone().requires_grad_(), x.clone().requires_grad_()
        ya, ye = compiled(a), pool(e)
        g = torch.randn(ya.shape)
        ya.backward(g)
        ye.backward(g)
        assert torch.equal(ya, ye) and torch.equal(a.grad, e.grad)
