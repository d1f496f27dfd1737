"""The Triton backend equals the reference loop.

Without a GPU the kernels run in Triton's interpreter, which is chosen when ``triton.jit``
decorates a function, so ``TRITON_INTERPRET=1`` must be set before ``plif.kernels`` is first
imported: everything interpreted runs in one subprocess (one import of torch and Triton) and each
case is reported back as a JSON line tagged with its group.
"""
import importlib.util

import pytest
import torch

from plif.kernels.check import case_grid

pytestmark = [pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="triton is not installed"),
              pytest.mark.slow]  # one interpreter run of ~35 s

DTYPES = ["float32", "bfloat16", "float16"]
# The half types change how x and the spikes are loaded and stored, not the variant logic: in the
# interpreter (about 0.3 s a case) they take every third case of the grid, fp32 takes all of it.
# The GPU script's grid stage runs the whole grid in all three types on the device.
HALF_STRIDE = 3


def _grid(dtype: str) -> list:
    cases = case_grid(quick=True)
    return cases if dtype == "float32" else cases[::HALF_STRIDE]


_INTERPRETED = """
import functools, json, sys, torch
sys.path.insert(0, sys.argv[3])
import triton_bounds
triton_bounds.install()  # every load and store checked against the launch's tensors
from dataclasses import asdict
from plif.neurons import register_backend
from plif.kernels.triton_neuron import multi_step_triton
from plif.kernels.check import Case, _run, case_grid, make_inputs, run_case
for dtype in sys.argv[1].split(","):
    for case in case_grid(quick=True)[::1 if dtype == "float32" else int(sys.argv[2])]:
        r = run_case(Case(**{**asdict(case), "dtype": dtype}), "triton")
        print(json.dumps({"group": "grid", **r, "out_of_bounds": triton_bounds.take()}), flush=True)
register_backend("triton-h-bf16", functools.partial(multi_step_triton, h_dtype=torch.bfloat16))
for case in case_grid(quick=True)[::4]:
    print(json.dumps({"group": "h_bf16", **run_case(case, "triton-h-bf16")}), flush=True)
from plif.kernels.triton_neuron import _operator_args, triton_forward
def through_operator(x, k, v0, cfg, g_s, g_v):  # as torch.compile and opcheck reach the kernels
    x, k, v0 = (t.detach().clone().requires_grad_(True) for t in (x, k, v0))
    s, _, v = triton_forward(*_operator_args(x, k, v0, cfg, torch.float32))
    grads = torch.autograd.grad([s, v], [x, k, v0], [g_s, g_v], allow_unused=True)
    return s.detach(), v.detach(), grads
for case in (Case((5, 2, 3, 13, 17), "PLIF", "channel", True, False), Case((3, 2, 4, 5, 6), "LIF", "layer", False, True, "rect"),
             Case((4, 3, 6), "IF")):
    x, k, v0, cfg, g_s, g_v = make_inputs(case)
    base = _run("triton", x, k, v0, cfg, g_s, g_v)  # the eager call: the autograd.Function, directly
    runs = [("operator", through_operator(x, k, v0, cfg, g_s, g_v))]
    if x.dim() == 5:
        runs.append(("channels_last", _run("triton", x, k, v0, cfg, g_s, g_v, "channels_last")))
    for path, (s, v, (g_x, g_k, g_v0)) in runs:
        same = [torch.equal(a, b) for a, b in zip((s, v, g_x, g_v0), (base[0], base[1], base[2][0], base[2][2]))]
        g_k_err = 0.0 if g_k is None and base[2][1] is None else float((g_k - base[2][1]).abs().max() / base[2][1].abs().max())
        print(json.dumps({"group": "exact", "case": f"{case.name}-{path}", "same": same, "g_k": g_k_err}))
"""


INTERPRETER_ARGS = (",".join(DTYPES), str(HALF_STRIDE))  # the script's argv before the tests folder (conftest.py)


@pytest.fixture(scope="module")
def grid_results(interpreted):
    return interpreted["grid"]


CASES = [(c, d) for d in DTYPES for c in _grid(d)]


@pytest.mark.parametrize("case,dtype", CASES, ids=[f"{c.name.replace('float32', d)}" for c, d in CASES])
def test_triton_matches_reference(grid_results, case, dtype):
    name = case.name.replace("float32", dtype)
    assert name in grid_results, f"case {name} did not run"
    assert grid_results[name]["ok"], grid_results[name]
    assert not grid_results[name]["out_of_bounds"], grid_results[name]  # tests/triton_bounds.py


def test_bf16_h_storage_keeps_forward_exact_and_gradients_close(interpreted):
    """Storing H in bf16 changes only backward, by about bf16's rounding (up to ~10% on ∂k, the sum of H differences)."""
    results = interpreted["h_bf16"]
    assert len(results) >= 10
    for r in results.values():
        assert r["spikes_equal"] and r["v_last"] == 0.0, r
        assert r["g_x"] < 0.05 and r["g_v0"] < 0.05 and r["g_k"] < 0.2, r


def test_the_operator_path_and_a_channels_last_input_compute_what_the_eager_call_does(interpreted):
    """The custom operator (what ``torch.compile`` and ``opcheck`` trace) and a channels-last input
    change how the kernels are reached, not what they compute: spikes, V, ∂x and ∂V_{-1} are
    bit-identical to the eager call's (an ``autograd.Function`` entered directly), and so is ∂k (the
    same blocks summed in the same order; a channels-last input's blocks hold other neurons: rounding);
    IF has no ∂k on either path."""
    results = interpreted["exact"]
    assert sorted(r["case"].split("-")[-1] for r in results.values()) == ["channels_last"] * 2 + ["operator"] * 3
    for r in results.values():
        assert all(r["same"]), r
        assert r["g_k"] == 0.0 if r["case"].endswith("operator") else r["g_k"] < 1e-6, r


def test_channels_last_steps_are_read_in_place_only_with_one_tau_per_layer():
    from plif.kernels.check import _channels_last
    from plif.kernels.triton_neuron import _steps, _strided_as

    x = _channels_last(torch.randn(3, 2, 4, 5, 6))
    assert _steps(x, per_layer=True) is x
    assert _steps(x, per_layer=False).is_contiguous() and torch.equal(_steps(x, per_layer=False), x)
    assert _steps(x[:, :, :2], per_layer=True).is_contiguous()  # a slice is not dense: copied
    v0 = torch.randn(2, 4, 5, 6)
    assert _strided_as(v0, x[0]).stride() == x[0].stride() and torch.equal(_strided_as(v0, x[0]), v0)
    assert _strided_as(v0, v0) is v0


def test_h_dtype_is_validated():
    from plif.kernels.triton_neuron import multi_step_triton
    from plif.neurons import NeuronConfig

    with pytest.raises(ValueError, match="h_dtype"):
        multi_step_triton(torch.zeros(2, 3), torch.tensor(0.5), torch.zeros(3), NeuronConfig(), h_dtype=torch.float16)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_launch_path_never_syncs_with_the_host():
    from plif.neurons import PLIF, select_backend

    layer = PLIF(num_channels=8).cuda()
    x = torch.randn(8, 4, 8, 16, 16, device="cuda", requires_grad=True)
    assert select_backend(x, layer.cfg) == "triton"
    layer(x).sum().backward()  # compile outside the checked region
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        layer(x).sum().backward()
    finally:
        torch.cuda.set_sync_debug_mode("default")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_grid_matches_reference():
    from plif.kernels.check import main

    assert main(["--backend", "triton", "--device", "cuda", "--dtypes", ",".join(DTYPES)]) == 0
