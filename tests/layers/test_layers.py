import torch
from torch import nn

from plif.layers import PerStepBatchNorm, TimeFolded, TimeInvariantDropout, Voting, fold_bn_into


def test_time_folded_equals_per_step_loop():
    conv = nn.Conv2d(2, 3, 3, padding=1)
    x = torch.randn(4, 5, 2, 6, 6)
    folded = TimeFolded(conv)(x)
    assert torch.allclose(folded, torch.stack([conv(x[t]) for t in range(4)]), atol=1e-6)


def test_time_invariant_dropout_mask_shared_over_time():
    d = TimeInvariantDropout(0.5)
    x = torch.ones(6, 3, 50)
    y = d(x)
    assert torch.equal(y, y[0].expand_as(y))  # same mask at every step
    assert set(y.unique().tolist()) <= {0.0, 2.0}
    assert 0.3 < (y[0] == 0).float().mean() < 0.7
    d.eval()
    assert torch.equal(d(x), x)


def test_voting_averages_groups():
    x = torch.arange(20.0).view(1, 1, 20)
    assert Voting(10)(x).tolist() == [[[4.5, 14.5]]]


def test_spike_max_pool_stays_binary():
    s = (torch.rand(3, 2, 4, 8, 8) > 0.7).float()
    out = TimeFolded(nn.MaxPool2d(2, 2))(s)
    assert set(out.unique().tolist()) <= {0.0, 1.0}


def test_per_step_bn_uses_per_step_statistics():
    bn = nn.BatchNorm2d(3)
    x = torch.randn(2, 8, 3, 4, 4)
    x[1] += 5.0
    y = PerStepBatchNorm(bn)(x)
    assert y[1].mean().abs() < 1e-5 and y[0].mean().abs() < 1e-5


def test_fold_bn_into_conv_and_linear():
    torch.manual_seed(0)
    for layer, bn, x in [
        (nn.Conv2d(3, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4), torch.randn(5, 3, 6, 6)),
        (nn.Linear(7, 4, bias=True), nn.BatchNorm1d(4), torch.randn(5, 7)),
    ]:
        bn.train()
        for _ in range(3):
            bn(layer(torch.randn_like(x) * 2 + 1))
        nn.init.uniform_(bn.weight)
        nn.init.uniform_(bn.bias)
        bn.eval()
        folded = fold_bn_into(layer, bn)
        assert torch.allclose(folded(x), bn(layer(x)), atol=1e-5)
