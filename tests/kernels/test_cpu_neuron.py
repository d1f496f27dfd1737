"""The compiled CPU backend equals the reference loop: spikes exactly, gradients of x, k, v0 closely."""
import os
import subprocess
import sys

import pytest
import torch

from plif.kernels.check import Case, case_grid, make_inputs, run_case
from plif.kernels.cpu_build import load_library
from plif.kernels.cpu_neuron import multi_step_cpu
from plif.neurons import PLIF, NeuronConfig, multi_step_reference, select_backend

pytestmark = pytest.mark.skipif(load_library() is None, reason="no C++ compiler: the cpu backend falls back to bptt")

GRID = (case_grid() + [Case(**{**c.__dict__, "dtype": "float64"}) for c in case_grid(quick=True)]
        # bf16 inputs, fp32 state: against the fp32 reference on the same rounded values (the Triton tolerance)
        + [Case(**{**c.__dict__, "dtype": "bfloat16"}) for c in case_grid(quick=True)])


@pytest.mark.parametrize("case", GRID, ids=lambda c: c.name)
def test_cpu_matches_reference(case):
    r = run_case(case, "cpu")
    assert r["ok"], r


def test_auto_picks_cpu_for_cpu_float_tensors():
    cfg = NeuronConfig()
    assert select_backend(torch.zeros(2, 3), cfg) == "cpu"
    assert select_backend(torch.zeros(2, 3, dtype=torch.float64), cfg) == "cpu"
    assert select_backend(torch.zeros(2, 3, dtype=torch.bfloat16), cfg) == "cpu"  # fp32 state
    assert select_backend(torch.zeros(2, 3, dtype=torch.float16), cfg) == "bptt"


def test_bf16_is_read_natively_and_equals_the_widened_fp32_sweep():
    """bf16 x is read by the kernel (bf16 spikes and ∂x, fp32 H and V), and every value is exactly
    what the fp32 sweep gives on ``x.float()`` with spikes and ∂x rounded to bf16 afterwards."""
    case = Case((6, 2, 3, 5, 7), "PLIF", "channel", False, False, "sigmoid", "bfloat16")
    x, k, v0, cfg, g_s, g_v = make_inputs(case)
    out = {}
    for name, xi, gi in (("bf16", x, g_s), ("fp32", x.float(), g_s.float())):
        xi, ki, vi = xi.clone().requires_grad_(), k.float().requires_grad_(), v0.float().requires_grad_()
        s, v = multi_step_cpu(xi, ki, vi, cfg)
        out[name] = (s, v, *torch.autograd.grad([s, v], [xi, ki, vi], [gi, g_v.to(v.dtype)]))
    s, v, g_x, g_k, g_v0 = out["bf16"]
    assert s.dtype == v.dtype == g_x.dtype == torch.bfloat16 and g_k.dtype == g_v0.dtype == torch.float32
    assert 0 < s.sum() < s.numel()
    s2, v2, g_x2, g_k2, g_v02 = out["fp32"]
    assert torch.equal(s.float(), s2) and torch.equal(v, v2.bfloat16()) and torch.equal(g_x, g_x2.bfloat16())
    assert torch.equal(g_k, g_k2) and torch.equal(g_v0, g_v02)


def test_plif_layer_trains_the_same_through_auto():
    torch.manual_seed(3)
    x = torch.randn(4, 2, 6, 5, 5) + 0.8
    grads = []
    for backend in ("reference", "auto"):
        layer = PLIF(num_channels=6, backend=backend)
        xx = x.clone().requires_grad_(True)
        s = layer(xx)
        (s * torch.linspace(-1, 1, s.numel()).view(s.shape)).sum().backward()
        grads.append((s.detach(), xx.grad, layer.w.grad))
    assert torch.equal(grads[0][0], grads[1][0])
    assert torch.allclose(grads[0][1], grads[1][1], atol=1e-6)
    assert torch.allclose(grads[0][2], grads[1][2], rtol=1e-5, atol=1e-6)


def test_only_requested_gradients_and_k_without_grad():
    x = (torch.randn(3, 2, 5) + 1).requires_grad_(True)
    k = torch.tensor(0.5)
    s, v = multi_step_cpu(x, k, torch.zeros(2, 5), NeuronConfig())
    (gx,) = torch.autograd.grad(s.sum() + v.sum(), [x])
    s_r, v_r = multi_step_reference(x, k, torch.zeros(2, 5), NeuronConfig())
    (gx_r,) = torch.autograd.grad(s_r.sum() + v_r.sum(), [x])
    assert torch.allclose(gx, gx_r, atol=1e-6)



@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_static_input_read_in_place_and_h_only_when_needed(dtype):
    """A stride-0 (repeated over T) input gives the repeated input's spikes, state and gradients;
    without gradients the kernel keeps no H (nothing to differentiate: evaluation)."""
    from plif.kernels.cpu_neuron import cpu_forward

    torch.manual_seed(0)
    x1 = torch.randn(2, 3, 5, dtype=dtype) + 0.6
    k, v0, cfg = torch.tensor(0.5, dtype=dtype), torch.zeros(2, 3, 5, dtype=dtype), NeuronConfig()
    out = []
    for x in (x1.unsqueeze(0).expand(4, *x1.shape), x1.unsqueeze(0).repeat(4, 1, 1, 1)):
        xi, ki = x.detach().requires_grad_(), k.clone().requires_grad_()
        s, v = multi_step_cpu(xi, ki, v0, cfg)
        (s * torch.linspace(-1, 1, s.numel(), dtype=dtype).view(s.shape)).sum().add(v.sum()).backward()
        out.append((s, v, xi.grad, ki.grad))
    for a, b in zip(*out):
        assert torch.equal(a, b)
    args = (k.reshape(1), v0, True, True, 1.0, 0.0, True, 0, 1.0, 1.5)
    s_keep, h, _ = cpu_forward(x1.unsqueeze(0).expand(4, *x1.shape), *args)
    s_none, h_none, _ = cpu_forward(x1.unsqueeze(0).expand(4, *x1.shape), *args, keep_h=False)
    assert torch.equal(s_keep, s_none) and h.shape == (4, 2, 3, 5) and h_none.numel() == 0
    with torch.no_grad():
        assert torch.equal(multi_step_cpu(x1.unsqueeze(0).expand(4, *x1.shape), k, v0, cfg)[0], s_keep)

