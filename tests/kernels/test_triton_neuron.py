"""The Triton backend equals the reference loop.

Without a GPU the kernels run in Triton's interpreter, which is chosen when ``triton.jit``
decorates a function, so ``TRITON_INTERPRET=1`` must be set before ``plif.kernels`` is first
imported: the grid runs in one subprocess and each case is reported back as a JSON line.
"""
import importlib.util
import json
import os
import subprocess
import sys

import pytest
import torch

from plif.kernels.check import case_grid

pytestmark = pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="triton is not installed")

DTYPES = ["float32", "bfloat16", "float16"]

_H_BF16 = """
import functools, json, torch
from plif.neurons import register_backend
from plif.kernels.triton_neuron import multi_step_triton
from plif.kernels.check import case_grid, run_case
register_backend("triton-h-bf16", functools.partial(multi_step_triton, h_dtype=torch.bfloat16))
for case in case_grid(quick=True)[::4]:
    print(json.dumps(run_case(case, "triton-h-bf16")))
"""


def _interpret(args: list[str]) -> dict:
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    out = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, timeout=600)
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    if not rows:
        pytest.fail(f"the interpreter run produced no results:\n{out.stderr[-3000:]}")
    return {r["case"]: r for r in rows}


@pytest.fixture(scope="module")
def grid_results():
    return _interpret(["-m", "plif.kernels.check", "--backend", "triton", "--quick", "--json",
                       "--dtypes", ",".join(DTYPES)])


CASES = [(c, d) for d in DTYPES for c in case_grid(quick=True)]


@pytest.mark.parametrize("case,dtype", CASES, ids=[f"{c.name.replace('float32', d)}" for c, d in CASES])
def test_triton_matches_reference(grid_results, case, dtype):
    name = case.name.replace("float32", dtype)
    assert name in grid_results, f"case {name} did not run"
    assert grid_results[name]["ok"], grid_results[name]


def test_bf16_h_storage_keeps_forward_exact_and_gradients_close():
    """Storing H in bf16 changes only backward, by about bf16's rounding (up to ~10% on ∂k, the sum of H differences)."""
    results = _interpret(["-c", _H_BF16])
    assert len(results) >= 10
    for r in results.values():
        assert r["spikes_equal"] and r["v_last"] == 0.0, r
        assert r["g_x"] < 0.05 and r["g_v0"] < 0.05 and r["g_k"] < 0.2, r


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
