"""The fused kernels as ``torch.library`` operators pass ``opcheck`` and match the reference."""
import importlib.util
import json
import os
import subprocess
import sys

import pytest
import torch
from torch.library import opcheck

from plif.kernels.cpu_build import load_library
from plif.neurons import NeuronConfig, multi_step
from plif.surrogate import get_surrogate

needs_lib = pytest.mark.skipif(load_library() is None, reason="the C++ kernel did not build here")


def _sg(name="atan", alpha=2.0):
    sg = get_surrogate(name)
    return (sg.code, *sg.kernel_constants(alpha))


def _forward_args(k_numel, leak=True, hard=True, detach=True, dtype=torch.float32):
    x = torch.randn(5, 3, 4, 2, dtype=dtype, requires_grad=True)
    v0 = torch.rand(3, 4, 2, dtype=dtype, requires_grad=True)
    k = (torch.rand(k_numel, dtype=dtype) * 0.5 + 0.25).requires_grad_(leak)
    if k_numel > 1:
        k = k.detach().view(3, 4, 2).requires_grad_(leak)
    code, a, b = _sg()
    return x, k, v0, leak, hard, 1.0, (0.0 if hard else 0.0), detach, code, a, b


@needs_lib
@pytest.mark.parametrize("k_numel,leak,hard,detach", [(1, True, True, True), (24, True, False, False),
                                                      (1, False, True, False)])
def test_cpu_forward_passes_opcheck(k_numel, leak, hard, detach):
    from plif.kernels.cpu_neuron import cpu_forward

    opcheck(cpu_forward, _forward_args(k_numel, leak, hard, detach))


@needs_lib
def test_cpu_ops_pass_opcheck_with_bf16_inputs():
    """bf16 x with fp32 k and state (CPU autocast): bf16 spikes and ∂x, fp32 H, V and ∂k."""
    from plif.kernels.cpu_neuron import cpu_backward, cpu_forward

    x, k, v0, *rest = _forward_args(24, True, False, False)
    x = x.detach().bfloat16().requires_grad_()
    opcheck(cpu_forward, (x, k, v0, *rest))
    h = torch.randn(5, 3, 4) * 2
    code, a, b = _sg("rect", 2.0)
    opcheck(cpu_backward, (torch.randn(5, 3, 4).bfloat16(), torch.randn(3, 4), h, torch.zeros(3, 4),
                           torch.tensor([0.5]), True, True, 1.0, 0.0, True, code, a, b, True))


@needs_lib
def test_cpu_backward_passes_opcheck():
    from plif.kernels.cpu_neuron import cpu_backward

    h = torch.randn(5, 3, 4) * 2
    code, a, b = _sg("sigmoid", 4.0)
    args = (torch.randn(5, 3, 4), torch.randn(3, 4), h, torch.zeros(3, 4), torch.tensor([0.5]),
            True, True, 1.0, 0.0, False, code, a, b, True)
    opcheck(cpu_backward, args)


@needs_lib
@pytest.mark.parametrize("k_shape", [(), (4, 1, 1), (4, 3, 3)])
def test_cpu_op_matches_reference_through_autograd(k_shape):
    torch.manual_seed(0)
    cfg = NeuronConfig(v_reset=None, detach_reset=False, surrogate="sigmoid")
    x = torch.randn(6, 2, 4, 3, 3, dtype=torch.float64)
    k = torch.rand(k_shape, dtype=torch.float64) * 0.5 + 0.25
    grads = {}
    for backend in ("reference", "cpu"):
        xi, ki = x.clone().requires_grad_(), k.clone().requires_grad_()
        s, v = multi_step(xi, ki, None, cfg, backend)
        (s * torch.linspace(0, 1, s.numel(), dtype=s.dtype).view(s.shape)).sum().add(v.square().sum()).backward()
        grads[backend] = (s, v, xi.grad, ki.grad)
    for a, b in zip(grads["reference"], grads["cpu"]):
        torch.testing.assert_close(a, b)


