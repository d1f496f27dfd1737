"""The fused BatchNorm → neuron → max-pool step (``plif.layers.fused_block``) against the composed
layers it replaces, on every kernel the CPU has (the C++ one and the reference)."""
import dataclasses
import os

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from plif import kernel_table
from plif.layers import TimeFolded
from plif.layers import fused_block as fb
from plif.layers.few_tap_conv import few_tap_conv2d, few_tap_conv_backward
from plif.neurons import IF, LIF, PLIF
from plif.surrogate import register_surrogate, unregister_surrogate

KERNELS = ["reference"] + (["cpu"] if fb.block_kernels(PLIF(), "cpu", torch.float32) is not fb.REFERENCE else [])


def _kernels(name):
    return fb.REFERENCE if name == "reference" else fb.block_kernels(PLIF(), "cpu", torch.float32)


def _layers(neuron, C=3, seed=0):
    torch.manual_seed(seed)
    bn = nn.BatchNorm2d(C)
    with torch.no_grad():
        bn.weight.uniform_(0.5, 1.5), bn.bias.uniform_(-0.3, 0.3)
    return bn, neuron


def _composed(y, bn, neuron, pool, v0=None):
    T, B = y.shape[:2]
    z = bn(y.flatten(0, 1)).unflatten(0, (T, B))
    s, v = neuron(z, v0=v0, return_state=True)
    out = F.max_pool2d(s.flatten(0, 1), 2, 2).unflatten(0, (T, B)) if pool else s
    return out, v


