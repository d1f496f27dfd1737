"""``plif bench train`` variants: CPU rows, CUDA-only variants refuse on CPU, unknown names fail."""
import re

import pytest

from plif.bench.train import bench_train


def test_cpu_variants_give_rows_with_ratios():
    rows = bench_train("fashion-mnist", (2,), "cpu", ["naive", "auto", "auto+bf16"], warmup=0, iters=1, T=1)
    assert [(r.variant, r.batch) for r in rows] == [("naive", 2), ("auto", 2), ("auto+bf16", 2)]
    naive, auto, _ = rows
    assert auto.samples_per_s == pytest.approx(2 / (auto.ms_per_step / 1e3))
    assert auto.ratio_to_naive == pytest.approx(naive.ms_per_step / auto.ms_per_step)  # the other row's time


@pytest.mark.parametrize("variant", ["cuda-graph", "cuda-graph+bf16", "auto+graph"])
def test_cuda_variants_refuse_on_cpu(variant):
    with pytest.raises(ValueError, match=re.escape(f"variant {variant!r} needs a CUDA device")):
        bench_train("fashion-mnist", (2,), "cpu", [variant])


def test_unknown_variant():
    with pytest.raises(ValueError, match="unknown variant 'fast'; valid: naive, bptt, auto"):
        bench_train("fashion-mnist", (2,), "cpu", ["fast"])