@needs_lib
def test_cpu_backward_gets_no_full_size_zero_gradient_for_h():
    """``H`` is an output only for backward: autograd must not fill a zero ``∂H`` of the whole
    ``[T, B, ...]`` sequence for it (it did, +22% live peak on DVS128 Gesture, before
    ``set_materialize_grads(False)``)."""
    from plif_testing import ZeroFills

    x = torch.randn(6, 2, 8, 5, 5, requires_grad=True)
    k = torch.tensor(0.5, requires_grad=True)
    spikes, v_last = multi_step(x, k, None, NeuronConfig(), backend="cpu")
    with ZeroFills() as fills:
        spikes.sum().backward()
    assert tuple(x.shape) not in fills.shapes, fills.shapes
    assert x.grad is not None and k.grad is not None
    # V_{T-1} alone reaching the loss still works (∂S is then filled once, by the backward itself)
    x.grad = None
    multi_step(x, k, None, NeuronConfig(), backend="cpu")[1].sum().backward()
    assert x.grad is not None


_TRITON_OPCHECK = """
import json, torch
from torch.library import opcheck
from plif.kernels.triton_neuron import triton_forward, triton_backward
from plif.surrogate import get_surrogate
sg = get_surrogate("atan"); a, b = sg.kernel_constants(2.0)
out = {}
for k in (torch.tensor([0.6]), torch.rand(4) * 0.5 + 0.2):
    args = (torch.randn(4, 3, 4, 5, requires_grad=True), k.requires_grad_(), torch.zeros(3, 4, 5, requires_grad=True),
            5, True, True, 1.0, 0.0, False, True, sg.code, a, b)
    out[f"forward-C{k.numel()}"] = opcheck(triton_forward, args, test_utils=("test_schema", "test_autograd_registration"))
h = torch.randn(4, 3, 4, 5)
out["backward"] = opcheck(triton_backward, (torch.randn(4, 3, 4, 5), torch.randn(3, 4, 5), h, torch.zeros(3, 4, 5),
                          torch.tensor([0.5]), 60, True, False, 1.0, 0.0, False, False, sg.code, a, b, True),
                          test_utils=("test_schema",))
print(json.dumps(out))
"""


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="triton is not installed")
def test_triton_ops_schema_and_autograd_registration_in_the_interpreter():
    """Under Triton's interpreter the kernels run on CPU tensors; the fake-tensor and AOT parts of
    opcheck cannot run there (the interpreter executes the kernel on fake tensors), so they are
    left to the GPU (``benchmarks/gpu``), and the eager results are checked by the kernel grid."""
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, "-c", _TRITON_OPCHECK], env=env, capture_output=True, text=True, timeout=600)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert lines, proc.stderr[-3000:]
    results = json.loads(lines[-1])
    assert set(results) == {"forward-C1", "forward-C4", "backward"}
    for name, checks in results.items():
        assert checks and all(v == "SUCCESS" for v in checks.values()), (name, checks)


@needs_lib
def test_bf16_inputs_run_the_cpu_kernel_with_fp32_state():
    """CPU autocast hands neurons bf16: auto picks the kernel (it fell back to bptt before), the
    sweep widens each input exactly, so spikes equal the fp32 reference on the same values."""
    from plif.neurons import select_backend

    torch.manual_seed(0)
    cfg = NeuronConfig()
    x = (torch.randn(6, 2, 4, 3, 3) * 2).to(torch.bfloat16)
    assert select_backend(x, cfg) == "cpu"
    k = torch.tensor(0.5)
    xb, kb = x.clone().requires_grad_(), k.clone().requires_grad_()
    s, v = multi_step(xb, kb, None, cfg, "cpu")
    assert s.dtype == v.dtype == torch.bfloat16
    g = torch.linspace(0, 1, s.numel()).view(s.shape)
    (s.float() * g).sum().backward()
    xf, kf = x.float().requires_grad_(), k.clone().requires_grad_()
    s_ref, _ = multi_step(xf, kf, None, cfg, "reference")
    (s_ref * g).sum().backward()
    assert torch.equal(s.float(), s_ref)
    assert xb.grad.dtype == torch.bfloat16
    torch.testing.assert_close(xb.grad.float(), xf.grad, rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(kb.grad, kf.grad, rtol=1e-3, atol=1e-3)  # ∂S arrives rounded to bf16
