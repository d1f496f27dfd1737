"""The fused block's GPU benchmark (``plif.bench.block``): its ideal bytes (its dry run in Triton's
interpreter is tested by the GPU script's dry run)."""
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


# The interpreter run of every row (checked, timed, its rows named) is asserted in
# tests/kernels/test_gpu_script.py's dry run, whose block stage makes the same run_block_bench call:
# running it twice cost the suite ~22 s.