NEURONS = {"PLIF": lambda: PLIF(v_threshold=0.5), "PLIF-channel": lambda: PLIF(num_channels=3, v_threshold=0.5),
           "LIF-soft": lambda: LIF(tau=3.0, v_reset=None, v_threshold=0.5),
           "IF-attached": lambda: IF(detach_reset=False, v_threshold=0.5)}


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("pool", [True, False])
@pytest.mark.parametrize("neuron", list(NEURONS))
def test_training_step_equals_the_composed_layers(neuron, pool, kernel):
    """Spikes as BatchNorm2d → neuron → max_pool2d give them (here: all, on these inputs); ∂y, ∂γ, ∂β,
    ∂w and ∂v0 to rounding; the running statistics and the batch count as BatchNorm updates them."""
    results = []
    for fused in (False, True):
        bn, n = _layers(NEURONS[neuron]())
        y = (torch.randn(4, 2, 3, 7, 6, generator=torch.Generator().manual_seed(1)) * 2 + 0.3).requires_grad_(True)
        v0 = (torch.rand(2, 3, 7, 6, generator=torch.Generator().manual_seed(2)) * 0.3).requires_grad_(True)
        if fused:
            out, v = fb.fused_block(y, bn, n, pool, _kernels(kernel), v0=v0, need_state=True)
        else:
            out, v = _composed(y, bn, n, pool, v0)
        g = torch.randn(out.shape, generator=torch.Generator().manual_seed(3))
        gv = torch.randn(v.shape, generator=torch.Generator().manual_seed(4))
        params = [y, v0, bn.weight, bn.bias] + list(n.parameters())
        grads = torch.autograd.grad([out, v], params, [g, gv])
        results.append((out.detach(), v.detach(), grads, bn.running_mean.clone(), bn.running_var.clone(),
                        int(bn.num_batches_tracked)))
    (o0, v0_, g0, rm0, rv0, n0), (o1, v1, g1, rm1, rv1, n1) = results
    assert torch.equal(o0, o1) and 0 < o0.sum() < o0.numel()
    torch.testing.assert_close(v1, v0_, rtol=1e-5, atol=1e-6)
    for a, b in zip(g1, g0):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(rm1, rm0, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(rv1, rv0, rtol=1e-6, atol=1e-7)
    assert n0 == n1 == 1


@pytest.mark.parametrize("kernel", KERNELS)
def test_evaluation_statistics_with_gradients(kernel):
    """BatchNorm in eval mode with gradients (frozen statistics while the rest trains): running
    statistics, ∂γ = invstd·Σ∂z(y−μ_running), ∂y = scale·∂z; nothing updated."""
    out = []
    for fused in (False, True):
        bn, n = _layers(PLIF(v_threshold=0.5))
        bn.train()(torch.randn(8, 3, 5, 5) * 3 + 1)  # running statistics away from 0 and 1
        bn.eval()
        y = (torch.randn(3, 2, 3, 6, 6, generator=torch.Generator().manual_seed(5)) * 2).requires_grad_(True)
        o = fb.fused_block(y, bn, n, True, _kernels(kernel))[0] if fused else _composed(y, bn, n, True)[0]
        grads = torch.autograd.grad(o, [y, bn.weight, bn.bias, n.w], torch.ones_like(o))
        out.append((o, grads, bn.running_mean.clone()))
    assert torch.equal(out[0][0], out[1][0]) and torch.equal(out[0][2], out[1][2])
    for a, b in zip(out[1][1], out[0][1]):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_repeated_input_gradient_is_summed_over_time():
    """A y repeated over time (a static input's hoisted conv) read in place: the same spikes as its
    materialised copy and its gradient the sum over time of theirs."""
    kernels = _kernels(KERNELS[-1])
    res = []
    for repeat in (True, False):
        bn, n = _layers(PLIF(num_channels=3, v_threshold=0.5))
        base = (torch.randn(2, 3, 6, 8, generator=torch.Generator().manual_seed(6)) * 2).requires_grad_(True)
        if repeat:
            out = fb.fused_block(base, bn, n, True, kernels, repeat=4)[0]
        else:
            out = fb.fused_block(base.unsqueeze(0).expand(4, *base.shape).contiguous(), bn, n, True, kernels)[0]
        grads = torch.autograd.grad(out, [base, bn.weight, n.w], torch.linspace(-1, 1, out.numel()).view(out.shape))
        res.append((out, grads, bn.running_var.clone()))
    assert torch.equal(res[0][0], res[1][0]) and torch.equal(res[0][2], res[1][2])
    for a, b in zip(*[r[1] for r in res]):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.skipif("cpu" not in KERNELS, reason="the C++ kernel did not build here")
def test_backward_writes_dy_over_y_and_refuses_a_second_backward(monkeypatch):
    """The C++ backward writes ∂y over the kept conv output (no second tensor of its size; here at
    any size): the same gradient as the separate ∂z pass, and a second backward through the graph is
    refused by autograd's own version check instead of reading ∂y as if it were y."""
    monkeypatch.setattr(fb, "_FRESH_BYTES", 0)
    bn, n = _layers(PLIF(v_threshold=0.5))
    y0 = torch.randn(3, 2, 3, 6, 6) * 2
    grads = []
    for kernels in (_kernels("cpu"), fb.BlockKernels("cpu-separate", *[getattr(_kernels("cpu"), f) for f in
                                                                       ("forward", "backward", "input_grad",
                                                                        "input_grad_into", "stats")])):
        y = y0.clone().requires_grad_(True)
        h = y * 1  # the conv output: a non-leaf, as in a network
        out = fb.fused_block(h, bn, n, True, kernels)[0]
        out.sum().backward(retain_graph=True)
        grads.append(y.grad.clone())
        if kernels.backward_into is not None:
            with pytest.raises(RuntimeError, match="modified by an inplace operation"):
                out.sum().backward()
    assert torch.equal(grads[0], grads[1])


@pytest.mark.parametrize("kernel", KERNELS)
def test_a_repeated_y_without_the_pool_gives_a_gradient_through_the_state_alone(kernel):
    """Only ``V_{T-1}`` reaches the loss: the spikes' gradient is zeros of the ``[T, B, C, H, W]``
    the kernels read (not of the ``[B, C, H, W]`` repeated), as for the materialised copy."""
    kernels = _kernels(kernel)
    res = []
    for repeat in (True, False):
        bn, n = _layers(PLIF(num_channels=3, v_threshold=0.5))
        base = (torch.randn(2, 3, 5, 4, generator=torch.Generator().manual_seed(6)) * 2).requires_grad_(True)
        y = base if repeat else base.unsqueeze(0).expand(4, *base.shape).contiguous()
        _, v = fb.fused_block(y, bn, n, False, kernels, need_state=True, repeat=4 if repeat else 0)
        res.append(torch.autograd.grad((v * torch.linspace(-1, 1, v.numel()).view(v.shape)).sum(),
                                       [base, bn.weight, n.w]))
    assert res[1][0].abs().sum() > 0
    for a, b in zip(*res):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_a_repeated_y_takes_its_statistics_from_one_step():
    """A y repeated over time has the statistics of one of its steps: kernels that do not read the
    repeat as a view (Triton, which would make it contiguous first) read that step, and the running
    variance is still unbiased over all T·B·H·W values, as ``nn.BatchNorm2d`` on the repeated input
    makes it.  Kernels that read the view (the CPU's) take it whole: the same bits as the repeated
    input (``test_network``'s static-input test)."""
    seen = []

    def stats(y):
        seen.append(tuple(y.shape))
        return fb._torch_stats(y)

    bn, n = _layers(PLIF(v_threshold=0.5))
    ref = nn.BatchNorm2d(3)
    base = torch.randn(2, 3, 6, 8) * 2 + 1
    fb.fused_block(base, bn, n, True, dataclasses.replace(fb.REFERENCE, stats=stats, reads_repeated=False), repeat=4)
    ref(base.repeat(4, 1, 1, 1))
    assert seen == [(1, 2, 3, 6, 8)]
    torch.testing.assert_close(bn.running_mean, ref.running_mean)
    torch.testing.assert_close(bn.running_var, ref.running_var)


def test_composed_layers_run_where_the_kernels_cannot():
    """A surrogate without a closed form, a neuron backend registered outside plif, or a neuron that is
    not exactly IF/LIF/PLIF: no kernels (the plan runs the composed layers)."""
    register_surrogate("cube_test", grad=lambda x, alpha: 1 / (1 + (alpha * x) ** 2) ** 2, default_alpha=2.0)
    try:
        assert fb.block_kernels(PLIF(surrogate="cube_test"), "cpu", torch.float32) is None
        assert fb.block_kernels(PLIF(surrogate="cube_test", backend="bptt"), "cpu", torch.float32) is fb.REFERENCE
    finally:
        unregister_surrogate("cube_test")

    class MyPLIF(PLIF):
        pass
    assert fb.block_kernels(MyPLIF(), "cpu", torch.float32) is None
    assert fb.block_kernels(PLIF(backend="reference"), "cpu", torch.float32) is fb.REFERENCE


def test_a_dtype_or_device_the_kernels_refuse_runs_the_composed_layers():
    """The kernels' own predicates decide (no GPU needed to ask): Triton takes CUDA fp32, bf16 and
    fp16 but not fp64 (its float arguments are fp32), the C++ kernels the CPU's fp32, fp64 and bf16
    but not fp16; a backend named for the other device is refused too."""
    if "cpu" in KERNELS:
        for dtype in (torch.float32, torch.float64, torch.bfloat16):
            assert fb.block_kernels(PLIF(), "cpu", dtype).name == "cpu"
    assert fb.block_kernels(PLIF(), "cpu", torch.float16) is None
    assert fb.block_kernels(PLIF(backend="cpu"), "cuda", torch.float32) is None
    if kernel_table.functions("block", "triton") is not None:
        for dtype in (torch.float32, torch.bfloat16, torch.float16):
            assert fb.block_kernels(PLIF(), torch.device("cuda"), dtype).name == "triton"
        assert fb.block_kernels(PLIF(), "cuda", torch.float64) is None
        if os.environ.get("TRITON_INTERPRET") != "1":  # the interpreter runs Triton on CPU tensors
            assert fb.block_kernels(PLIF(backend="triton"), "cpu", torch.float32) is None


@pytest.fixture
def fresh_table():
    """The kernel table from scratch, and again afterwards so the next test loads the real kernels."""
    kernel_table.reset()
    yield kernel_table.KERNELS["block"]
    kernel_table.reset()


def _block_entry(module: str, **kw) -> kernel_table.Kernel:
    """A table entry of ``module`` for the meta device whose every role is its function ``f``."""
    roles = ("forward", "backward", "input_grad", "input_grad_into", "stats", "backward_into", "backward_summed")
    return kernel_table.Kernel(module, "meta", dict.fromkeys(roles, "f"), "f", **kw)


def _state(kind: str, name: str) -> str:
    return next(k["state"] for k in kernel_table.status() if (k["kind"], k["name"]) == (kind, name))


def test_a_kernel_module_that_fails_to_load_warns_once_and_runs_the_reference(fresh_table, monkeypatch):
    monkeypatch.setitem(fresh_table, "broken", _block_entry("plif.kernels.no_such_module"))
    fb.load_kernels()  # as a plan does when it is made: nothing is said yet
    assert _state("block", "broken").startswith("unavailable: ModuleNotFoundError")
    with pytest.warns(RuntimeWarning, match="'broken' kernels failed to load.*No module named"):
        assert fb.block_kernels(PLIF(), "meta", torch.float32) is fb.REFERENCE
    # no second warning (pytest would fail on one)
    assert fb.block_kernels(PLIF(), "meta", torch.float32) is fb.REFERENCE


def test_bf16_autocast_keeps_statistics_and_state_in_fp32():
    bn, n = _layers(PLIF(v_threshold=0.5))
    conv = TimeFolded(nn.Conv2d(2, 3, 3, 1, 1, bias=False))
    x = torch.randn(3, 2, 2, 6, 6)
    with torch.autocast("cpu", torch.bfloat16):
        y = conv(x)
        out, _ = fb.fused_block(y, bn, n, True, _kernels(KERNELS[-1]))
    assert y.dtype == out.dtype == torch.bfloat16 and bn.running_mean.dtype == torch.float32
    out.float().sum().backward()
    assert conv.layer.weight.grad.dtype == n.w.grad.dtype == bn.weight.grad.dtype == torch.float32
    assert torch.isfinite(n.w.grad) and n.w.grad != 0


def test_few_tap_conv_equals_the_convolution():
    """The first layer's convolution on two input channels, through ATen's im2col kernel."""
    conv = nn.Conv2d(2, 5, 3, 1, 1, bias=False)
    x = torch.randn(6, 2, 9, 7)
    y = few_tap_conv2d(x, conv.weight, conv.stride, conv.padding)
    torch.testing.assert_close(y, conv(x), rtol=1e-5, atol=1e-6)
    g = torch.randn_like(y)
    g_x, g_w = few_tap_conv_backward(g, x, conv.weight, conv.stride, conv.padding, (True, True))
    x.requires_grad_(True)
    r_x, r_w = torch.autograd.grad(conv(x), [x, conv.weight], g)
    torch.testing.assert_close(g_x, r_x, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(g_w, r_w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("layout", ["transposed", "strided", "channels-last"])
def test_few_tap_conv_takes_any_layout(layout):
    """ATen's kernel reads its input as contiguous: given a transposed or strided one its backward made a
    wrong weight gradient while forward was exact, and it refused a channels-last one (issue 45.1)."""
    torch.manual_seed(0)
    conv = nn.Conv2d(2, 5, 3, 1, 1, bias=False)
    base = torch.randn(4, 2, 9, 9)
    x = {"transposed": base.transpose(-1, -2), "strided": torch.randn(4, 2, 18, 18)[..., ::2, ::2],
         "channels-last": base.contiguous(memory_format=torch.channels_last)}[layout]
    g = torch.randn(4, 5, 9, 9)
    y = few_tap_conv2d(x, conv.weight, conv.stride, conv.padding)
    g_x, g_w = few_tap_conv_backward(g, x, conv.weight, conv.stride, conv.padding, (True, True))
    x_ = x.detach().clone().requires_grad_(True)
    ref = conv(x_)
    ref.backward(g)
    torch.testing.assert_close(y, ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(g_x, x_.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(g_w, conv.weight.grad, rtol=1e-5, atol=1e-5)


def test_a_kernel_module_that_says_it_cannot_run_is_reported_with_its_reason(fresh_table, monkeypatch):
    """The block's kernels load as the neuron's do (plif.kernel_table, one loader): a module whose
    ``unavailable()`` gives a reason (a failed build) is listed unavailable with that reason."""
    import sys
    import types

    mod = types.ModuleType("plif_test_unbuilt_kernels")
    mod.f = lambda *a: None
    mod.why = lambda: "no C++ compiler found"
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    monkeypatch.setitem(fresh_table, "unbuilt", _block_entry(mod.__name__, unavailable="why"))
    assert _state("block", "unbuilt") == "unavailable: no C++ compiler found"
    assert kernel_table.functions("block", "unbuilt") is None
    assert kernel_table.import_kernel(mod.__name__, {"fn": "f"}, "why") == (None, "no C++ compiler found")
    assert kernel_table.import_kernel(mod.__name__, {"fn": "f", "none": None}) == ({"fn": mod.f, "none": None}, None)
    assert kernel_table.import_kernel(mod.__name__, {"fn": "missing"})[1].startswith("AttributeError")
