"""The closed-form BPTT equals autograd through the reference, for x, w and the initial state."""
import itertools

import pytest
import torch

from plif.neurons import IF, LIF, PLIF, NeuronConfig, multi_step_bptt, multi_step_reference
from plif.surrogate import SURROGATES


def _grads(neuron, backend, x, v0):
    neuron.backend = backend
    x = x.clone().requires_grad_(True)
    v0 = v0.clone().requires_grad_(True)
    s, v = neuron(x, v0=v0, return_state=True)
    g = torch.Generator().manual_seed(1)
    loss = (s * torch.randn(s.shape, generator=g, dtype=s.dtype)).sum() + (v * torch.randn(v.shape, generator=g, dtype=v.dtype)).sum()
    params = [p for p in neuron.parameters()]
    grads = torch.autograd.grad(loss, [x, v0] + params)
    return s.detach(), v.detach(), grads


# name -> (constructor, tau): inputs are scaled by tau so that every case fires.
NEURONS = {
    "IF": (lambda **kw: IF(**kw), 1.0),
    "LIF": (lambda **kw: LIF(tau=3.0, **kw), 3.0),
    "PLIF": (lambda **kw: PLIF(tau0=2.0, **kw), 2.0),
    "PLIF16": (lambda **kw: PLIF(tau0=16.0, **kw), 16.0),
}
SHAPES = [(1, 8), (7, 5), (4, 2, 3, 5, 7)]


@pytest.mark.parametrize("name,shape,hard,detach", list(itertools.product(NEURONS, SHAPES, [True, False], [True, False])))
def test_bptt_matches_reference_autograd(name, shape, hard, detach):
    kw = dict(v_reset=0.0 if hard else None, detach_reset=detach)
    make, tau = NEURONS[name]
    neuron = make(**kw).double()
    x = (torch.randn(shape, dtype=torch.float64) * 1.5 + 0.6) * tau
    v0 = torch.rand(shape[1:], dtype=torch.float64) * 0.5
    s_ref, v_ref, g_ref = _grads(neuron, "reference", x, v0)
    s_fast, v_fast, g_fast = _grads(neuron, "bptt", x, v0)
    assert torch.equal(s_ref, s_fast)
    assert torch.allclose(v_ref, v_fast, atol=1e-12)
    assert s_ref.sum() > 0, "the case must fire to test the reset path"
    for a, b in zip(g_ref, g_fast):
        assert torch.allclose(a, b, rtol=1e-9, atol=1e-10), (a - b).abs().max()


@pytest.mark.parametrize("surrogate", list(SURROGATES))
def test_bptt_every_surrogate(surrogate):
    neuron = PLIF(surrogate=surrogate, detach_reset=False).double()
    x = torch.randn(6, 4, 9, dtype=torch.float64) + 0.7
    v0 = torch.zeros(4, 9, dtype=torch.float64)
    _, _, g_ref = _grads(neuron, "reference", x, v0)
    _, _, g_fast = _grads(neuron, "bptt", x, v0)
    for a, b in zip(g_ref, g_fast):
        assert torch.allclose(a, b, rtol=1e-9, atol=1e-10)
    assert g_ref[-1].abs() > 0


def test_per_channel_w_gradient():
    neuron = PLIF(num_channels=3).double()
    with torch.no_grad():
        neuron.w.copy_(torch.tensor([0.3, -1.0, 1.2]))
    x = torch.randn(5, 2, 3, 4, dtype=torch.float64) + 0.8
    v0 = torch.zeros(2, 3, 4, dtype=torch.float64)
    _, _, g_ref = _grads(neuron, "reference", x, v0)
    _, _, g_fast = _grads(neuron, "bptt", x, v0)
    assert g_fast[-1].shape == (3,)
    for a, b in zip(g_ref, g_fast):
        assert torch.allclose(a, b, rtol=1e-9, atol=1e-10)


def _away_from_threshold(T=5, n=4, seed=0, cfg=NeuronConfig()):
    """Inputs whose H stays >= 1e-3 away from V_th, so the exact derivative of V_{T-1} exists."""
    g = torch.Generator().manual_seed(seed)
    while True:
        x = torch.randn(T, n, generator=g, dtype=torch.float64) * 1.2 + 0.5
        k = torch.tensor(0.4, dtype=torch.float64)
        v0 = torch.rand(n, generator=g, dtype=torch.float64) * 0.3
        _, h, _ = __import__("plif.neurons.bptt", fromlist=["bptt_forward"]).bptt_forward(x, k, v0, cfg)
        if (h - cfg.v_threshold).abs().min() > 1e-3 and (h >= cfg.v_threshold).any():
            return x, k, v0


@pytest.mark.parametrize("hard", [True, False])
@pytest.mark.parametrize("leak", [True, False])
def test_gradcheck_final_state(hard, leak):
    """With the reset detached, dV_{T-1}/d(x, k, v0) from the recursion is the true derivative."""
    cfg = NeuronConfig(leak=leak, v_reset=0.0 if hard else None, detach_reset=True)
    x, k, v0 = _away_from_threshold(cfg=cfg)
    inputs = (x.requires_grad_(), k.requires_grad_(leak), v0.requires_grad_())
    assert torch.autograd.gradcheck(lambda x, k, v0: multi_step_bptt(x, k, v0, cfg)[1], inputs, eps=1e-6, atol=1e-7)
    assert torch.autograd.gradcheck(lambda x, k, v0: multi_step_reference(x, k, v0, cfg)[1], inputs, eps=1e-6, atol=1e-7)


def test_bptt_saves_only_h():
    x = torch.randn(8, 3, 5, requires_grad=True)
    s, _ = multi_step_bptt(x, torch.tensor(0.5), torch.zeros(3, 5), NeuronConfig())
    saved = s.grad_fn.saved_tensors
    assert sum(t.numel() for t in saved if t.dim() == 3) == x.numel()  # H only, no X or S copies
