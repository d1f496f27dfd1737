"""A registered surrogate gives the gradients of the equivalent built-in: on the bptt path with one
notice, or in the fused kernels when it declares their closed form; ``MODULE:NAME`` finds it again."""
import math
import sys
import warnings

import pytest
import torch

from plif.neurons import PLIF, dispatch
from plif.surrogate import CUSTOM_SURROGATES, get_surrogate, register_surrogate, surrogate_spec, unregister_surrogate


@pytest.fixture
def custom(monkeypatch):
    monkeypatch.setattr(dispatch, "_WARNED", set())
    names = []

    def add(name, **kw):
        names.append(name)
        return register_surrogate(name, **kw)
    yield add
    for n in names:
        CUSTOM_SURROGATES.pop(n, None)


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
    with pytest.warns(RuntimeWarning, match="surrogate 'my_atan' declares no closed form of the fused kernels; "
                                             "backend='auto' runs it on 'bptt'"):
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
    with pytest.raises(ValueError, match=r"surrogate 'nope': unknown; valid: atan, .*or MODULE:NAME"):
        get_surrogate("nope")
    with pytest.raises(ValueError, match="no custom surrogate 'nope'"):
        unregister_surrogate("nope")


ATAN4 = dict(grad=lambda x, a: (a / 2) / (1 + (math.pi / 2 * a * x) ** 2), default_alpha=4.0)


def test_a_declared_closed_form_runs_in_the_fused_kernel_without_a_notice(custom):
    # the paper's ATan at alpha = 4, declared as the kernels' atan form a / (1 + (b u)^2)
    sg = custom("atan4", closed_form=("atan", lambda a: (a / 2, math.pi / 2 * a)), **ATAN4)
    assert sg.fused and not sg.builtin
    x = torch.randn(6, 3, 4, 5, dtype=torch.float64) + 0.8
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback notice: it runs in the kernel
        assert dispatch.select_backend(x, PLIF(surrogate="atan4").cfg) == "cpu"
        s, g = _grads("atan4", "cpu", x)
    torch.manual_seed(0)
    ref = PLIF(tau0=2.0, surrogate="atan", alpha=4.0, detach_reset=False, backend="bptt").double()
    xr = x.clone().requires_grad_(True)
    sr = ref(xr)
    gen = torch.Generator().manual_seed(1)
    g_ref = torch.autograd.grad((sr * torch.randn(sr.shape, generator=gen, dtype=sr.dtype)).sum(), [xr, ref.w])
    assert torch.equal(s, sr.detach()) and s.sum() > 0
    for a, b in zip(g, g_ref):
        assert torch.allclose(a, b, rtol=1e-10, atol=1e-12)
    assert g[1].abs() > 0


def test_a_closed_form_alone_is_the_derivative(custom):
    custom("wide_triangle", closed_form=("triangle", lambda a: (a, a * a / 4)), default_alpha=1.0)
    x = torch.randn(5, 2, 7, dtype=torch.float64) + 0.8
    _, g_kernel = _grads("wide_triangle", "cpu", x)
    _, g_bptt = _grads("wide_triangle", "bptt", x)
    for a, b in zip(g_kernel, g_bptt):
        assert torch.allclose(a, b, rtol=1e-10, atol=1e-12)
    u = torch.tensor([0.0, 1.0, 2.0, 5.0], dtype=torch.float64)
    assert get_surrogate("wide_triangle").grad(u, 1.0).tolist() == [1.0, 0.75, 0.5, 0.0]


