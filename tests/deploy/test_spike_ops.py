import pytest
import torch
import torch.nn.functional as F
from torch import nn

from plif.deploy.spike_ops import GatherConv2d, GatherLinear, check_binary, gather_conv2d, gather_linear


def _spikes(*shape, rate=0.2, dtype=torch.float64):
    return (torch.rand(*shape) < rate).to(dtype)


@pytest.mark.parametrize("rate", [0.0, 0.05, 0.5, 1.0])
def test_gather_linear_matches_dense(rate):
    s = _spikes(37, 53, rate=rate)
    s[3] = 0  # an empty row: its bag is empty and must give 0 (+ bias)
    w = torch.randn(11, 53, dtype=torch.float64)
    b = torch.randn(11, dtype=torch.float64)
    torch.testing.assert_close(gather_linear(s, w.t().contiguous(), b), F.linear(s, w, b), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("stride,padding,size", [(1, 1, 9), (2, 1, 10), (1, 0, 7), (2, 0, 11)])
def test_gather_conv2d_matches_dense(stride, padding, size):
    s = _spikes(5, 3, size, size + 2)
    w = torch.randn(6, 3, 3, 3, dtype=torch.float64)
    b = torch.randn(6, dtype=torch.float64)
    got = gather_conv2d(s, w, b, (stride, stride), (padding, padding), chunk=2)
    torch.testing.assert_close(got, F.conv2d(s, w, b, stride, padding), rtol=1e-12, atol=1e-12)


def test_modules_switch_to_dense_above_max_density_with_same_result():
    lin = nn.Linear(30, 7).double()
    s = _spikes(4, 6, 30, rate=0.3)
    sparse, dense = GatherLinear(lin, max_density=1.0), GatherLinear(lin, max_density=0.0)
    torch.testing.assert_close(sparse(s), lin(s).detach())
    torch.testing.assert_close(dense(s), lin(s).detach())
    conv = nn.Conv2d(2, 4, 3, 1, 1, bias=False).double()
    x = _spikes(3, 2, 8, 8)
    torch.testing.assert_close(GatherConv2d(conv, 1.0)(x), conv(x).detach())


def test_non_binary_input_is_refused():
    with pytest.raises(ValueError, match="non-binary input \\(value 0.5"):
        GatherLinear(nn.Linear(4, 2))(torch.tensor([[0.0, 1.0, 0.5, 0.0]]))
    check_binary(torch.tensor([0.0, 1.0]), "ok")
