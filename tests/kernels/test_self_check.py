"""The fused Triton kernels check themselves against the reference on first use, per dtype, and a
kernel that differs is not used (issue 45, item 8).  Without a GPU the kernels run in Triton's
interpreter: everything interpreted runs in one subprocess with ``TRITON_INTERPRET=1``."""
import importlib.util
import json
import os
import subprocess
import sys

import pytest
import torch

from plif.kernels import self_check

_INTERPRETED = r"""
import json, time, warnings, torch
from plif import kernel_table
from plif.kernels import self_check, triton_block
from plif.layers.fused_block import block_kernels
from plif.neurons import PLIF, NeuronConfig, dispatch

out = {}
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught:
    for family in ("block", "neuron"):
        for dtype in (torch.float32, torch.bfloat16):
            t = time.perf_counter()
            out[f"{family}-{dtype}"] = self_check.passes(family, "triton", "cpu", dtype)
            out[f"{family}-{dtype}-s"] = time.perf_counter() - t
    n = len(self_check.results())
    out["cached"] = self_check.passes("block", "triton", "cpu", torch.float32) and len(self_check.results()) == n
    out["not_checked"] = self_check.passes("block", "cpu", "cpu", torch.float32) and len(self_check.results()) == n
out["results"], out["record"], out["clean"] = self_check.results(), self_check.record(), [str(w.message) for w in caught]

# a wrong block kernel: V_{T-1} off by one; the block then runs the composed layers, said once
self_check.reset()
real = triton_block.block_forward_triton
triton_block.block_forward_triton = lambda *a: (lambda o, p, v: (o, p, v + 1))(*real(*a))
kernel_table.reset()  # loaded again from the module: the check and the block take the wrong kernel
neuron = PLIF(backend="triton")
with warnings.catch_warnings(record=True) as caught:
    out["block_falls_back"] = [block_kernels(neuron, "cpu", torch.float32) is None for _ in range(2)]
out["block_warnings"] = [str(w.message) for w in caught]
out["block_result"] = self_check.results()
triton_block.block_forward_triton = real
kernel_table.reset()

# a wrong neuron kernel where auto would pick it (on CUDA: here told it takes CPU tensors): the next backend runs
self_check.reset()
dispatch.load_backends()
good = dispatch.BACKENDS["triton"]
dispatch.BACKENDS["triton"] = lambda x, k, v0, cfg: (lambda s, v: (1 - s, v))(*good(x, k, v0, cfg))
dispatch._SUPPORTS["triton"] = lambda x, cfg: True
with warnings.catch_warnings(record=True) as caught:
    out["neuron_picks"] = [dispatch.select_backend(torch.zeros(2, 3), NeuronConfig()) for _ in range(2)]
out["neuron_warnings"] = [str(w.message) for w in caught]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def interpreted():
    if importlib.util.find_spec("triton") is None:
        pytest.skip("triton is not installed")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    out = subprocess.run([sys.executable, "-c", _INTERPRETED], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.splitlines()[-1])


def test_each_kernel_passes_its_first_use_check_once_per_dtype(interpreted):
    r = interpreted
    assert all(r[f"{f}-{d}"] for f in ("block", "neuron") for d in ("torch.float32", "torch.bfloat16")), r["results"]
    assert r["cached"] and r["not_checked"] and r["clean"] == []
    got = [(x["kernel"], x["dtype"], x["equal"], x["runs"]) for x in r["results"]]
    assert got == [("triton block", "float32", True, "triton"), ("triton block", "bfloat16", True, "triton"),
                   ("triton neuron", "float32", True, "triton"), ("triton neuron", "bfloat16", True, "triton")]
    assert r["record"] == {"kernel_checks": r["results"]}
    print({k: round(v, 2) for k, v in r.items() if k.endswith("-s")})  # the cost, for docs/speed.md


def test_a_block_kernel_that_differs_is_replaced_by_the_composed_layers_with_one_line(interpreted):
    r = interpreted
    assert r["block_falls_back"] == [True, True] and len(r["block_warnings"]) == 1
    line = r["block_warnings"][0]
    assert "fused triton block kernel differs from the reference on cpu in float32" in line
    assert "v_last" in line and "runs the composed layers instead" in line and "\n" not in line
    (result,) = r["block_result"]
    assert result["equal"] is False and result["differs"] == ["v_last"] and result["runs"] == "composed layers"


def test_a_neuron_kernel_that_differs_is_skipped_by_auto_with_one_line(interpreted):
    r = interpreted
    assert r["neuron_picks"] == ["cpu", "cpu"] and len(r["neuron_warnings"]) == 1
    assert "fused triton neuron kernel differs from the reference on cpu in float32" in r["neuron_warnings"][0]


def test_nothing_is_checked_where_triton_does_not_run(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    self_check.reset()
    assert self_check.run_checks("cpu", [torch.float32]) == [] and self_check.record() == {}
    assert self_check.passes("block", "cpu", "cpu", torch.float32) and self_check.results() == []


def test_inside_a_compiled_graph_a_verdict_is_read_and_a_first_use_is_recorded_unchecked():
    """torch.compile traces the look-up (fullgraph: no break); a check cannot run inside a trace."""
    self_check.reset()

    def step(x):
        return x + 1 if self_check.passes("block", "triton", x.device, x.dtype) else x - 1

    try:
        self_check._RESULTS[("block", "cpu", "float32")] = {"equal": False}
        assert torch.compile(step, fullgraph=True, backend="eager")(torch.zeros(2)).tolist() == [-1, -1]
        self_check.reset()
        torch._dynamo.reset()
        assert torch.compile(step, fullgraph=True, backend="eager")(torch.zeros(2)).tolist() == [1, 1]
        (r,) = self_check.results()
        assert r["equal"] is None and "not checked" in r["note"] and r["runs"] == "triton"
    finally:
        self_check.reset()
        torch._dynamo.reset()


def test_the_run_config_records_the_checks(tiny_fashion, tmp_path, monkeypatch):
    """config.json keeps what was checked and what ran (here a result as a CUDA run's check leaves it)."""
    from plif_testing import quiet, tiny_train_config
    from plif.train import train

    fake = {"kernel": "triton block", "device": "cuda:0", "dtype": "float32", "equal": True, "runs": "triton"}
    monkeypatch.setattr(self_check, "run_checks", lambda device, dtypes: self_check._RESULTS.update({"k": fake}))
    try:
        run = train(tiny_train_config(tiny_fashion, tmp_path / "run", epochs=1), log=quiet)
    finally:
        self_check.reset()
    assert json.loads((run / "config.json").read_text())["kernel_checks"] == [fake]