def test_a_wrong_closed_form_is_refused_at_registration(custom):
    with pytest.raises(ValueError, match=r"surrogate 'bad': its grad is not the kernels' 'sigmoid' form with constants "
                                         r"\(a, b\) = \(4, 0\) at alpha=4"):
        custom("bad", closed_form=("sigmoid", lambda a: (a, 0.0)), **ATAN4)
    with pytest.raises(ValueError, match="closed_form must be \\(form, constants\\) with form one of atan, sigmoid"):
        custom("bad", closed_form=("superspike", lambda a: (a, a)), **ATAN4)
    with pytest.raises(ValueError, match=r"constants\(1\) = \(inf, 1.0\) must be two finite numbers \(a, b\)"):
        custom("bad", closed_form=("rect", lambda a: (math.inf, a)))
    with pytest.raises(ValueError, match=r"constants\(1\) = 0.5 must be two finite numbers"):
        custom("bad", closed_form=("rect", lambda a: a / 2))
    assert "bad" not in CUSTOM_SURROGATES


MODULE = """
from plif.surrogate import register_surrogate

register_surrogate("superspike", grad=lambda x, a: 1 / (1 + a * x.abs()) ** 2, default_alpha=10.0)
"""


@pytest.fixture
def surrogate_module(tmp_path, monkeypatch):
    """A module ``plif_test_surrogates`` on sys.path that registers ``superspike`` when imported."""
    (tmp_path / "plif_test_surrogates.py").write_text(MODULE)
    (tmp_path / "plif_test_broken.py").write_text("raise RuntimeError('no GPU here')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "plif_test_surrogates"
    for name in ("plif_test_surrogates", "plif_test_broken"):
        sys.modules.pop(name, None)
    CUSTOM_SURROGATES.pop("superspike", None)


def test_module_colon_name_imports_the_module_that_registers_it(surrogate_module):
    assert "superspike" not in CUSTOM_SURROGATES
    sg = get_surrogate("plif_test_surrogates:superspike")
    assert sg.name == "superspike" and sg.module == "plif_test_surrogates"
    assert sg.spec == "plif_test_surrogates:superspike" == surrogate_spec("superspike")
    x = torch.randn(4, 2, 3) + 0.8
    neuron = PLIF(surrogate="plif_test_surrogates:superspike", backend="bptt")
    assert torch.equal(neuron(x), PLIF(backend="bptt")(x))
    assert get_surrogate("atan").spec == "atan"


@pytest.mark.parametrize("spec,message", [
    ("plif_no_such_module:superspike", "cannot import module 'plif_no_such_module' (ModuleNotFoundError: No module "
                                       "named 'plif_no_such_module'); it must be installed or on PYTHONPATH"),
    ("plif_test_broken:x", "cannot import module 'plif_test_broken' (RuntimeError: no GPU here)"),
    ("json:superspike", "module 'json' registers no surrogate 'superspike'"),
    (":superspike", "write MODULE:NAME"),
])
def test_module_colon_name_errors_are_one_line_naming_the_module(surrogate_module, spec, message):
    with pytest.raises(ValueError) as e:
        get_surrogate(spec, option="--surrogate")
    assert str(e.value).startswith(f"--surrogate {spec!r}: ") and message in str(e.value)
    assert "\n" not in str(e.value)


def test_a_surrogate_registered_by_a_script_is_refused_at_the_start_of_training(custom, tmp_path):
    """Issue 45: it was stored bare with a warning, and a later plif eval said "unknown"; now
    training refuses it before the run folder is touched, saying how to make it findable."""
    from plif.train import TrainConfig, train

    exec("from plif.surrogate import register_surrogate\n"
         "register_surrogate('scripted', grad=lambda x, a: x * 0 + 1)", {"__name__": "__main__"})
    try:
        with pytest.raises(ValueError, match=r"--surrogate 'scripted': registered by a script \(__main__\).* "
                                             "name it MODULE:scripted"):
            surrogate_spec("scripted", "--surrogate")
        out = tmp_path / "run"
        with pytest.raises(ValueError, match="registered by a script") as e:
            train(TrainConfig(dataset="fashion-mnist", surrogate="scripted", epochs=1, device="cpu", out=str(out)))
        assert "\n" not in str(e.value) and not out.exists()
        custom("here", grad=lambda x, a: x * 0 + 1)
        assert surrogate_spec("here") == f"{__name__}:here"
    finally:
        CUSTOM_SURROGATES.pop("scripted", None)
