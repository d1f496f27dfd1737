"""A registered surrogate gives the gradients of the equivalent built-in, on the bptt path, with one notice."""
import math
import warnings

import pytest
import torch

from plif.neurons import PLIF, dispatch
from plif.surrogate import get_surrogate, register_surrogate, unregister_surrogate


@pytest.fixture
def custom(monkeypatch):
    monkeypatch.setattr(dispatch, "_WARNED", set())
    names = []

    def add(name, **kw):
        names.append(name)
        return register_surrogate(name, **kw)
    yield add
    for n in names:
        unregister_surrogate(n)


def _grads(surrogate, backend, x):
    torch.manual_seed(0)
    neuron = PLIF(tau0=2.0, surrogate=surrogate, detach_reset=False, backend=backend).double()
    x = x.clone().requires_grad_(True)
    s = neuron(x)
    g = torch.randn(s.shape, generator=torch.Generator().manual_seed(1), dtype=s.dtype)
    return s.detach(), torch.autograd.grad((s * g).sum(), [x, neuron.w])


def test_custom_derivative_equals_builtin_through_bptt_and_notice_once(custom):
    # the paper's ATan, written by a user: σ'(x) = (α/2) / (1 + (π/2 α x)²)
    custom("my_atan", grad=lambda x, a: (a / 2) / (1 + (math.pi / 2 * a * x) ** 2), default_alpha=2.0)
    x = torch.randn(6, 3, 4, 5, dtype=torch.float64) + 0.8
    s_ref, g_ref = _grads("atan", "bptt", x)
    with pytest.warns(RuntimeWarning, match="custom surrogate 'my_atan' is not in the fused kernels.*'bptt'"):
        s, g = _grads("my_atan", "auto", x)
    assert torch.equal(s, s_ref) and s.sum() > 0
    for a, b in zip(g, g_ref):
        assert torch.allclose(a, b, rtol=1e-12, atol=1e-14)
    assert g[1].abs() > 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # second run: no second notice
        _grads("my_atan", "auto", x)


def test_primitive_only_is_differentiated_by_autograd(custom):
    custom("my_sigmoid", primitive=lambda x, a: torch.sigmoid(a * x), default_alpha=4.0)
    x = torch.randn(5, 2, 7, dtype=torch.float64) + 0.8
    _, g_ref = _grads("sigmoid", "bptt", x)
    _, g = _grads("my_sigmoid", "bptt", x)
    _, g_loop = _grads("my_sigmoid", "reference", x)
    for a, b, c in zip(g, g_ref, g_loop):
        assert torch.allclose(a, b, rtol=1e-12, atol=1e-14) and torch.allclose(c, b, rtol=1e-9, atol=1e-12)


def test_fused_backend_named_for_custom_is_refused(custom):
    custom("box", grad=lambda x, a: (x.abs() < 0.5).to(x.dtype))
    with pytest.raises(ValueError, match="backend 'cpu': the fused kernels have only their closed-form surrogates"):
        PLIF(surrogate="box", backend="cpu")(torch.randn(2, 3))


def test_registry_errors(custom):
    with pytest.raises(ValueError, match="'atan' is a built-in surrogate"):
        register_surrogate("atan", grad=lambda x, a: x)
    with pytest.raises(ValueError, match="give its derivative"):
        register_surrogate("nothing")
    with pytest.raises(ValueError, match=r"unknown surrogate 'nope'; valid: atan, .*register_surrogate adds one"):
        get_surrogate("nope")
    with pytest.raises(ValueError, match="no custom surrogate 'nope'"):
        unregister_surrogate("nope")
