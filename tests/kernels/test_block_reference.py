"""The fused block's reference (``plif.kernels.block_reference``) against the composed layers it stands for:
BatchNorm in training mode, the neuron's reference loop and ``max_pool2d``, through autograd (fp64)."""
import pytest
import torch
import torch.nn.functional as F

from plif.kernels.block_reference import block_backward_reference, block_forward_reference, bn_input_grad
from plif.neurons.functional import NeuronConfig
from plif.neurons.reference import multi_step_reference


@pytest.mark.parametrize("pool", [True, False])
@pytest.mark.parametrize("per_channel", [False, True])
def test_reference_equals_composed_layers(pool, per_channel):
    torch.manual_seed(0)
    T, B, C, H, W = 4, 2, 3, 7, 6
    dt = torch.float64
    y = (torch.randn(T, B, C, H, W, dtype=dt) * 2).requires_grad_(True)
    gamma, beta = torch.randn(C, dtype=dt).requires_grad_(True), torch.randn(C, dtype=dt).requires_grad_(True)
    w = (torch.randn(C, dtype=dt) if per_channel else torch.tensor(0.3, dtype=dt)).requires_grad_(True)
    cfg = NeuronConfig()
    z = F.batch_norm(y.flatten(0, 1), None, None, gamma, beta, training=True, eps=1e-5).unflatten(0, (T, B))
    k = torch.sigmoid(w)
    s, _ = multi_step_reference(z, k.view(-1, 1, 1) if per_channel else k, None, cfg)
    out = F.max_pool2d(s.flatten(0, 1), 2, 2).unflatten(0, (T, B)) if pool else s
    g_out = torch.randn_like(out)
    gy, g_gamma, g_beta, gw = torch.autograd.grad(out, [y, gamma, beta, w], g_out)
    with torch.no_grad():
        var, mean = torch.var_mean(y, dim=(0, 1, 3, 4), correction=0)
        invstd = (var + 1e-5).rsqrt()
        scale, shift = gamma * invstd, beta - mean * gamma * invstd
        kk = k.reshape(-1)
        o, place, _ = block_forward_reference(y, scale, shift, kk, None, cfg, pool)
        assert torch.equal(o, out)
        assert place.dtype == torch.uint8 and (place.numel() == o.numel() if pool else place.numel() == 0)
        g_z, _, g_k, sum_g, sum_gc = block_backward_reference(y, scale, shift, mean, kk, None, cfg, pool, place,
                                                              g_out, None)
        g_y = bn_input_grad(g_z, y, mean, invstd, scale, sum_g, sum_gc, training=True)
    torch.testing.assert_close(g_y, gy, rtol=0, atol=1e-12)
    torch.testing.assert_close(sum_g, g_beta, rtol=0, atol=1e-12)
    torch.testing.assert_close(invstd * sum_gc, g_gamma, rtol=0, atol=1e-12)
    torch.testing.assert_close((g_k * k * (1 - k)).reshape(gw.shape), gw, rtol=0, atol=1e-12)
