import pytest
import torch
from torch import nn

from plif.deploy.bn_folding import bn_scale_shift, fold_batchnorm, is_batchnorm
from plif.layers import TimeFolded


def test_folded_network_has_no_batchnorm_and_original_is_untouched(make_net):
    net = make_net()
    before = {k: v.clone() for k, v in net.state_dict().items()}
    folded = fold_batchnorm(net)
    assert not any(is_batchnorm(m) for m in folded.layers)
    assert len(folded.layers) == len(net.layers) - 2
    assert folded.info[0].token == "c8k3s1+BN" and folded.layers[0].layer.bias is not None
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())
    assert not folded.training


def test_identical_spikes_in_float64(make_net):
    net = make_net(dtype=torch.float64).eval()
    x = torch.randn(16, 1, 16, 16, dtype=torch.float64)
    with torch.no_grad():
        want, got = net(x), fold_batchnorm(net)(x)
    assert want.sum() > 0
    assert torch.equal(want, got)


def test_per_step_batchnorm_folds_too(make_net):
    net = make_net(dtype=torch.float64, bn_per_step=True).eval()
    x = torch.randn(8, 6, 1, 16, 16, dtype=torch.float64).transpose(0, 1).contiguous()
    with torch.no_grad():
        assert torch.equal(net(x), fold_batchnorm(net)(x))


def test_float32_potentials_agree_to_rounding(make_net):
    net = make_net().eval()
    x = torch.randn(16, 1, 16, 16)
    folded = fold_batchnorm(net)
    with torch.no_grad():
        want = net.layers[1](net.layers[0](x.unsqueeze(0)))
        got = folded.layers[0](x.unsqueeze(0))
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_batchnorm_without_conv_is_kept(make_net):
    net = make_net("BN-c8k3s1-PLIF-FC20-PLIF-APk10s10")
    folded = fold_batchnorm(net)
    assert is_batchnorm(folded.layers[0])
    assert isinstance(folded.layers[1], TimeFolded) and isinstance(folded.layers[1].layer, nn.Conv2d)


def test_folding_is_torchs_own_fusion_bit_for_bit():
    """fold_bn_into is torch.nn.utils.fusion (no second copy of the arithmetic), also without BN affine."""
    from torch.nn.utils.fusion import fuse_conv_bn_eval, fuse_linear_bn_weights

    from plif.layers import fold_bn_into

    torch.manual_seed(0)
    conv, bn2 = nn.Conv2d(3, 8, 3, bias=True), nn.BatchNorm2d(8)
    lin, bn1 = nn.Linear(6, 5), nn.BatchNorm1d(5, affine=False)
    for bn in (bn2, bn1):
        bn.running_mean.normal_()
        bn.running_var.uniform_(0.1, 3.0)
        if bn.affine:
            nn.init.uniform_(bn.weight, -2, 2)
            nn.init.uniform_(bn.bias)
    want = fuse_conv_bn_eval(conv.eval(), bn2.eval())
    conv.train(), bn2.train()
    got = fold_bn_into(conv, bn2)
    assert torch.equal(got.weight, want.weight) and torch.equal(got.bias, want.bias)
    assert conv.training and bn2.training  # the caller's modules keep their mode
    got = fold_bn_into(lin, bn1)
    w, b = fuse_linear_bn_weights(lin.weight, lin.bias, bn1.running_mean, bn1.running_var, bn1.eps,
                                  torch.ones(5), torch.zeros(5))
    assert torch.equal(got.weight, w) and torch.equal(got.bias, b)


@pytest.mark.parametrize("cls,channels,affine", [(nn.BatchNorm2d, 128, True), (nn.BatchNorm2d, 5, False),
                                                 (nn.BatchNorm1d, 100, True)])
def test_scale_and_shift_are_torchs_eval_arithmetic(cls, channels, affine):
    """bn(x) == x α + β with one rounding, bit for bit: α from correctly rounded float32 operations
    (torch.sqrt on the CPU is not: it would miss about one channel in five), β read from the kernel."""
    torch.manual_seed(0)
    bn = cls(channels, affine=affine).eval()
    bn.running_mean.normal_()
    bn.running_var.uniform_(1e-3, 5.0)
    if affine:
        nn.init.normal_(bn.weight)
        nn.init.normal_(bn.bias)
    alpha, beta = bn_scale_shift(bn)
    x = torch.randn(24, channels, *((6, 7) if cls is nn.BatchNorm2d else ())) * 3
    shape = (1, channels) + (1,) * (x.dim() - 2)
    fma = (x.double() * alpha.double().view(shape) + beta.double().view(shape)).float()
    with torch.no_grad():
        assert torch.equal(fma, bn(x))
    bn.track_running_stats, bn.running_var = False, None
    with pytest.raises(ValueError, match="without running statistics"):
        bn_scale_shift(bn)