def test_rejects_unsupported_input():
    with pytest.raises(ValueError, match="fp32/fp64/bf16 CPU"):
        multi_step_cpu(torch.zeros(2, 3, dtype=torch.float16), torch.tensor(0.5), torch.zeros(3), NeuronConfig())


def test_failed_build_falls_back_to_bptt(tmp_path):
    """With no working compiler the backend is not chosen and the layer still runs."""
    code = ("import torch; from plif.neurons import PLIF, select_backend, NeuronConfig; "
            "from plif.kernels import cpu_build; "
            "assert select_backend(torch.zeros(2, 3), NeuronConfig()) == 'bptt'; "
            "assert cpu_build.BUILD_ERROR and 'failed' in cpu_build.BUILD_ERROR, cpu_build.BUILD_ERROR; "
            "PLIF()(torch.randn(3, 2, 4)).sum(); print('fallback-ok')")
    env = {**os.environ, "CXX": "false", "PLIF_CACHE_DIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "fallback-ok" in out.stdout, out.stderr


def test_operator_refuses_state_in_another_dtype():
    """The kernel would misread a bf16 v0 as fp32 (and write fp32 H into a bf16 buffer)."""
    from plif.kernels.cpu_neuron import cpu_forward

    x = torch.zeros(2, 3, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="state in torch.float32: v0 and k must be torch.float32"):
        cpu_forward(x, torch.tensor([0.5]), torch.zeros(3, dtype=torch.bfloat16), True, True, 1.0, 0.0, True, 0, 1.0, 1.0)


def test_native_build_is_keyed_by_the_cpu_and_falls_back_to_portable(tmp_path, monkeypatch, capsys):
    """The library is built for this CPU (-march=native) under a key naming the CPU, so a cache
    shared by two machines keeps one build each; a compiler that refuses the flag gets the
    portable build."""
    from plif.kernels import cpu_build

    monkeypatch.setenv("PLIF_CACHE_DIR", str(tmp_path))
    native, portable = cpu_build.FLAGS + cpu_build.NATIVE, cpu_build.FLAGS
    where = {}
    for cpu in ("cpu one", "cpu two"):
        monkeypatch.setattr(cpu_build, "_cpu_id", lambda cpu=cpu: cpu)
        where[cpu] = (cpu_build._target("g++", native, "v1"), cpu_build._target("g++", portable, "v1"))
    assert where["cpu one"][0] != where["cpu two"][0] and where["cpu one"][1] == where["cpu two"][1]
    # refuses -march=native; otherwise checks the sources compile with the flags it is given (the
    # portable ones: other code under the AVX-512 guards) and writes the library file without the
    # optimised code generation, which the suite's native build already exercises (~40 s of g++)
    picky = tmp_path / "picky-cxx"
    picky.write_text('#!/bin/sh\ncase "$*" in *-march=native*) echo "no native here" >&2; exit 1;; '
                     '*--version*) echo picky 1; exit 0;; esac\n'
                     f'echo "$*" >> {tmp_path}/calls\n'
                     'for a; do out=$a; done\n'
                     f'{cpu_build._compiler()} "$@" -fsyntax-only && echo portable > "$out"\n')
    picky.chmod(0o755)
    built = cpu_build._build(str(picky))
    assert built == cpu_build._target(str(picky), portable, "picky 1\n") and built.read_text() == "portable\n"
    # a first use says it compiles, once; a cached build says nothing
    assert capsys.readouterr().err.count("plif: compiling the CPU kernels for this machine, once") == 1
    assert cpu_build._build(str(picky)) == built and capsys.readouterr().err == ""
    calls = (tmp_path / "calls").read_text().splitlines()  # each source compiled, then the link
    assert len(calls) == len(cpu_build.SOURCES) + 1 and not any("-march=native" in c for c in calls)
    assert all(s in " ".join(calls) for s in map(str, cpu_build.SOURCES)) and calls[-1].split()[:len(portable)] == portable


def test_concurrent_builds_of_one_library_compile_it_once(tmp_path, monkeypatch):
    """Two processes (here two threads, each with its own lock) that need the same library at once:
    the second waits for the first's build instead of compiling it again (pytest-xdist workers, or
    torchrun ranks, on a fresh machine)."""
    import threading

    from plif.kernels import cpu_build

    monkeypatch.setenv("PLIF_CACHE_DIR", str(tmp_path))
    slow = tmp_path / "slow-cxx"
    slow.write_text(f'#!/bin/sh\necho x >> {tmp_path}/calls\nsleep 1\nfor a; do out=$a; done\necho lib > "$out"\n')
    slow.chmod(0o755)
    built = []
    threads = [threading.Thread(target=lambda: built.append(cpu_build._build_with(str(slow), ["-O3"], "v")))
               for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(built) == 2 and built[0] == built[1] and built[0].read_text() == "lib\n"
    assert (tmp_path / "calls").read_text() == "x\n" * (len(cpu_build.SOURCES) + 1)  # one build: its compiles and link
