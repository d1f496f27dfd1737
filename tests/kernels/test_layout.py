"""k's layout over the flat neurons of a step: the (n // inner) % C rule and its fallback."""
import pytest
import torch

from plif.kernels.layout import flat_k, fold_k_grad, k_layout


@pytest.mark.parametrize("k_shape,step,expect", [
    ((), (2, 3, 4, 5), (1, 120, 1, False)),
    ((1, 1, 1), (2, 3, 4, 5), (1, 120, 1, False)),
    ((3, 1, 1), (2, 3, 4, 5), (3, 20, 2, False)),
    ((3, 4, 5), (2, 3, 4, 5), (60, 1, 2, False)),
    ((7,), (4, 7), (7, 1, 4, False)),
    ((2, 3, 4, 5), (2, 3, 4, 5), (120, 1, 1, False)),
    ((3, 1, 5), (2, 3, 4, 5), (120, 1, 1, True)),  # gap in the middle: expanded per neuron
    ((3, 1, 5), (2, 3, 1, 5), (15, 1, 2, False)),  # the gap is a size-1 step dim: harmless
])
def test_layout(k_shape, step, expect):
    lay = k_layout(k_shape, step)
    assert (lay.channels, lay.inner, lay.outer, lay.expanded) == expect


@pytest.mark.parametrize("k_shape", [(3, 1, 1), (3, 4, 5), (3, 1, 5), (5,)])
def test_layout_indexes_like_broadcasting(k_shape):
    step = (2, 3, 4, 5)
    k = torch.arange(1, torch.Size(k_shape).numel() + 1, dtype=torch.float64).view(k_shape)
    lay = k_layout(k_shape, step)
    kf = flat_k(k, step, lay)
    n = torch.arange(2 * 3 * 4 * 5)
    assert torch.equal(kf[(n // lay.inner) % lay.channels].view(step), k.expand(step))
    # the gradient of sum(k * g) w.r.t. k, computed per channel, folds back to autograd's answer
    g = torch.randn(step, dtype=torch.float64)
    per_channel = torch.zeros(lay.channels, dtype=torch.float64).index_add_(0, (n // lay.inner) % lay.channels, g.view(-1))
    kk = k.clone().requires_grad_(True)
    (kk * g).sum().backward()
    assert torch.allclose(fold_k_grad(per_channel, k, step, lay), kk.grad)


@pytest.mark.parametrize("k_shape", [(4, 1, 1), (1, 2, 3, 4, 5)])
def test_layout_rejects_bad_broadcast(k_shape):
    with pytest.raises(ValueError, match="k of shape"):
        k_layout(k_shape, (2, 3, 4, 5))
