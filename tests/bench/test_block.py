"""The fused block's GPU benchmark (``plif.bench.block``): its ideal bytes, and its dry run in
Triton's interpreter on the CPU (the check against the reference, then every row it times on CUDA)."""
import importlib.util

import pytest

from plif.bench.block import _ideal_bytes


def test_ideal_bytes_follow_the_kernels_passes():
    """fp32 Gesture block: the forward reads y and writes a quarter of it in spikes plus a byte of
    place per window; the backward also writes g_z (fp32); BatchNorm's input gradient reads g_z
    and y and writes g_y."""
    n = 20 * 16 * 128 * 128 * 128
    got = _ideal_bytes((20, 16, 128, 128, 128), True, 4)
    assert got["stats"] == 4 * n and got["forward"] == 4 * n + n + n // 4
    assert got["backward"] == got["forward"] + 4 * n and got["bn_input_grad"] == 12 * n
    assert got["fwd+bwd"] == got["stats"] + got["forward"] + got["backward"] + got["bn_input_grad"]
    flat = _ideal_bytes((8, 16, 256, 32, 32), False, 2)  # bf16 CIFAR-10 block: no pool, no place
    n = 8 * 16 * 256 * 32 * 32
    assert flat["forward"] == 4 * n and flat["backward"] == 8 * n


@pytest.mark.slow  # one interpreter process, ~10 s
@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="triton is not installed")
def test_dry_run_checks_and_times_every_row_in_the_interpreter():
    from plif.bench.block import run_block_bench

    lines = []
    result = run_block_bench("cpu", log=lines.append)
    assert result["dry"] and result["check_ok"] and len(result["check"]) == 2, result["check"]
    assert [c["case"] for c in result["cases"]] == ["gesture-T3-B2-C4-8x8-float32", "cifar10-T2-B2-C4-6x6-float32"]
    gesture, cifar = ({r["name"]: r for r in c["rows"]} for c in result["cases"])
    fused = ["fused stats", "fused forward", "fused backward", "fused bn_input_grad", "fused fwd", "fused fwd+bwd"]
    assert list(gesture) == fused + ["fused backward, chunks <= 2", "composed fwd", "composed fwd+bwd"]
    assert list(cifar) == fused + ["composed fwd", "composed fwd+bwd"]  # T = 2: one chunk either way
    for row in gesture.values():
        assert row["ms"] > 0 and row["ideal_bytes"] > 0 and row["pct_copy_bound"] > 0, row
        assert row["device_ms"] is None  # no CUDA: no profiler device time
    assert any("fused backward" in line for line in lines)
