"""A training step's bound: FLOPs and activation bytes counted from the network by hand here, peaks
found by the device names torch reports, the larger time of the two the bound."""
import pytest
import torch

from plif.bench.bound import PEAKS, Peaks, activation_bytes, peaks_for, step_bound_ms, step_flops
from plif.models import build_network

SPEC = "c4k3s1-BN-PLIF-MPk2s2-FC10-PLIF"  # a conv of 1 -> 4 channels, 3x3, on 6x6; FC 36 -> 10


def _net():
    with torch.device("meta"):
        return build_network(SPEC, (1, 6, 6), 3)


def test_flops_count_conv_and_fc_multiply_adds_forward_and_backward():
    net = _net()
    conv, fc = 4 * 1 * 9 * 6 * 6, 4 * 3 * 3 * 10  # multiply-adds per sample and step
    assert step_flops(net, 2, static_input=False) == 3 * 2 * 2 * 3 * (conv + fc)
    # a static image: the first conv runs once per sample, before the repeat over T
    assert step_flops(net, 2, static_input=True) == 3 * 2 * 2 * (conv + 3 * fc)


def test_activation_bytes_count_every_layer_output_four_times():
    net = _net()
    elements = 4 * 36 * 3 + 4 * 9 + 10 * 2  # conv, BN, PLIF; pool; FC, PLIF
    assert activation_bytes(net, 2, 4) == 4 * 4 * 2 * 3 * elements
    assert activation_bytes(net, 2, 2) == activation_bytes(net, 2, 4) / 2


@pytest.mark.parametrize("name,hbm,tf32", [("NVIDIA H100 80GB HBM3", 3.35, 494.5), ("NVIDIA H100 PCIe", 2.0, 378.0),
                                           ("NVIDIA H200", 4.8, 494.5), ("NVIDIA H200 NVL", 4.8, 417.5),
                                           ("NVIDIA A100-SXM4-40GB", 1.555, 156.0),
                                           ("NVIDIA A100-SXM4-80GB", 2.039, 156.0)])
def test_peaks_by_the_name_torch_reports(name, hbm, tf32):
    p = peaks_for(name)
    assert (p.hbm_tb_s, p.tf32) == (hbm, tf32) and p.bf16 == pytest.approx(2 * p.tf32, rel=0.01)
    assert peaks_for("NVIDIA GeForce RTX 4090") is None and all(p.fp32 < p.tf32 for _, p in PEAKS)


def test_the_bound_is_the_slower_of_compute_and_memory():
    p = Peaks(fp32=10.0, tf32=100.0, bf16=200.0, hbm_tb_s=1.0)
    assert step_bound_ms(1e12, 1e9, p, "tf32") == pytest.approx(10.0)  # 10 ms of FLOPs, 1 ms of bytes
    assert step_bound_ms(1e12, 1e9, p, "fp32") == pytest.approx(100.0)
    assert step_bound_ms(1e9, 1e10, p, "bf16") == pytest.approx(10.0)  # bytes dominate
    assert step_bound_ms(1e12, 1e9, None, "tf32") is None


def test_bench_rows_carry_the_counts_and_no_bound_without_a_gpu():
    from plif.bench.train import bench_train

    (row,) = bench_train("fashion-mnist", (2,), "cpu", ["auto"], warmup=0, iters=1, T=1, network=SPEC)
    assert row.gflop > 0 and row.activation_gb > 0 and row.precision == "fp32" and row.memory == "fused"
    assert row.bound_ms is None and row.pct_of_bound is None
